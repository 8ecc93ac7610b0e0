"""Pipeline parallel (Megatron's `--pipeline-model-parallel-size`, with torch.distributed.pipelining): the model's
blocks cut into stages of consecutive blocks, one stage a rank, the step's micro-batches (`--grad-accum`) flowing
through them under GPipe or 1F1B; data parallel across the copies, tensor parallel inside a stage with `--tp`.

A stage runs the model's own forward, so that whatever a model builds before its blocks (position ids, the causal
mask, rotary embeddings) is built as it always is, with no model-specific code here:
- the blocks of other stages are dropped from the model's block list;
- a stage after the first replaces its first block's input with the hidden states it received;
- a stage before the last stops at its last block's output (`_StageEnd`), which it sends on;
- the last stage returns the logits, and the loss is the model's own loss function on them.
The layers outside the blocks (embeddings, final norm, LM head; GPT-2's and BERT's tied embedding and head) stay
whole on every stage, as Megatron keeps the embedding on its first and last stage: each step sums their gradients
over the stages, so every stage updates them alike.

The run's data has no padding (every attention mask is all ones), which lets a stage after the first build the
model's masks from its input's shape alone.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

from portlayer.errors import PortlayerError
from portlayer.strategies import Strategy
from portlayer.strategies.block_calls import changing_input, hidden_output
from portlayer.strategies.fsdp2 import blocks
from portlayer.strategies.gathered_state import ON_EVERY_RANK
from portlayer.strategies.gradients import flatten_into, total_norm
from portlayer.strategies.layout import GPIPE
from portlayer.strategies.parallel import Setup
from portlayer.strategies.tensor_parallel import TensorParallel, split_apart, split_layers

_SCHEDULES = {GPIPE: ScheduleGPipe}  # 1F1B otherwise
# Not the outputs: the last stage would keep every micro-batch's logits until the step ends (a torch without the
# switch, before 2.8, keeps them).
_NO_OUTPUTS = {"return_outputs": False} if "return_outputs" in inspect.signature(ScheduleGPipe.step).parameters else {}


class _StageEnd(Exception):
    """Raised from the stage's last block to end the model's forward there, carrying the block's output."""

    def __init__(self, hidden: torch.Tensor):
        super().__init__("end of the pipeline stage")
        self.hidden = hidden


@dataclass(frozen=True)
class StagePlace:
    index: int  # which stage, from 0
    count: int  # how many stages

    @property
    def first(self) -> bool:
        return self.index == 0

    @property
    def last(self) -> bool:
        return self.index == self.count - 1


class Stage(torch.nn.Module):
    """One stage of a transformers model: `forward(input_ids)` on the first, `forward(hidden)` after it; hidden
    states out, the logits out of the last."""

    def __init__(self, core: torch.nn.Module, place: StagePlace):
        super().__init__()
        self.core, self.place = core, place
        kept = _keep_stage_blocks(core, place)
        self._received: torch.Tensor | None = None
        if not place.first:
            kept[0].register_forward_pre_hook(changing_input(lambda unused: self._received), with_kwargs=True)
        if not place.last:
            kept[-1].register_forward_hook(_end_stage)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        if self.place.first:
            input_ids = inputs
        else:
            # The model's own forward builds positions and masks from these ids' shape; their embedding is unused.
            input_ids = torch.zeros(inputs.shape[:2], dtype=torch.long, device=inputs.device)
            self._received = inputs
        try:
            outputs = self.core(input_ids=input_ids, attention_mask=torch.ones_like(input_ids)).logits
        except _StageEnd as end:
            outputs = end.hidden
        finally:
            self._received = None
        return outputs.float()  # what travels between stages is fp32, under autocast too (`_wire`)


def _end_stage(module, inputs, output):
    raise _StageEnd(hidden_output(output))


def _keep_stage_blocks(core: torch.nn.Module, place: StagePlace) -> list[torch.nn.Module]:
    """Drop the blocks of the other stages from the model's block list; this stage's blocks, in order."""
    found = blocks(core)
    names = {id(module): name for name, module in core.named_modules()}
    parents = {names[id(block)].rpartition(".")[0] for block in found}
    if len(parents) != 1 or not isinstance(holder := core.get_submodule(parents.pop()), torch.nn.ModuleList):
        raise PortlayerError(f"pipeline parallel cuts one list of blocks into stages, and {type(core).__name__} "
                             "keeps its blocks otherwise")  # fmt: skip
    per_stage = len(holder) // place.count
    kept = list(holder)[place.index * per_stage:(place.index + 1) * per_stage]
    holder_name = names[id(holder)]
    parent_name, _, attribute = holder_name.rpartition(".")
    setattr(core.get_submodule(parent_name), attribute, torch.nn.ModuleList(kept))
    return kept


class PipelineParallel(TensorParallel):
    """This rank's stage of the model (split over `setup.tensor_group` with --tp), trained by a torch schedule."""

    gathered_to = ON_EVERY_RANK  # the stage's writer is not rank 0

    def __init__(self, stage: Stage, core, optimizer, scheduler, setup: Setup, schedule):
        super().__init__(stage, core, optimizer, scheduler, setup)
        self.place, self.schedule = stage.place, schedule
        inside = {id(parameter) for parameter in self.block_parameters}
        # The layers outside the blocks, which every stage holds (embeddings, final norm, head).
        self.shared_parameters = [parameter for parameter in core.parameters() if id(parameter) not in inside]

    @classmethod
    def prepare(cls, strategy: Strategy, core: torch.nn.Module, setup: Setup) -> PipelineParallel:
        setup.layout.check_model(core.config)  # the blocks split whole over the stages (the launcher checked too)
        if getattr(core.config, "output_router_logits", False):
            raise PortlayerError("pipeline parallel takes the loss from the last stage's logits, without the router's "
                                 "auxiliary loss: set output_router_logits false (--override-config)")  # fmt: skip
        place = StagePlace(dist.get_rank(setup.pipeline_group), dist.get_world_size(setup.pipeline_group))
        plan = split_layers(core, setup) if setup.tensor_group is not None else None  # of the whole model's forward
        stage = Stage(core, place)
        if plan is not None:
            plan.apply(core)
        pipeline_stage = PipelineStage(stage, place.index, place.count, setup.device, *_wire(core, place, setup),
                                       group=setup.pipeline_group)  # fmt: skip
        # Every stage's schedule is given the loss (the last computes it): torch's trains only a schedule with one.
        schedule = _SCHEDULES.get(setup.layout.schedule, Schedule1F1B)(pipeline_stage, setup.grad_accum,
                                                                      loss_fn=_model_loss(core))  # fmt: skip
        optimizer = setup.make_optimizer(split_apart(core))
        return cls(stage, core, optimizer, setup.make_scheduler(optimizer), setup, schedule)

    @property
    def engine(self) -> str:
        split = super().engine.replace("torch tensor parallel", "tensor parallel") if self.setup.tensor_group else ""
        data = dist.get_world_size(self.setup.group)
        stages = f"torch pipeline parallel over {self.place.count} stages ({self.setup.layout.schedule})"
        return f"{stages}, {split}" if split else f"{stages}, data parallel over {data}"

    def forward_backward(self, micro_batches) -> list[torch.Tensor]:
        batches = list(micro_batches)
        labels = torch.cat([batch["labels"] for batch in batches])
        losses: list[torch.Tensor] = []
        inputs = (torch.cat([batch["input_ids"] for batch in batches]),) if self.place.first else ()
        with self.forward_context():
            self.schedule.step(*inputs, target=labels if self.place.last else None, losses=losses, **_NO_OUTPUTS)
        if not self.place.last:
            return [torch.zeros((), device=self.setup.device) for _ in batches]  # the loss is the last stage's
        return [loss.detach().float() for loss in losses]

    @torch.no_grad()
    def evaluation_loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """One forward through the stages, by send and receive (the schedule's micro-batches are training's)."""
        group, device = self.setup.pipeline_group, self.setup.device
        hidden_size = self.core.config.hidden_size
        with self.forward_context():
            if self.place.first:
                inputs = batch["input_ids"]
            else:
                inputs = torch.empty((*batch["input_ids"].shape, hidden_size), device=device)
                dist.recv(inputs, src=dist.get_global_rank(group, self.place.index - 1), group=group)
            outputs = self.model(inputs)
        if not self.place.last:
            dist.send(outputs.float().contiguous(), dst=dist.get_global_rank(group, self.place.index + 1), group=group)
            return None
        return _model_loss(self.core)(outputs, batch["labels"])

    def local_gradients(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        # Every stage holds the layers outside the blocks; the first and the last use them: their gradients summed.
        for parameter in self.shared_parameters:
            if parameter.grad is None:
                parameter.grad = torch.zeros_like(parameter)
        flatten_into([parameter.grad for parameter in self.shared_parameters], self.setup.pipeline_group)
        return super().local_gradients()

    def gradient_norm(self, grads: list[torch.Tensor], local: list[torch.Tensor]) -> torch.Tensor:
        staged = {id(p.grad) for p in self.block_parameters if p.grad is not None}
        return total_norm(grads, local, self.setup.tensor_group, self.setup.pipeline_group, staged)

    def save(self, folder: Path, rank: int) -> None:
        """Each stage's state in a file of its own, written by the stage's first rank of the first copy: a
        checkpoint resumes under the same layout."""
        state = self.full_state()
        if dist.get_rank(self.setup.group) == 0 and (self.setup.tensor_group is None
                                                      or dist.get_rank(self.setup.tensor_group) == 0):  # fmt: skip
            state.update(scheduler=self.scheduler.state_dict(), scaler=self.scaler.state_dict())
            torch.save(state, folder / self.state_file)

    @property
    def state_file(self) -> str:
        return f"model-optimizer.stage-{self.place.index}-of-{self.place.count}.pt"

    def load(self, folder: Path) -> None:
        self.load_from(folder / self.state_file)


def _wire(core: torch.nn.Module, place: StagePlace, setup: Setup) -> tuple[torch.Tensor, torch.Tensor]:
    """(an example of the stage's input, of its output), per micro-batch: token ids into the first stage, fp32
    hidden states between stages, fp32 logits out of the last. Given, the schedule infers nothing at its first
    step; inferring runs a forward and backward whose gradients it leaves on the parameters (torch 2.13)."""
    config, device = core.config, setup.device
    tokens = (setup.micro_batch, setup.seq_len)
    # Requiring gradients, as they do: a stage sends the gradient of what it received back to the stage before.
    hidden = torch.empty((*tokens, config.hidden_size), device=device, requires_grad=True)
    logits = torch.empty((*tokens, config.vocab_size), device=device, requires_grad=True)
    first = torch.zeros(tokens, dtype=torch.long, device=device)
    return (first if place.first else hidden), (logits if place.last else hidden)


def _model_loss(core: torch.nn.Module):
    """The loss the model computes from its logits and labels (transformers' `loss_function`: causal LMs shift the
    labels, masked LMs do not), as the loss of the pipeline's last stage."""
    vocab_size = core.config.vocab_size

    def loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return core.loss_function(logits=logits, labels=labels, vocab_size=vocab_size)

    return loss
