"""What one rank holds of the model states under a strategy, and the communication buffers the strategy adds.

The model states follow the ZeRO paper (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training
Trillion Parameter Models", 2020, section 3.1 and figure 1): with mixed precision, Ψ trainable parameters
cost 2Ψ bytes of 16-bit weights, 2Ψ of 16-bit gradients and KΨ = 12Ψ of Adam state (an fp32 master copy,
momentum and variance); ZeRO stage 1 divides the 12Ψ by the world size N, stage 2 the gradients too, stage 3
the weights too. fp32 training has no master copy: 4Ψ + 4Ψ + 8Ψ. Frozen parameters (a LoRA base) cost
their weights only, sharded where the weights are.

What shards what comes from `portlayer.strategies`, the table the trainer applies; the buffer sizes are what
the trainer configures (`portlayer.strategies.zero.deepspeed_config`) or the engines' defaults:
- ddp: one flat copy of the gradients, DistributedDataParallel's buckets (`gradient_as_bucket_view=False`).
- zero3: DeepSpeed's contiguous bucket, allocated whole in the gradients' dtype (`reduce_bucket_size` as the
  trainer sets it: DeepSpeed's 5e8 elements or the model's size when smaller), plus the parameters gathered
  for compute, which DeepSpeed releases only beyond `stage3_max_live_parameters` 1e9: the whole model below
  that, 1e9 parameters above.
- zero1, zero2 and fsdp2: their buffers exist only part of the step (the bucket from the first gradient on,
  a block's gathered parameters while it computes); the fake step plays them (`engines`) and the
  prediction takes what they hold at its peak.
(DeepSpeed's default: deepspeed/runtime/zero/config.py, `max_live_parameters`.)
DeepSpeed also keeps an fp32 copy of each rank's partition whatever the weights' dtype: its Adam state is
12 bytes a trainable parameter in fp32 training too.
"""

from __future__ import annotations

from dataclasses import dataclass

from portlayer.precision import FP32, PRECISIONS
from portlayer.strategies import Strategy

WEIGHT_BYTES = {name: precision.bytes for name, precision in PRECISIONS.items()}
# Adam's state per trainable parameter: exp_avg and exp_avg_sq in fp32, and an fp32 master copy of the
# weights when they are 16-bit (the ZeRO paper's K). DeepSpeed's ZeRO optimizer keeps the fp32 copy of its
# partition whatever the weights' dtype (`single_partition_of_fp32_groups`, `fp32_partitioned_groups_flat`).
ADAM_BYTES = {
    name: 2 * FP32.bytes + (FP32.bytes if precision.bytes < FP32.bytes else 0) for name, precision in PRECISIONS.items()
}
DEEPSPEED_ADAM_BYTES = 3 * FP32.bytes
MAX_LIVE_PARAMETERS = 1_000_000_000  # DeepSpeed's stage3_max_live_parameters


@dataclass(frozen=True)
class ParameterCount:
    """A model's parameters at full size, counted on the meta device."""

    total: int
    trainable: int
    largest_layer: int  # the most parameters one decoder layer holds (what a sharded engine gathers at once)


@dataclass(frozen=True)
class ModelStates:
    parameters: int
    gradients: int
    optimizer_state: int

    @property
    def total(self) -> int:
        return self.parameters + self.gradients + self.optimizer_state


def _share(size: int, sharded: bool, nproc: int) -> int:
    """A rank's part of `size` bytes: all of it, or its 1/N shard (rounded up, as the engines pad)."""
    return -(-size // nproc) if sharded else size


def model_states(count: ParameterCount, strategy: Strategy, nproc: int, weights: str) -> ModelStates:
    """Bytes per rank of weights, gradients and Adam state, the weights and gradients in `weights`' dtype (the
    trainer's: fp32, whatever its autocast)."""
    weight = WEIGHT_BYTES[weights]
    return ModelStates(
        parameters=_share(count.total * weight, strategy.shards_parameters, nproc),
        gradients=_share(count.trainable * weight, strategy.shards_gradients, nproc),
        optimizer_state=_share(count.trainable * adam_bytes(strategy, weights), strategy.shards_optimizer_state,
                               nproc),
    )


def adam_bytes(strategy: Strategy, weights: str) -> int:
    return DEEPSPEED_ADAM_BYTES if strategy.engine == "deepspeed" else ADAM_BYTES[weights]


def gradients_at_peak(strategy: Strategy, states: ModelStates, alive: int) -> int:
    """Gradient bytes a rank holds at the backward's peak, where the fake step's rank held `alive` (which
    played DDP, ZeRO-1/2 and FSDP2 themselves); but DeepSpeed's ZeRO-3 allocates its whole flat gradient
    partition up front (stage3.py, `grad_partitions_flat_buffer`)."""
    return states.gradients if strategy.engine == "deepspeed" and strategy.shards_parameters else alive


def communication(count: ParameterCount, strategy: Strategy, weights: str) -> int:
    """Bytes per rank of the buffers DDP and ZeRO-3 allocate to communicate (the played engines' come
    from the fake step)."""
    weight = WEIGHT_BYTES[weights]
    if strategy.engine == "ddp":
        return count.trainable * weight
    from portlayer.strategies.zero import (
        bucket_elements,  # the trainer's own sizing (loads its strategy code)
    )

    assert strategy.shards_parameters, "ZeRO-1/2 and FSDP2 are played on the fake step (engines)"
    # ZeRO-3: its bucket, and the gathered parameters, released only beyond max_live_parameters (and the
    # prefetch): a model smaller than that stays gathered whole; a larger one holds that many.
    return (bucket_elements(count.total) + min(count.total, MAX_LIVE_PARAMETERS)) * weight
