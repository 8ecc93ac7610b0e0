"""Gradients of a split model, reduced as Megatron reduces them: averaged over the data-parallel copies in one
flat collective (DDP's buckets, as one), summed over the stages that share a layer, and the clipping norm of the
whole model from each rank's part of it."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor


def average(tensors: list[torch.Tensor], group) -> None:
    """Average `tensors` over `group` in place, in one all-reduce."""
    flatten_into(tensors, group)
    torch._foreach_div_(tensors, dist.get_world_size(group))


def flatten_into(tensors: list[torch.Tensor], group) -> None:
    """Sum `tensors` over `group` in place, in one all-reduce of them flattened together."""
    if not tensors:
        return
    flat = torch.cat([tensor.reshape(-1) for tensor in tensors])
    dist.all_reduce(flat, group=group)
    for tensor, part in zip(tensors, flat.split([tensor.numel() for tensor in tensors])):
        tensor.copy_(part.view_as(tensor))


def local_parts(grads: list[torch.Tensor]) -> list[torch.Tensor]:
    """This rank's part of each gradient: a DTensor's local shard, a plain tensor as it is."""
    return [grad.to_local() if isinstance(grad, DTensor) else grad for grad in grads]


def total_norm(grads: list[torch.Tensor], local: list[torch.Tensor], tensor_group, pipeline_group=None,
               staged: frozenset[int] | set[int] = frozenset()) -> torch.Tensor:  # fmt: skip
    """The 2-norm of the whole model's gradient from this rank's parts (`local`, of `grads`): a split layer's
    squares summed over the tensor-parallel ranks; a whole layer of this stage's blocks (`staged`: ids of
    `grads`) counted once per stage; the squares of the stages summed over the pipeline; a layer every rank holds
    alike counted once."""
    split, stage_only, everywhere = [], [], []
    for grad, part in zip(grads, local):
        if isinstance(grad, DTensor) and any(placement.is_shard() for placement in grad.placements):
            split.append(part)
        elif id(grad) in staged:
            stage_only.append(part)
        else:
            everywhere.append(part)
    device = local[0].device
    squares = _sum_of_squares(split, device)
    if tensor_group is not None:
        dist.all_reduce(squares, group=tensor_group)
    squares = squares + _sum_of_squares(stage_only, device)
    if pipeline_group is not None:
        dist.all_reduce(squares, group=pipeline_group)
    return (squares + _sum_of_squares(everywhere, device)).sqrt()


def _sum_of_squares(tensors: list[torch.Tensor], device: torch.device) -> torch.Tensor:
    if not tensors:
        return torch.zeros((), device=device)
    return torch.stack(torch._foreach_norm(tensors)).float().square().sum()
