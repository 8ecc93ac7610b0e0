"""Sequence parallel (Megatron's `--sequence-parallel`, with torch's DTensor layouts), over the tensor-parallel
ranks: between the split matmuls (norms, residual adds, dropout, a MoE router and its experts) each rank keeps
1/tp of the sequence, so those layers' activations are split too (Korthikanti et al. 2022, §4.2.2).

Where the hidden states enter a group of column-split layers, the sequence is all-gathered: at the module that runs
the group (an attention module, whose own code then sees the whole sequence's shape and builds its heads from
it), or at the layer itself when it runs alone (BERT's intermediate). The row-split layer that closes the group
reduce-scatters its output along the sequence instead of all-reducing it. The model's blocks take their part of the
sequence from the replicated hidden states at the first block and give the whole sequence back after the last,
so what the model builds before its blocks (masks, positions, rotary embeddings) and after them (final norm,
head, loss) sees the whole sequence, as without --sp.

The whole layers that ran on a part of the sequence got their gradients from that part: they are summed over the
tensor-parallel ranks before the step (`complete_gradients`).
"""

from __future__ import annotations

import functools

import torch
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Replicate, Shard

from portlayer.strategies.block_calls import changing_input, changing_output
from portlayer.strategies.fsdp2 import blocks
from portlayer.strategies.gradients import flatten_into

SEQUENCE = Shard(1)  # (batch, sequence, hidden): the sequence's dimension


def gather_points(plan: dict[str, str]) -> list[str]:
    """The modules whose hidden-states input is gathered along the sequence: for each column-split group of the
    plan (in the plan's order, the group's layers come before the row-split layer that closes it), the innermost
    module holding all of the group, or the layer itself when alone."""
    points, group = [], []
    for name, style in plan.items():
        if style == "colwise":
            group.append(name)
            continue
        if len(group) == 1:
            points.append(group[0])
        else:
            parts = [member.split(".") for member in group]
            common = next((i for i, same in enumerate(zip(*parts)) if len(set(same)) > 1), min(map(len, parts)))
            points.append(".".join(parts[0][:common]))
        group = []
    return points


def gather(hidden: torch.Tensor, mesh: DeviceMesh) -> DTensor:
    """The whole sequence, from this rank's part: a replicated DTensor, whose backward reduce-scatters."""
    return DTensor.from_local(hidden, mesh, [SEQUENCE]).redistribute(mesh, [Replicate()])


def install(core: torch.nn.Module, gathered: list[torch.nn.Module], mesh: DeviceMesh) -> None:
    """The hooks that split the sequence at the first held block, gather it back after the last, and gather it at
    each module of `gathered` (that runs a group of column-split layers)."""
    for module in gathered:
        module.register_forward_pre_hook(changing_input(functools.partial(gather, mesh=mesh)), with_kwargs=True)
    held = blocks(core)
    held[0].register_forward_pre_hook(changing_input(functools.partial(_split, mesh=mesh)), with_kwargs=True)
    # Before any hook that ends a pipeline stage at this block: the stage sends the whole sequence.
    held[-1].register_forward_hook(changing_output(functools.partial(_gather_whole, mesh=mesh)), prepend=True)


def _split(hidden: torch.Tensor, mesh: DeviceMesh) -> torch.Tensor:
    """This rank's part of the replicated hidden states (the backward all-gathers the parts' gradients)."""
    return DTensor.from_local(hidden, mesh, [Replicate()]).redistribute(mesh, [SEQUENCE]).to_local()


def _gather_whole(hidden: torch.Tensor, mesh: DeviceMesh) -> torch.Tensor:
    # Every rank computes what follows alike: the gradient that comes back is whole, and this rank keeps its part.
    return gather(hidden, mesh).to_local()


def complete_gradients(block_parameters: list[torch.nn.Parameter], tensor_group) -> None:
    """Sum over the tensor-parallel ranks, in one all-reduce, the gradients of the blocks' whole layers (norms, a
    router, experts): they ran on this rank's part of the sequence. A split layer's are DTensors, whose autograd
    already reduced them (its replicated bias included)."""
    whole = [p.grad for p in block_parameters if p.grad is not None and not isinstance(p.grad, DTensor)]
    flatten_into(whole, tensor_group)
