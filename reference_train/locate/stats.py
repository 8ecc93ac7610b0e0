"""Compact statistics of a tensor, comparable across machines: what a dump keeps instead of the tensor.

The sampled elements are chosen by position only (a fixed hash of the sample slot, modulo the number of
elements), so two machines sample the same elements of same-shaped tensors whatever their torch version.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass, field

import torch

SAMPLE_SIZE = 64
_MASK = (1 << 64) - 1
# Digits that survive a round trip of the dtype through decimal text.
_DIGITS = {torch.float64: 17, torch.float32: 9, torch.float16: 5, torch.bfloat16: 4}


def sample_indices(numel: int, size: int = SAMPLE_SIZE) -> list[int]:
    """`size` positions in a flattened tensor of `numel` elements (all of them when it is that small)."""
    if numel <= size:
        return list(range(numel))
    return [_splitmix64(slot) % numel for slot in range(size)]


def _splitmix64(x: int) -> int:
    # Steele et al.'s SplitMix64 finaliser: a well-mixed, fixed hash of the slot number.
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


@dataclass
class Stats:
    shape: list[int]
    dtype: str
    mean: float
    std: float
    min: float
    max: float
    norm: float
    sample: list[float] = field(repr=False)
    # Hash of the sample rounded to 6 significant digits: equal on two machines that agree to about that.
    checksum: str
    # Position of the full tensor in the dump's .pt file, when the dump was written with --full.
    full: int | None = None

    @classmethod
    def of(cls, t: torch.Tensor) -> Stats:
        flat = t.detach().reshape(-1)
        values = flat.to(torch.float64)
        index = torch.tensor(sample_indices(flat.numel()), dtype=torch.long, device=flat.device)
        digits = _DIGITS.get(t.dtype, 17)
        sample = [float(f"{v:.{digits}g}") for v in values[index].cpu().tolist()]
        n = values.numel()
        std, mean = torch.std_mean(values) if n > 1 else (values.new_zeros(()), values.sum())
        low, high = torch.aminmax(values) if n else (values.new_zeros(()), values.new_zeros(()))
        return cls(
            shape=list(t.shape),
            dtype=str(t.dtype).replace("torch.", ""),
            mean=float(mean),
            std=float(std),
            min=float(low),
            max=float(high),
            norm=float(values.norm()),
            sample=sample,
            checksum=hashlib.sha256(",".join(f"{v:.5e}" for v in sample).encode()).hexdigest()[:16],
        )

    @property
    def floating(self) -> bool:
        return getattr(torch, self.dtype).is_floating_point

    @classmethod
    def from_dict(cls, data: dict) -> Stats:
        stats = cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})
        if not isinstance(stats.shape, list) or not isinstance(stats.sample, list):
            raise ValueError("tensor statistics without shape or sample")
        if not isinstance(getattr(torch, str(stats.dtype), None), torch.dtype):
            raise ValueError(f"unknown dtype {stats.dtype!r}")
        if len(stats.sample) != min(math.prod(stats.shape), SAMPLE_SIZE):
            raise ValueError(f"sample of {len(stats.sample)} elements for shape {stats.shape}")
        return stats

    def as_dict(self) -> dict:
        data = asdict(self)
        if self.full is None:
            del data["full"]
        return data
