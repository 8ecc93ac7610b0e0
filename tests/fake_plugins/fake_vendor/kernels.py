"""Kernels the stand-in device has where the cpu, whose kernels it borrows (device.cpp's fallback), has none.

A vendor's device implements some ops for dtypes the cpu's kernel refuses: `histc` of an integer tensor is one
(CUDA's and the vendors' take integers; transformers' Mixtral counts its experts' tokens that way on every
device but cpu and mps, and the cpu kernel says `"histogram_cpu" not implemented for 'Int'`).
"""

from __future__ import annotations

import torch

_library: torch.library.Library | None = None


def register() -> None:
    """Once per process (the PrivateUse1 slot is named once)."""
    global _library
    if _library is None:
        _library = torch.library.Library("aten", "IMPL")
        _library.impl("histc", _histc, "PrivateUse1")


def _histc(self: torch.Tensor, bins: int = 100, min: float = 0, max: float = 0) -> torch.Tensor:
    # Integer values fall in the same bins as their float64 copies; the counts keep the input's dtype, as on a device.
    values = self.cpu() if self.is_floating_point() else self.cpu().double()
    return torch.histc(values, bins=bins, min=min, max=max).to(device=self.device, dtype=self.dtype)
