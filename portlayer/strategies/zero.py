"""The zero1, zero2 and zero3 strategies: DeepSpeed's own engine at that ZeRO stage.

The engine wraps the loop's optimizer and schedule (DeepSpeed steps both at the last micro-batch of a step,
and clips there), on the accelerator portlayer's backend gives it (`deepspeed_accelerator`). A checkpoint is
DeepSpeed's own: every rank writes its shard of the optimizer state into the checkpoint folder.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch

from portlayer.errors import PortlayerError
from portlayer.strategies import Strategy
from portlayer.strategies.deepspeed_accelerator import use_active_backend
from portlayer.strategies.parallel import Parallel, Setup

# The tag (sub-folder) DeepSpeed writes its checkpoint under, inside the trainer's checkpoint folder.
CHECKPOINT_TAG = "deepspeed"
# DeepSpeed prints a throughput line every `steps_per_print` steps: never, the trainer reports its own.
_NEVER = 2**31 - 1


def deepspeed_config(strategy: Strategy, setup: Setup) -> dict:
    """The engine's configuration: the trainer's batch split and clipping, the strategy's ZeRO stage."""
    return {
        "train_micro_batch_size_per_gpu": setup.micro_batch,
        "gradient_accumulation_steps": setup.grad_accum,
        "gradient_clipping": setup.max_grad_norm,
        "zero_optimization": {"stage": strategy.zero_stage},
        # The loop's torch AdamW, not one of DeepSpeed's compiled optimizers (none are built here).
        "zero_allow_untested_optimizer": True,
        "steps_per_print": _NEVER,
    }


class ZeroParallel(Parallel):
    @classmethod
    def prepare(cls, strategy: Strategy, core: torch.nn.Module, setup: Setup) -> ZeroParallel:
        if setup.precision == "fp16":
            raise PortlayerError(
                f"--strategy {strategy.name} with --precision fp16: the trainer's loss scaling is torch's, "
                "not DeepSpeed's; use bf16 or fp32"
            )
        use_active_backend()
        import deepspeed

        engine, optimizer, _, scheduler = deepspeed.initialize(
            model=core,
            optimizer=setup.make_optimizer(core.parameters()),
            lr_scheduler=setup.make_scheduler,
            config=deepspeed_config(strategy, setup),
        )
        return cls(engine, core, optimizer, scheduler, setup)

    def accumulating(self, last: bool):
        # The engine knows the accumulation boundary from its config and reduces there itself.
        return contextlib.nullcontext()

    def backward(self, loss: torch.Tensor) -> None:
        self.model.backward(loss)  # scaled by 1 / gradient_accumulation_steps, as the ddp loop does
        # The engine counts micro-batches in step(): at the last of a step it clips, steps the optimizer and
        # the schedule, and zeroes the gradients; before it, it only advances.
        self.model.step()

    def step(self) -> None:
        """Nothing left: the engine stepped at the step's last micro-batch (`backward`)."""

    def save(self, folder: Path, rank: int) -> None:
        self.model.save_checkpoint(str(folder), tag=CHECKPOINT_TAG, save_latest=False)

    def load(self, folder: Path) -> None:
        if not (folder / CHECKPOINT_TAG).is_dir():
            raise PortlayerError(f"{folder}: no DeepSpeed checkpoint; was it saved under another strategy?")
        path, _ = self.model.load_checkpoint(
            str(folder), tag=CHECKPOINT_TAG, load_optimizer_states=True, load_lr_scheduler_states=True
        )
        if path is None:
            raise PortlayerError(f"{folder}: DeepSpeed could not load its checkpoint")
