"""The target's kernels in place of the cpu's, for a fake step that runs on the cpu.

    with TargetKernels(get_target("cuda"), capability=(9, 0)) as kernels:
        with kernels.autocast(torch.bfloat16):      # the trainer's forward under autocast
            loss = model(**batch).loss
        loss.backward()

While entered, Python kernels stand in torch's dispatcher where the cpu and the target part ways
(`targets` lists each fact and its source):
- autocast (the `AutocastCPU` key): the target's op lists and cast policies instead of the cpu's, and its
  cache of 16-bit weight copies, emptied when the forward's autocast ends, as torch's is;
- `scaled_dot_product_attention` (the `AutogradCPU` key, above the cpu's composite): the kernel the target
  picks (flash, memory-efficient or math), called as torch's own op, whose fake-tensor shapes follow CUDA's;
- `dropout`: the fused `native_dropout` with its one-byte mask, where the cpu keeps float32 noise.
On exit torch's own kernels are back.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Iterator

import torch

from portlayer.preflight.targets import EFFICIENT, FLASH, Capability, Target

_AUTOCAST = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)
_ATEN = torch.ops.aten


def cpu_autocast_ops() -> frozenset:
    """The ops the cpu's autocast has a kernel for (its lists), from the dispatcher, as `name.overload`."""
    return frozenset(name.removeprefix("aten::")
                     for name in torch._C._dispatch_get_registrations_for_dispatch_key("AutocastCPU")
                     if name.startswith("aten::"))


def _overload(op: str):
    name, _, overload = op.partition(".")
    return getattr(getattr(_ATEN, name), overload or "default")


def _eligible(value) -> bool:
    # ATen's is_eligible: a floating tensor of the device, not float64.
    return isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != torch.float64


class TargetKernels:
    def __init__(self, target: Target, capability: Capability = None) -> None:
        self.target = target
        self.capability = capability
        self.dtype = torch.bfloat16  # the autocast's 16-bit type, set by `autocast`
        self._casts: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # id(weight) -> (weight, its copy)
        self._library = None

    def __enter__(self) -> TargetKernels:
        library = torch.library.Library("aten", "IMPL")
        lists = self.target.autocast
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*[Oo]verrid")  # replacing the cpu's kernels is the point
            for op in cpu_autocast_ops() | lists.ops:
                policy = lists.policy(op)
                kernel = torch.library.fallthrough_kernel if policy is None else self._autocast_kernel(op, policy)
                library.impl(op, kernel, "AutocastCPU")
            library.impl("scaled_dot_product_attention", self._attention, "AutogradCPU")
            if self.target.fused_dropout:
                library.impl("dropout", _fused_dropout, "AutogradCPU")
        self._library = library
        return self

    def __exit__(self, *exc_info) -> None:
        self._casts.clear()
        self._library._destroy()
        self._library = None

    @contextlib.contextmanager
    def autocast(self, dtype: torch.dtype) -> Iterator[None]:
        """torch.autocast to `dtype` with the target's lists; its weight copies are let go at the end."""
        self.dtype = dtype
        try:
            with torch.autocast("cpu", dtype=dtype):
                yield
        finally:
            self._casts.clear()

    def _autocast_kernel(self, op: str, policy: str):
        overload = _overload(op)
        if policy == "banned":
            def refused(*args, **kwargs):
                raise RuntimeError(f"{op} is unsafe to autocast on {self.target.name} (torch refuses it): use "
                                   "binary_cross_entropy_with_logits")
            return refused
        if policy == "fp32_set_opt_dtype":
            position = [argument.name for argument in overload._schema.arguments].index("dtype")
            return functools.partial(self._set_opt_dtype, overload, position)
        if policy == "fp32_append_dtype":
            return functools.partial(self._append_dtype, _overload(dict(self.target.autocast.fp32_append_dtype)[op]))
        return functools.partial(self._cast_all, overload, policy)

    def _cast_all(self, overload, policy: str, *args, **kwargs):
        """lower_precision, fp32 and promote: every eligible tensor argument cast, as `cached_cast` does."""
        if policy == "lower_precision":
            to = self.dtype
        elif policy == "fp32":
            to = torch.float32
        else:  # promote: the widest floating type among the eligible arguments, from the 16-bit one up
            to = self.dtype
            for value in _flat(args, kwargs):
                to = torch.promote_types(to, value.dtype) if _eligible(value) else to
        args = [self._cast(value, to) for value in args]
        kwargs = {key: self._cast(value, to) for key, value in kwargs.items()}
        with torch._C._ExcludeDispatchKeyGuard(_AUTOCAST):
            return overload(*args, **kwargs)

    def _set_opt_dtype(self, overload, position: int, *args, **kwargs):
        if _eligible(args[0]) and kwargs.get("dtype") is None and (len(args) <= position or args[position] is None):
            if len(args) > position:
                args = (*args[:position], torch.float32, *args[position + 1:])
            else:
                kwargs = {**kwargs, "dtype": torch.float32}
        with torch._C._ExcludeDispatchKeyGuard(_AUTOCAST):
            return overload(*args, **kwargs)

    def _append_dtype(self, with_dtype, *args, **kwargs):
        dtype = torch.float32 if _eligible(args[0]) else args[0].dtype
        with torch._C._ExcludeDispatchKeyGuard(_AUTOCAST):
            return with_dtype(*args, **kwargs, dtype=dtype)

    def _cast(self, value, to: torch.dtype):
        if isinstance(value, (list, tuple)):
            return type(value)(self._cast(item, to) for item in value)
        if not _eligible(value) or value.dtype == to:
            return value
        # autocast keeps the 16-bit copy of each fp32 weight (a leaf that requires grad) for the whole forward
        if to == self.dtype and value.dtype == torch.float32 and value.requires_grad and value.is_leaf \
                and not value._is_view():
            kept = self._casts.get(id(value))
            if kept is None:
                kept = self._casts[id(value)] = (value, value.to(to))
            return kept[1]
        return value.to(to)

    def _attention(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None,
                   enable_gqa=False):
        kernel = self.target.attention(query, key, value, attn_mask, dropout_p, enable_gqa, self.capability)
        if kernel == FLASH:
            return _ATEN._scaled_dot_product_flash_attention(query, key, value, dropout_p, is_causal,
                                                             scale=scale)[0]
        if kernel == EFFICIENT:
            needs_lse = query.requires_grad or key.requires_grad or value.requires_grad
            return _ATEN._scaled_dot_product_efficient_attention(query, key, value, _as_bias(attn_mask, query),
                                                                 needs_lse, dropout_p, is_causal, scale=scale)[0]
        return _ATEN._scaled_dot_product_attention_math(query, key, value, attn_mask, dropout_p, is_causal,
                                                        scale=scale, enable_gqa=enable_gqa)[0]


def _flat(args, kwargs) -> Iterator:
    for value in (*args, *kwargs.values()):
        yield from value if isinstance(value, (list, tuple)) else (value,)


def _as_bias(attn_mask, query):
    """A boolean mask as the additive bias the memory-efficient kernel takes (sdpa's
    convert_boolean_attn_mask: 0 where kept, -inf where masked, in the query's dtype)."""
    if attn_mask is None or attn_mask.dtype != torch.bool:
        return attn_mask
    return torch.zeros_like(attn_mask, dtype=query.dtype).masked_fill(attn_mask.logical_not(), float("-inf"))


def _fused_dropout(input, p: float, train: bool):
    """aten's dropout on an accelerator: `native_dropout` (output and a bool mask) when it drops anything."""
    if train and 0 < p < 1 and input.numel() > 0:
        return _ATEN.native_dropout(input, p, train)[0]
    return _ATEN.dropout.default.decompose(input, p, train)
