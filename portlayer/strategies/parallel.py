"""A model prepared for data-parallel training under a strategy: what the training loop calls.

`Parallel` is the ddp strategy (and a single process): torch's DistributedDataParallel, the loop's own
optimizer, schedule and gradient scaler, and a checkpoint of the full state written by rank 0. The sharded
strategies refine it (`fsdp2.py`, `zero.py`); the loop sees one interface:

    parallel = prepare(get_strategy(name), model, setup)
    for each micro-batch: with parallel.accumulating(last): parallel.backward(parallel.model(**batch).loss)
    grad_norm = parallel.step()   # the total gradient norm before clipping
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

import portlayer
from portlayer.errors import PortlayerError
from portlayer.precision import PRECISIONS
from portlayer.strategies import Strategy
from portlayer.strategies.layout import Layout

# The file of a checkpoint folder that holds a strategy's model and optimizer state when rank 0 writes it whole.
STATE_FILE = "model-optimizer.pt"


@dataclass(frozen=True)
class Setup:
    """What every strategy needs to know about the run, besides the model."""

    group: Any  # the data-parallel group, which averages gradients; None when not distributed
    device: torch.device
    make_optimizer: Callable[[Any], torch.optim.Optimizer]  # parameters -> optimizer
    make_scheduler: Callable[[torch.optim.Optimizer], Any]  # optimizer -> learning-rate schedule
    micro_batch: int
    grad_accum: int
    max_grad_norm: float
    precision: str = "fp32"
    seq_len: int | None = None  # tokens per sample (a pipeline's stages exchange tensors of known shape)
    tensor_group: Any = None  # the ranks that split each layer (`layout.Layout`); None: no tensor parallel
    pipeline_group: Any = None  # the stages of this rank's copy of the model, in order; None: no pipeline
    layout: Layout = Layout()


class Parallel:
    """DDP (or one process): gradients all-reduced on the last micro-batch, then clip, step, schedule."""

    def __init__(self, model, core, optimizer, scheduler, setup: Setup):
        self.model = model  # what the loop calls: the wrapper
        self.core = core  # the bare model underneath (its config, its state)
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.setup = setup
        self.scaler = portlayer.GradScaler(enabled=setup.precision == "fp16")

    @classmethod
    def prepare(cls, strategy: Strategy, core: torch.nn.Module, setup: Setup) -> Parallel:
        model = core
        if setup.group is not None:
            model = torch.nn.parallel.DistributedDataParallel(
                core, device_ids=portlayer.ddp_device_ids(setup.device), process_group=setup.group
            )
        optimizer = setup.make_optimizer(core.parameters())
        return cls(model, core, optimizer, setup.make_scheduler(optimizer), setup)

    @property
    def engine(self) -> str:
        """What applies the strategy, for the run file: the library and, for DeepSpeed, its accelerator."""
        return "torch DistributedDataParallel" if self.setup.group is not None else "torch (one process)"

    def accumulating(self, last: bool):
        """The context of one micro-batch's forward and backward: gradients are reduced on the last only."""
        if last or self.setup.group is None:
            return contextlib.nullcontext()
        return self.model.no_sync()

    def forward_context(self):
        """The block a forward runs in: autocast to the precision's 16-bit type, or nothing for fp32."""
        chosen = PRECISIONS[self.setup.precision]
        return portlayer.autocast(enabled=chosen.autocast, dtype=chosen.dtype)

    def forward_backward(self, micro_batches: Iterable[dict[str, torch.Tensor]]) -> list[torch.Tensor]:
        """Forward and backward of one step's micro-batches (`grad_accum` of them), gradients reduced on the last;
        this rank's loss of each, on the device, unread."""
        losses = []
        for position, batch in enumerate(micro_batches):
            with self.accumulating(last=position == self.setup.grad_accum - 1):
                with self.forward_context():
                    loss = self.model(**batch).loss
                self.backward(loss)
            losses.append(loss.detach().float())
        return losses

    @torch.no_grad()
    def evaluation_loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """The model's loss on `batch` (in eval mode); None on a rank that computes no loss (a pipeline's
        stages before the last)."""
        with self.forward_context():
            return self.model(**batch).loss

    def backward(self, loss: torch.Tensor) -> None:
        self.scaler.scale(loss / self.setup.grad_accum).backward()

    def step(self) -> torch.Tensor | float:
        """Clip, step the optimizer and the schedule; returns the total gradient norm before clipping (a tensor
        on the device, read when the step is recorded: no wait for the device here)."""
        norm = self.clip_gradients()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return norm

    def clip_gradients(self) -> torch.Tensor:
        """Clip the gradients to `max_grad_norm`; their total norm before clipping."""
        self.scaler.unscale_(self.optimizer)  # clip the true gradients, not the fp16-scaled ones
        return torch.nn.utils.clip_grad_norm_(self.core.parameters(), self.setup.max_grad_norm)

    def full_state(self) -> dict:
        """The whole model and optimizer state (collective where the state is sharded: every rank calls it)."""
        return {"model": self.core.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_full_state(self, state: dict) -> None:
        self.core.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])

    def save(self, folder: Path, rank: int) -> None:
        """Write this strategy's state into checkpoint `folder`; every rank calls it."""
        state = self.full_state()
        if rank == 0:
            state.update(scheduler=self.scheduler.state_dict(), scaler=self.scaler.state_dict())
            torch.save(state, folder / STATE_FILE)

    def load(self, folder: Path) -> None:
        self.load_from(folder / STATE_FILE)

    def load_from(self, path: Path) -> None:
        """Load the state `save` wrote into `path`."""
        folder = path.parent
        if not path.exists():
            raise PortlayerError(f"{folder}: no {path.name}; was it saved under another strategy or layout?")
        # weights_only=False: the scheduler's state holds the schedule's lambdas' settings, written by us.
        state = torch.load(path, map_location="cpu", weights_only=False)
        self.load_full_state(state)
        self.scheduler.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])
