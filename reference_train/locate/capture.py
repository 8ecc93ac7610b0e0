"""Hooks that record, for one forward and backward, every module call and every parameter's gradient.

What is kept of each tensor is the caller's choice (`keep`): full clones for `locate`, which re-runs
modules on the recorded inputs; compact statistics for `dump`, which must stay small.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from portlayer.train.locate.tree import float_leaves, tree_map


@dataclass
class Call:
    """One call of one module. `key` is its name, with `#k` for its k-th call after the first."""

    key: str
    module_name: str
    module_type: str
    parent: int | None
    depth: int
    args: Any = None  # the positional and keyword inputs, each tensor replaced by keep(tensor)
    kwargs: Any = None
    outputs: list = field(default_factory=list)  # keep(t) for each floating output tensor
    output_dtypes: list = field(default_factory=list)
    grads: list = field(default_factory=list)  # keep(gradient of each output), None where it got none


@dataclass
class Trace:
    calls: list[Call]
    loss: torch.Tensor
    param_grads: dict[str, Any]  # parameter name -> keep(its gradient)


def run_model(model: nn.Module, batch: Any) -> Any:
    """Call `model` the way the batch is shaped: `model(**dict)`, `model(*tuple)` or `model(tensor)`."""
    if isinstance(batch, dict):
        return model(**batch)
    if isinstance(batch, (tuple, list)):
        return model(*batch)
    return model(batch)


class NoLossError(ValueError):
    """The model's output has no scalar to differentiate."""


def loss_of(output: Any) -> torch.Tensor:
    """The scalar to differentiate: a HF output's `.loss`, a `{"loss": …}` dict, or a scalar output."""
    loss = getattr(output, "loss", None)
    if loss is None and isinstance(output, dict):
        loss = output.get("loss")
    if loss is None and isinstance(output, torch.Tensor) and output.numel() == 1:
        loss = output
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        raise NoLossError(
            "the model's output has no scalar loss: pass loss_fn=… (Python) or return a loss from the model"
        )
    return loss.reshape(())


class Recorder:
    """Context manager: hooks on every module of `model` (and its parameters' gradients) while inside."""

    def __init__(
        self,
        model: nn.Module,
        keep: Callable[[torch.Tensor], Any],
        keep_input: Callable[[torch.Tensor], Any] | None = None,
    ):
        self.model = model
        self.keep = keep
        self.keep_input = keep_input or keep
        self.calls: list[Call] = []
        self._stack: list[int] = []
        self._seen: Counter = Counter()
        self._handles: list = []

    def __enter__(self) -> Recorder:
        for name, module in self.model.named_modules():
            self._handles.append(
                module.register_forward_pre_hook(self._pre_hook(name or "<model>"), with_kwargs=True)
            )
            self._handles.append(module.register_forward_hook(self._post_hook, with_kwargs=True))
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _pre_hook(self, name: str):
        def hook(module, args, kwargs):
            count = self._seen[name]
            self._seen[name] += 1
            parent = self._stack[-1] if self._stack else None
            self.calls.append(
                Call(
                    key=name if count == 0 else f"{name}#{count}",
                    module_name=name,
                    module_type=type(module).__name__,
                    parent=parent,
                    depth=len(self._stack),
                    # Cloned before the module runs: a module may change its inputs in place.
                    args=tree_map(self.keep_input, args),
                    kwargs=tree_map(self.keep_input, kwargs),
                )
            )
            self._stack.append(len(self.calls) - 1)

        return hook

    def _post_hook(self, module, args, kwargs, output):
        call = self.calls[self._stack.pop()]
        leaves = float_leaves(output)
        call.outputs = [self.keep(leaf) for leaf in leaves]
        call.output_dtypes = [leaf.dtype for leaf in leaves]
        call.grads = [None] * len(leaves)
        for i, leaf in enumerate(leaves):
            if leaf.requires_grad:
                leaf.register_hook(self._grad_hook(call, i))

    def _grad_hook(self, call: Call, i: int):
        def hook(grad):
            call.grads[i] = self.keep(grad)

        return hook


def trace(
    model: nn.Module,
    batch: Any,
    keep: Callable[[torch.Tensor], Any],
    loss_fn=None,
    keep_input: Callable[[torch.Tensor], Any] | None = None,
) -> Trace:
    """One forward and backward of `model` on `batch`, recorded module by module (inputs with
    `keep_input`, default `keep`)."""
    model.zero_grad(set_to_none=True)
    with Recorder(model, keep, keep_input) as recorder:
        output = run_model(model, batch)
        loss = (loss_fn or loss_of)(output)
        loss.backward()
    grads = {name: keep(p.grad) for name, p in model.named_parameters() if p.grad is not None}
    return Trace(recorder.calls, loss.detach(), grads)
