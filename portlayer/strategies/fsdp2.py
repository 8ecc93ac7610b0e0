"""The fsdp2 strategy: torch's `fully_shard` over each transformer block and then the whole model.

Parameters, gradients and optimizer state are sharded across the ranks of the training group (a DeviceMesh
built from that group, so its timeout applies). A checkpoint gathers the full state to rank 0 and is
written as ddp's is; loading shards it again, so a checkpoint moves between ddp and fsdp2.
"""

from __future__ import annotations

import contextlib

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import fully_shard

from portlayer.errors import PortlayerError
from portlayer.strategies import Strategy
from portlayer.strategies.gathered_state import GatheredState
from portlayer.strategies.parallel import Parallel, Setup


def blocks(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's repeated blocks, as HuggingFace names them (`_no_split_modules`: GPT2Block, BertLayer,
    MixtralDecoderLayer, …): each becomes one unit gathered for its forward and freed after. A block that
    shares a parameter with the rest of the model (BERT's word embeddings, tied to its masked-LM head) stays
    in the model's own unit: fully_shard places a parameter in one unit only."""
    names = set(getattr(model, "_no_split_modules", None) or ())
    return [
        module
        for module in model.modules()
        if type(module).__name__ in names and not _shares_parameters(model, module)
    ]


def _shares_parameters(model: torch.nn.Module, block: torch.nn.Module) -> bool:
    inside = {id(parameter) for parameter in block.parameters()}
    block_modules = {id(module) for module in block.modules()}
    return any(
        id(parameter) in inside
        for module in model.modules()
        if id(module) not in block_modules
        for parameter in module.parameters(recurse=False)
    )


def _average_of_ones(group) -> float:
    """What the group's reduce-scatter gives when asked for the average of ones: 1.0 where it averages.
    fully_shard reduces fp32 and bf16 gradients with ReduceOp.AVG, which torch 2.7 and 2.8's gloo takes for a sum
    (the world size comes back; 2.11 averages)."""
    averaged = torch.empty(1)
    dist.reduce_scatter_tensor(averaged, torch.ones(dist.get_world_size(group)), op=dist.ReduceOp.AVG, group=group)
    return averaged.item()


def _check_the_cpu(group) -> None:
    """Refuse fsdp2 on a cpu whose torch would fail or train it wrong (torch 2.6 to 2.8)."""
    # fully_shard orders its all-gathers with stream events, which the cpu's streams have from torch 2.7.
    if not hasattr(torch.cpu.Stream, "record_event"):
        raise PortlayerError(
            f"fsdp2 on the cpu: fully_shard records stream events, which torch {torch.__version__}'s cpu streams "
            f"lack (use torch >= 2.11, or zero3 on the cpu)"
        )
    if (factor := _average_of_ones(group)) != 1.0:
        raise PortlayerError(
            f"fsdp2 on the cpu: torch {torch.__version__}'s gloo sums where fully_shard asks for the average, "
            f"so every gradient would be {factor:g} times too large (use torch >= 2.11, or zero3 on the cpu)"
        )


class Fsdp2Parallel(GatheredState, Parallel):
    @classmethod
    def prepare(cls, strategy: Strategy, core: torch.nn.Module, setup: Setup) -> Fsdp2Parallel:
        if setup.device.type == "cpu":
            _check_the_cpu(setup.group)
        mesh = DeviceMesh.from_group(setup.group, setup.device.type)
        for block in blocks(core):
            fully_shard(block, mesh=mesh)
        fully_shard(core, mesh=mesh)  # the rest: embeddings, final norm, head
        optimizer = setup.make_optimizer(core.parameters())
        return cls(core, core, optimizer, setup.make_scheduler(optimizer), setup)

    @property
    def engine(self) -> str:
        return "torch fully_shard"

    def accumulating(self, last: bool):
        return contextlib.nullcontext() if last else _no_gradient_sync(self.core)

    def clip_gradients(self) -> torch.Tensor:
        # clip_grad_norm_ over sharded parameters returns a DTensor of the ranks' partial norms: reduce it.
        return super().clip_gradients().full_tensor()


@contextlib.contextmanager
def _no_gradient_sync(model):
    """fully_shard's no_sync: gradients accumulate unsharded until the micro-batch that reduces them."""
    model.set_requires_gradient_sync(False)
    try:
        yield
    finally:
        model.set_requires_gradient_sync(True)
