"""Tensor parallel (Megatron's, with torch's styles): each block's matmuls split over a group of ranks, data
parallel (DDP's averaged gradients) across the groups.

The plan is derived from the order the model's Linear layers run in, the pattern Megatron splits by hand: the
layers that read the same input (q, k and v; an MLP's gate and up) are split by columns, each rank keeping whole
heads, and the next layer that reads what they wrote and returns to their input's width (o; down) is split by
rows, its partial sums all-reduced. So attention needs no communication inside, and each MLP and each attention
costs one all-reduce forward and one backward. Layers outside a pair (embeddings, a router, the LM head) stay
whole on every rank: they get the same gradients everywhere, so they stay the same. For the models transformers
plans itself (`base_model_tp_plan`: Llama, Mixtral, Qwen2 …) the derived plan is that plan's colwise and rowwise
layers (tested).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from portlayer.errors import PortlayerError
from portlayer.strategies import Strategy, sequence_parallel
from portlayer.strategies.fsdp2 import blocks
from portlayer.strategies.gathered_state import GatheredState
from portlayer.strategies.gradients import average, local_parts, total_norm
from portlayer.strategies.layout import Layout
from portlayer.strategies.parallel import Parallel, Setup

COLWISE, ROWWISE = "colwise", "rowwise"  # transformers' names for torch's two styles
_STYLES = {COLWISE: ColwiseParallel, ROWWISE: RowwiseParallel}


@dataclass
class _Call:
    name: str
    linear: torch.nn.Linear
    source: torch.Tensor  # its input, kept alive so that `is` tells the same input from another


def tensor_plan(model: torch.nn.Module, tensor: int) -> dict[str, str]:
    """{Linear layer's name: "colwise" | "rowwise"} for splitting `model` over `tensor` ranks, from one forward
    of the model's dummy inputs; a one-line refusal where its blocks run no pair to split, or a split layer's
    width does not divide."""
    Layout(tensor).check_model(model.config)
    plan: dict[str, str] = {}
    group: list[_Call] = []
    for call in _linear_calls(model):
        if group and call.source is group[0].source:
            group.append(call)
        elif group and _closes(group, call.linear):
            plan.update({member.name: COLWISE for member in group})
            plan[call.name] = ROWWISE
            group = []
        else:
            group = [call]
    if not plan:
        raise PortlayerError(_nothing_to_split(model))
    for name, style in plan.items():
        linear = model.get_submodule(name)
        width = linear.out_features if style == COLWISE else linear.in_features  # the side that is split
        if width % tensor:
            raise PortlayerError(f"{name} is {width} wide, which does not split over --tp {tensor}")
    return plan


def _closes(group: list[_Call], linear: torch.nn.Linear) -> bool:
    """Whether `linear` reads what one of `group` wrote (its width) and returns to the group's input width."""
    return linear.in_features in {member.linear.out_features for member in group} and (
        linear.out_features == group[0].linear.in_features
    )


@torch.no_grad()
def _linear_calls(model: torch.nn.Module) -> list[_Call]:
    """The Linear layers inside the model's blocks, in the order one forward calls them, with their inputs.
    In eval mode: no dropout draws from the generator, so the run that follows is unchanged."""
    inside = {id(module) for block in blocks(model) for module in block.modules()}
    calls: list[_Call] = []
    hooks = [
        module.register_forward_pre_hook(lambda module, inputs, name=name: calls.append(_Call(name, module, inputs[0])))
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and id(module) in inside
    ]
    training = model.training
    device = next(model.parameters()).device
    try:
        model.eval()
        model(**{key: value.to(device) for key, value in model.dummy_inputs.items()})
    finally:
        model.train(training)
        for hook in hooks:
            hook.remove()
    return calls


def _nothing_to_split(model: torch.nn.Module) -> str:
    first = next(iter(blocks(model)), None)
    kinds = sorted({type(module).__name__ for module in first.children()}) if first is not None else []
    block = type(model if first is None else first).__name__
    return (
        f"tensor parallel splits pairs of nn.Linear layers, and {block} runs none ({', '.join(kinds) or 'no layers'};"
        f" q, k and v fused in one layer cannot split by heads)"
    )


@dataclass(frozen=True)
class SplitPlan:
    """The layers to split and how, by the modules themselves (a pipeline stage keeps some of them, renamed); with
    --sp, the modules whose input is gathered along the sequence (`sequence_parallel.py`)."""

    layers: list[tuple[torch.nn.Module, str]]
    mesh: DeviceMesh
    gathered: list[torch.nn.Module] | None = None  # None: no sequence parallel

    def apply(self, core: torch.nn.Module) -> None:
        """Split the plan's layers that `core` still holds."""
        held = {id(module) for module in core.modules()}
        sequence = self.gathered is not None
        gathering = {id(module) for module in self.gathered or ()}
        for layer, style in self.layers:
            if id(layer) in held:
                # Each layer by itself, not a plan of names: torch 2.6 matched `layer.0.output.dense` again for
                # `layer.0.attention.output.dense` (BERT), splitting it twice.
                parallelize_module(layer, self.mesh, _style(style, sequence, gathers=id(layer) in gathering))
        if sequence:
            split = {id(layer) for layer, _ in self.layers}  # a split layer that gathers does it in its style
            modules = [module for module in self.gathered if id(module) in held and id(module) not in split]
            sequence_parallel.install(core, modules, self.mesh)


def _style(style: str, sequence: bool, gathers: bool):
    """torch's style for a split layer: under --sp, a column-split layer that runs alone gathers the sequence
    itself, and a row-split one reduce-scatters its output along it."""
    if not sequence:
        return _STYLES[style]()
    if style == COLWISE:
        return ColwiseParallel(input_layouts=sequence_parallel.SEQUENCE) if gathers else ColwiseParallel()
    return RowwiseParallel(output_layouts=sequence_parallel.SEQUENCE)


def split_layers(core: torch.nn.Module, setup: Setup) -> SplitPlan:
    """The plan of splitting `core` over `setup.tensor_group`, from one forward of the whole model."""
    plan = tensor_plan(core, dist.get_world_size(setup.tensor_group))
    mesh = DeviceMesh.from_group(setup.tensor_group, setup.device.type)
    layers = [(core.get_submodule(name), style) for name, style in plan.items()]
    if not setup.layout.sequence:
        return SplitPlan(layers, mesh)
    return SplitPlan(layers, mesh, [core.get_submodule(name) for name in sequence_parallel.gather_points(plan)])


class TensorParallel(GatheredState, Parallel):
    """The split model, its gradients averaged over the data-parallel group (`setup.group`) on the last
    micro-batch as DDP would, clipped by the norm of the whole model."""

    @classmethod
    def prepare(cls, strategy: Strategy, core: torch.nn.Module, setup: Setup) -> TensorParallel:
        split_layers(core, setup).apply(core)
        optimizer = setup.make_optimizer(split_apart(core))
        return cls(core, core, optimizer, setup.make_scheduler(optimizer), setup)

    @property
    def engine(self) -> str:
        tensor, data = dist.get_world_size(self.setup.tensor_group), dist.get_world_size(self.setup.group)
        return f"torch tensor parallel over {tensor} ranks, data parallel over {data}"

    def __init__(self, model, core, optimizer, scheduler, setup: Setup):
        super().__init__(model, core, optimizer, scheduler, setup)
        # The parameters of the blocks this rank holds (split ones are DTensors by now), found once, not per step.
        self.block_parameters = [parameter for block in blocks(core) for parameter in block.parameters()]

    def accumulating(self, last: bool):
        return contextlib.nullcontext()  # gradients are averaged once, in `clip_gradients`

    def local_gradients(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """(the model's gradients, this rank's part of each)."""
        grads = [p.grad for p in self.core.parameters() if p.grad is not None]
        return grads, local_parts(grads)

    def complete_sequence_gradients(self) -> None:
        if self.setup.layout.sequence:
            sequence_parallel.complete_gradients(self.block_parameters, self.setup.tensor_group)

    def gradient_norm(self, grads: list[torch.Tensor], local: list[torch.Tensor]) -> torch.Tensor:
        """The whole model's gradient norm from this rank's parts of `grads` (`local`)."""
        return total_norm(grads, local, self.setup.tensor_group)

    def clip_gradients(self) -> torch.Tensor:
        self.complete_sequence_gradients()
        grads, local = self.local_gradients()
        if dist.get_world_size(self.setup.group) > 1:
            average(local, self.setup.group)
        norm = self.gradient_norm(grads, local)
        torch._foreach_mul_(local, (self.setup.max_grad_norm / (norm + 1e-6)).clamp(max=1.0))
        return norm


def split_apart(core: torch.nn.Module) -> list[dict]:
    """The parameters in two groups, split (DTensors) and whole: a foreach optimizer (the default on a device)
    takes one kind of tensor per call."""
    parameters = list(core.parameters())
    split = [parameter for parameter in parameters if isinstance(parameter, DTensor)]
    whole = [parameter for parameter in parameters if not isinstance(parameter, DTensor)]
    return [{"params": group} for group in (split, whole) if group]
