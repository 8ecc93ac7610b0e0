"""Ops whose meta kernel (what a fake tensor runs) refuses inputs their cpu kernel accepts.

A fake step must take the path the real step takes, so where the meta kernel is stricter, the output's
shape is computed from inputs it accepts and returned in the dtype the cpu kernel would give.

- `aten::_grouped_mm`: the meta kernel follows the CUDA kernel and wants bfloat16; torch's cpu kernel also
  multiplies float32, which transformers' mixture-of-experts layers use on the cpu in fp32.
"""

from __future__ import annotations

import torch


def _grouped_mm(func, args, kwargs):
    mat_a, mat_b, *rest = args
    if mat_a.dtype == torch.bfloat16 and mat_b.dtype == torch.bfloat16:
        return func(*args, **kwargs)
    out = func(mat_a.to(torch.bfloat16), mat_b.to(torch.bfloat16), *rest, **kwargs)
    return out.to(kwargs.get("out_dtype") or mat_a.dtype)


STRICTER_META = {torch.ops.aten._grouped_mm.default: _grouped_mm}


def call(func, args, kwargs):
    adapter = STRICTER_META.get(func)
    return func(*args, **kwargs) if adapter is None else adapter(func, args, kwargs)
