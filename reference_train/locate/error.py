"""How far one set of tensors is from a reference set: max absolute / relative error, cosine similarity."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Error:
    """`rel` is max|got - ref| / max|ref| over all elements: elementwise ratios blow up where the reference
    is near zero and say nothing, while this one is the error in units of the tensor's own scale."""

    max_abs: float
    rel: float
    cos: float

    @classmethod
    def exact(cls) -> Error:
        return cls(0.0, 0.0, 1.0)

    @classmethod
    def unusable(cls) -> Error:
        """The two sides cannot be compared element by element (shapes differ, or one side is missing)."""
        return cls(math.inf, math.inf, math.nan)

    def worst(self, other: Error | None) -> Error:
        if other is None or self.rel >= other.rel:
            return self
        return other


def compare(ref: list[torch.Tensor], got: list[torch.Tensor]) -> Error | None:
    """Error of `got` against `ref`, pooled over all tensors (None when there is nothing to compare)."""
    if not ref and not got:
        return None
    if len(ref) != len(got) or any(r.shape != g.shape for r, g in zip(ref, got)):
        return Error.unusable()
    if sum(r.numel() for r in ref) == 0:
        return Error.exact()
    r = torch.cat([t.detach().to("cpu", torch.float64).reshape(-1) for t in ref])
    g = torch.cat([t.detach().to("cpu", torch.float64).reshape(-1) for t in got])
    return compare_flat(r, g)


def compare_each(ref: list, got: list, one: Callable[[Any, Any], Error] | None = None) -> Error | None:
    """The worst error tensor by tensor, each judged on its own scale (a loss beside its logits).
    `one` compares a pair (default: two tensors)."""
    if len(ref) != len(got):
        return Error.unusable()
    worst = None
    for r, g in zip(ref, got):
        worst = (one(r, g) if one else compare([r], [g])).worst(worst)
    return worst


def compare_flat(r: torch.Tensor, g: torch.Tensor) -> Error:
    """Error of the float64 vector `g` against `r` (same length). Non-finite values count as infinitely
    wrong unless both sides have the same one."""
    finite = torch.isfinite(r) & torch.isfinite(g)
    if not bool(finite.all()):
        same = (r == g) | (torch.isnan(r) & torch.isnan(g))
        if not bool((finite | same).all()):
            return Error(math.inf, math.inf, _cosine(r[finite], g[finite]))
        r, g = r[finite], g[finite]
    if r.numel() == 0:
        return Error.exact()
    max_abs = float((g - r).abs().max())
    scale = float(r.abs().max())
    rel = 0.0 if max_abs == 0.0 else max_abs / scale if scale > 0 else math.inf
    return Error(max_abs, rel, _cosine(r, g))


def _cosine(r: torch.Tensor, g: torch.Tensor) -> float:
    rn, gn = float(r.norm()), float(g.norm())
    if rn == 0.0 or gn == 0.0:
        return 1.0 if rn == gn else 0.0
    return float(r @ g) / (rn * gn)
