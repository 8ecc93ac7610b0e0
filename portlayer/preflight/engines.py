"""What a sharding engine allocates around the backward, played on the fake step, so that the step's peak
falls where the engine's does.

An engine's buffers exist only part of the step: DeepSpeed's ZeRO-1/2 reduce bucket from the first gradient
on, FSDP2's gathered parameters while their block computes. Added to the fake step's peak, they would be
counted at the activations' peak (the logits' gradient), where they are not yet allocated; played, the
peak is the largest sum at any one time. Each play allocates fake tensors of the engine's sizes at the
engine's moments and tells the `Ledger`, which the memory tracker reads at its peak.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

# The ledger's entries: the engine's communication buffers (buckets, gathered parameters), and the
# gradients it keeps in buffers of its own (filed by the tracker as activations or temporaries).
BUFFERS, GRADIENTS = "Engine buffers", "Engine gradients"


class Ledger:
    """Bytes the engine's buffers hold now, and held when the tracker last recorded a peak; and the step's
    phase now and at that peak."""

    def __init__(self) -> None:
        self.now = {BUFFERS: 0, GRADIENTS: 0}
        self.at_peak = dict(self.now)
        self.phase = self.phase_at_peak = "forward"

    def peak_recorded(self) -> None:
        self.at_peak = dict(self.now)
        self.phase_at_peak = self.phase

    def allocate(self, elements: int, dtype: torch.dtype, holds: str) -> torch.Tensor:
        self.now[holds] += elements * dtype.itemsize  # first: the allocation may be the peak recorded
        return torch.empty(elements, dtype=dtype)

    def release(self, tensor: torch.Tensor, holds: str) -> None:
        self.now[holds] -= tensor.numel() * tensor.dtype.itemsize

    def give_whole_gradient(self, parameter: torch.nn.Parameter) -> None:
        """A whole gradient again after the backward, for the fake optimizer step, which plays no sharding
        (the prediction takes the optimizer's share); filed with the engine's gradients, not as temporaries."""
        parameter.grad = self.allocate(parameter.numel(), parameter.dtype, GRADIENTS).view_as(parameter)


@dataclass(frozen=True)
class ZeroGradients:
    """DeepSpeed's ZeRO-1/2 engine with gradients in the backward (stage_1_and_2.py): at the first gradient
    it allocates its reduce bucket of `bucket_elements`, in the gradients' dtype (`setup_buckets`), held to
    the backward's end. At stage 2 (`partition_gradients`) each gradient is copied into the bucket and its
    own memory freed (`reduce_independent_p_g_buckets_and_remove_grads`); a full bucket is reduced and
    starts over, and the rank's gradients go to its flat partition, 1/`world_size` of them, allocated at the
    first reduction (`copy_grads_in_partition`). At stage 1 the gradients stay where autograd put them. A
    gradient larger than the bucket stays where it is and is reduced there at the next reduction
    (DeepSpeed's `extra_large_param_to_reduce`)."""

    bucket_elements: int
    partition_gradients: bool
    world_size: int
    steady_from_layers = 1  # the fewest layers whose step has the engine's pattern

    @contextlib.contextmanager
    def playing(self, model: torch.nn.Module, ledger: Ledger) -> Iterator[None]:
        """Played on `model`'s trainable parameters for the forward and backward run inside."""
        bucket = _ZeroBucket(self, [p for p in model.parameters() if p.requires_grad], ledger)
        yield
        bucket.release()


class _ZeroBucket:
    def __init__(self, zero: ZeroGradients, parameters: list[torch.nn.Parameter], ledger: Ledger) -> None:
        self.zero, self.ledger = zero, ledger
        self.trainable = sum(p.numel() for p in parameters)
        self.bucket: torch.Tensor | None = None
        self.partition: torch.Tensor | None = None
        self.in_bucket: list[torch.nn.Parameter] = []  # since the last reduction
        self.reduced: list[torch.nn.Parameter] = []
        self.filled = 0
        for parameter in parameters:
            parameter.register_post_accumulate_grad_hook(self.gradient_ready)

    def gradient_ready(self, parameter: torch.nn.Parameter) -> None:
        grad, size = parameter.grad, self.zero.bucket_elements
        if self.bucket is None:
            self.bucket = self.ledger.allocate(size, grad.dtype, BUFFERS)
        if not self.zero.partition_gradients:
            return
        if self.filled + grad.numel() > size:
            self._reduce(grad.dtype)
        if grad.numel() <= size:
            self.bucket.narrow(0, self.filled, grad.numel()).copy_(grad.view(-1))
            # DeepSpeed points the gradient at its place in the bucket; freed here instead, so that the
            # tracker does not file the bucket as gradients.
            parameter.grad = None
        # else an oversized gradient: reduced where it is, at the next reduction
        self.in_bucket.append(parameter)
        self.filled += grad.numel()

    def _reduce(self, dtype: torch.dtype) -> None:
        if self.in_bucket and self.partition is None:
            elements = -(-self.trainable // self.zero.world_size)
            self.partition = self.ledger.allocate(elements, dtype, GRADIENTS)
        for parameter in self.in_bucket:
            parameter.grad = None  # an oversized one's, reduced in place: the rank's share went to the partition
        self.reduced += self.in_bucket
        self.in_bucket.clear()
        self.filled = 0

    def release(self) -> None:
        """The backward's end (DeepSpeed's epilogue frees the bucket); whole gradients for the fake step's
        optimizer."""
        for buffer, holds in ((self.bucket, BUFFERS), (self.partition, GRADIENTS)):
            if buffer is not None:
                self.ledger.release(buffer, holds)
        self.bucket = self.partition = None
        for parameter in self.reduced + self.in_bucket:
            self.ledger.give_whole_gradient(parameter)
        self.reduced.clear()
        self.in_bucket.clear()


@dataclass(frozen=True)
class FsdpGathers:
    """torch's `fully_shard` (FSDP2) over `blocks(model)` and then the model, as the trainer applies it: the
    root's parameters (those of no block) are gathered from its forward to the backward's end; a block's
    for its forward (resharded after it), and again from the start of its backward to its end, when the
    block computed before it in the forward is gathered too (FSDP2's implicit backward prefetch). At a
    block's backward end its gradients are reduce-scattered: 1/`world_size` of them stays; the root's stay
    whole to the backward's end."""

    blocks: Callable[[torch.nn.Module], list[torch.nn.Module]]
    world_size: int
    # The fewest layers whose step has FSDP2's pattern: a block's backward prefetching the one before it.
    steady_from_layers = 2

    @contextlib.contextmanager
    def playing(self, model: torch.nn.Module, ledger: Ledger) -> Iterator[None]:
        """Played on `model` for the forward and backward run inside; everything is resharded after."""
        from torch.distributed._tools.mod_tracker import ModTracker

        gathers = _FsdpGathers(model, self.blocks(model), self.world_size, ledger)
        tracker = ModTracker()
        tracker.register_user_hooks(gathers.pre_forward, gathers.post_forward, gathers.pre_backward,
                                    gathers.post_backward)
        with tracker:
            yield
        gathers.finish()


class _FsdpGathers:
    def __init__(self, model: torch.nn.Module, blocks: list[torch.nn.Module], world_size: int,
                 ledger: Ledger) -> None:
        self.model, self.blocks, self.world_size, self.ledger = model, blocks, world_size, ledger
        self.gradient_shards: list[tuple[torch.nn.Parameter, torch.Tensor]] = []
        in_blocks = {id(p) for block in blocks for p in block.parameters()}
        self.sizes = {id(block): _bytes(block.parameters()) for block in blocks}
        self.sizes[id(model)] = _bytes(p for p in model.parameters() if id(p) not in in_blocks)
        self.gathered: dict[int, torch.Tensor] = {}
        self.order = {id(block): index for index, block in enumerate(blocks)}

    def _gather(self, module: torch.nn.Module) -> None:
        if id(module) in self.sizes and id(module) not in self.gathered:
            self.gathered[id(module)] = self.ledger.allocate(self.sizes[id(module)], torch.uint8, BUFFERS)

    def _reshard(self, module: torch.nn.Module | None) -> None:
        if module is not None and id(module) in self.gathered:
            self.ledger.release(self.gathered.pop(id(module)), BUFFERS)

    def pre_forward(self, module, args) -> None:
        self._gather(module)

    def post_forward(self, module, args, output) -> None:
        if module is not self.model:  # the root stays gathered for the backward
            self._reshard(module)

    def pre_backward(self, module, grad_output) -> None:
        if module is None or id(module) not in self.order:
            return
        self._gather(module)
        index = self.order[id(module)]
        if index > 0:
            self._gather(self.blocks[index - 1])

    def post_backward(self, module, grad_input) -> None:
        if module is not None and id(module) in self.order:
            self._reshard(module)
            self._reduce_scatter(module)

    def _reduce_scatter(self, block: torch.nn.Module) -> None:
        for parameter in block.parameters():
            if parameter.grad is not None:
                shard = -(-parameter.numel() // self.world_size)
                self.gradient_shards.append((parameter, self.ledger.allocate(shard, parameter.dtype, GRADIENTS)))
                parameter.grad = None

    def finish(self) -> None:
        """The backward's end: everything resharded, and whole gradients for the fake optimizer step."""
        for block in [self.model, *self.blocks]:
            self._reshard(block)
        for parameter, shard in self.gradient_shards:
            self.ledger.release(shard, GRADIENTS)
            self.ledger.give_whole_gradient(parameter)
        self.gradient_shards.clear()


def _bytes(parameters) -> int:
    return sum(p.numel() * p.dtype.itemsize for p in parameters)
