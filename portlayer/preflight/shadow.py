"""Real values for the few tensors whose values decide a fake step's shapes and branches.

Fake tensors carry shapes and dtypes, never values. A training step mostly does not care, but some code
does: a mixture-of-experts layer asks which experts were hit (`nonzero`), loops over them and compares an
index with a number (`.item()`); a mask helper asks whether a padding mask is all ones. A fake tensor cannot
answer, so this mode keeps a *shadow*, the real value, next to each small tensor whose value is known:

- the batch (real token ids, masks and labels) and small constants created during the step;
- whatever an op computes from shadowed tensors only (one_hot, permute, sum, nonzero, where, …), computed
  for real on the shadows: these are integer bookkeeping tensors, a few thousand elements;
- the indices `topk` picks from values no one knows (a router's scores): assumed spread evenly, row r
  choosing columns (r·k + j) mod n, which hits every expert equally often, the balance routers are trained
  towards.

Float activations and weights are never shadowed: they stay fake and cost nothing.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

import torch
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensor,
    FakeTensorMode,
    unset_fake_temporarily,
)
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map_only
from torch.utils.weak import WeakIdKeyDictionary

from portlayer.preflight import meta_gaps

# A shadow is kept only for tensors up to this many elements (a 56×512 mask is 28,672): anything larger is
# an activation, whose value no shape or branch of a training step depends on.
SHADOW_LIMIT = 1 << 20
_DATA_DEPENDENT = (DataDependentOutputException, DynamicOutputShapeException)


class DataDependentError(RuntimeError):
    """The step needs a value preflight cannot know (it depends on weights or activations)."""


class ShadowValues(TorchDispatchMode):
    """Push above a `FakeTensorMode`: ops on shadowed tensors also run for real, on the shadows."""

    def __init__(self, fake_mode: FakeTensorMode, limit: int = SHADOW_LIMIT) -> None:
        super().__init__()
        self.fake_mode = fake_mode
        self.limit = limit
        self.shadows = WeakIdKeyDictionary()  # fake tensor -> its real value

    def fake(self, real: torch.Tensor) -> torch.Tensor:
        """A fake of `real` (a batch tensor) that keeps its value."""
        fake = self.fake_mode.from_tensor(real)
        self._keep(fake, real)
        return fake

    def _keep(self, fake, real) -> None:
        if isinstance(fake, FakeTensor) and isinstance(real, torch.Tensor) and real.numel() <= self.limit:
            self.shadows[fake] = real

    def _real(self, value):
        if isinstance(value, FakeTensor):
            return self.shadows.get(value)
        return value  # a real constant (torch.tensor(...) in the model's code) is its own value

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        flat, _ = tree_flatten((args, kwargs))
        tensors = [value for value in flat if isinstance(value, torch.Tensor)]
        known = not _unknowable(func) and all(self._real(tensor) is not None for tensor in tensors)
        if known and (tensors or _small_factory(func, kwargs)):
            return self._run_shadowed(func, args, kwargs)
        self._forget_written(func, args, kwargs)
        try:
            out = meta_gaps.call(func, args, kwargs)
        except _DATA_DEPENDENT as exc:
            raise DataDependentError(
                f"{func.name()} needs the value of a tensor computed from weights or activations, which "
                f"preflight does not compute"
            ) from exc
        if func is torch.ops.aten.topk.default:
            self._spread_indices(args, kwargs, out)
        return out

    def _run_shadowed(self, func, args, kwargs):
        try:
            out = meta_gaps.call(func, args, kwargs)
        except _DATA_DEPENDENT:  # nonzero, where(cond), .item(): the shadow gives the answer
            out = None
        if out is not None and any(tensor.numel() > self.limit for tensor in _tensors(out)):
            self._forget_written(func, args, kwargs)
            return out  # an activation-sized result: not worth computing for real
        real_args, real_kwargs = tree_map_only(torch.Tensor, self._real, (args, kwargs))
        with unset_fake_temporarily():
            real_out = func(*real_args, **real_kwargs)
        if out is None:
            if not isinstance(real_out, torch.Tensor):
                return real_out
            out = self.fake_mode.from_tensor(real_out)
        for fake, real in zip(_tensors(out), _tensors(real_out)):
            self._keep(fake, real)
        return out

    def _forget_written(self, func, args, kwargs) -> None:
        """An op that writes into a shadowed tensor from unknown values leaves its shadow stale."""
        for argument, value in zip(func._schema.arguments, [*args, *kwargs.values()]):
            if argument.alias_info is not None and argument.alias_info.is_write:
                for tensor in _tensors(value):
                    self.shadows.pop(tensor, None)

    def _spread_indices(self, args, kwargs, out) -> None:
        """topk over unknown scores: row r picks columns (r·k + j) mod n, every column equally often."""
        values, indices = out
        scores, k = args[0], args[1]
        dim = args[2] if len(args) > 2 else kwargs.get("dim", -1)
        if indices.numel() > self.limit or dim not in (-1, scores.dim() - 1):
            return
        n = scores.shape[-1]
        with unset_fake_temporarily():
            rows = indices.numel() // k
            spread = (torch.arange(rows).unsqueeze(1) * k + torch.arange(k)) % n
            self._keep(indices, spread.reshape(indices.shape).to(indices.dtype))


def _tensors(value) -> list:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [item for item in value if isinstance(item, torch.Tensor)]
    return []


# Ops whose result has no value to know: uninitialised memory (weights begin as `empty`, then an init fills
# them at random) and random draws (a weight's init, dropout's mask).
_UNINITIALISED = {"aten::empty", "aten::empty_like", "aten::empty_strided", "aten::new_empty",
                  "aten::new_empty_strided"}


def _unknowable(func) -> bool:
    return torch.Tag.nondeterministic_seeded in func.tags or func._schema.name in _UNINITIALISED


def _small_factory(func, kwargs) -> bool:
    """arange, zeros, full, …: made for real too when small (checked on the fake result first)."""
    if not any(str(ret.type) == "Tensor" for ret in func._schema.returns):
        return False
    device = kwargs.get("device")
    return device is None or torch.device(device).type == "cpu"


@contextlib.contextmanager
def values_known_to_libraries(shadows: ShadowValues) -> Iterator[None]:
    """transformers takes any fake tensor for a graph being traced and then skips its value checks (is the
    padding mask all ones?), building a full attention mask the real step never builds: tell it that a
    fake tensor whose value is shadowed is not being traced. Only if transformers is already imported."""
    import_utils = sys.modules.get("transformers.utils.import_utils")
    original = getattr(import_utils, "is_fake_tensor", None)
    if original is None:
        yield
        return

    def is_fake_tensor(value) -> bool:
        return original(value) and value not in shadows.shadows

    import_utils.is_fake_tensor = is_fake_tensor
    try:
        yield
    finally:
        import_utils.is_fake_tensor = original
