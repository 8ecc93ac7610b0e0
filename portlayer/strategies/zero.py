"""The zero1, zero2 and zero3 strategies: DeepSpeed's own engine at that ZeRO stage.

The engine wraps the loop's optimizer and schedule (DeepSpeed steps both at the last micro-batch of a step,
and clips there), on the accelerator portlayer's backend gives it (`deepspeed_accelerator`). A checkpoint is
DeepSpeed's own: every rank writes its shard of the optimizer state into the checkpoint folder.
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path

import torch

from portlayer.errors import PortlayerError
from portlayer.strategies import Strategy
from portlayer.strategies.deepspeed_accelerator import use_active_backend
from portlayer.strategies.parallel import Parallel, Setup

# The tag (sub-folder) DeepSpeed writes its checkpoint under, inside the trainer's checkpoint folder.
CHECKPOINT_TAG = "deepspeed"
# DeepSpeed's shared-memory all-reduce (ShareMemCommBuilder.NAME): its cpu accelerator compiles it whenever its
# communication starts and the compiled copy is missing or built for another install, which costs a minute of
# cpu, several on a loaded machine. Only inference_all_reduce uses it: training never needs it.
_INFERENCE_ALL_REDUCE_OP = "deepspeed_shm_comm"
# DeepSpeed's default ZeRO-1/2 bucket, in elements (zero/config.py: 5e8, 2 GB in fp32). It allocates the bucket
# afresh at every micro-batch: a device's caching allocator absorbs that, the host pays 2 GB of page faults per
# step (the tiny presets trained 20 times slower on the cpu). No bucket needs to outgrow the model's gradient.
_BUCKET_ELEMENTS = 500_000_000
# DeepSpeed prints a throughput line every `steps_per_print` steps: never, the trainer reports its own.
_NEVER = 2**31 - 1


# ZeRO-1/2 refuse a bucket that is not a multiple of this (stage_1_and_2.py: nccl_start_alignment_factor).
_BUCKET_ALIGNMENT = 2


def bucket_elements(parameters: int) -> int:
    """The engine's reduce and all-gather buckets, in elements, for a model of `parameters` elements: the
    model's count rounded up to the engine's alignment where that is smaller than the default."""
    return min(_BUCKET_ELEMENTS, -(-parameters // _BUCKET_ALIGNMENT) * _BUCKET_ALIGNMENT)


def deepspeed_config(strategy: Strategy, setup: Setup, parameters: int) -> dict:
    """The engine's configuration: the trainer's batch split and clipping, the strategy's ZeRO stage, buckets
    no larger than the model's `parameters` (elements)."""
    bucket = bucket_elements(parameters)
    return {
        "train_micro_batch_size_per_gpu": setup.micro_batch,
        "gradient_accumulation_steps": setup.grad_accum,
        "gradient_clipping": setup.max_grad_norm,
        "zero_optimization": {
            "stage": strategy.zero_stage,
            "reduce_bucket_size": bucket,
            "allgather_bucket_size": bucket,
        },
        # The loop's torch AdamW, not one of DeepSpeed's compiled optimizers (none are built here).
        "zero_allow_untested_optimizer": True,
        "steps_per_print": _NEVER,
    }


class ZeroParallel(Parallel):
    @classmethod
    def prepare(cls, strategy: Strategy, core: torch.nn.Module, setup: Setup) -> ZeroParallel:
        if use_active_backend().device_name() == "cpu":
            import deepspeed.ops

            # DeepSpeed's table of the ops it may build (its module keeps one dict, so a change persists).
            deepspeed.ops.__compatible_ops__[_INFERENCE_ALL_REDUCE_OP] = False
        import deepspeed

        engine, optimizer, _, scheduler = deepspeed.initialize(
            model=core,
            optimizer=setup.make_optimizer(core.parameters()),
            lr_scheduler=setup.make_scheduler,
            config=deepspeed_config(strategy, setup, sum(p.numel() for p in core.parameters())),
        )
        return cls(engine, core, optimizer, scheduler, setup)

    @property
    def engine(self) -> str:
        import deepspeed
        from deepspeed.accelerator import get_accelerator

        accelerator = get_accelerator()
        return (
            f"DeepSpeed {deepspeed.__version__} ZeRO-{self.model.zero_optimization_stage()} on "
            f"{type(accelerator).__name__} ({accelerator.communication_backend_name()})"
        )

    def accumulating(self, last: bool):
        # The engine knows the accumulation boundary from its config and reduces there itself.
        return contextlib.nullcontext()

    def backward(self, loss: torch.Tensor) -> None:
        self.model.backward(loss)  # scaled by 1 / gradient_accumulation_steps, as the ddp loop does
        # The engine counts micro-batches in step(): at the last of a step it clips, steps the optimizer and
        # the schedule, and zeroes the gradients; before it, it only advances.
        self.model.step()

    def step(self) -> float:
        """Nothing left: the engine stepped at the step's last micro-batch (`backward`). Its optimizer computed
        the global gradient norm before clipping there (over every rank's shard): that norm."""
        norm = self.model.get_global_grad_norm()  # None where the engine was told not to compute it
        return math.nan if norm is None else float(norm)

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
