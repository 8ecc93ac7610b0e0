"""The training precisions that `--precision` names, one table for the trainer and preflight.

fp32 trains in float32 throughout. bf16 and fp16 name the 16-bit floating type a step computes in: the
trainer runs its forward under autocast to that type over fp32 weights; preflight today also stores the
weights in it. Names only until a dtype is asked for, so that `import portlayer` and the command lines that
offer the names load no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Precision:
    name: str
    torch_name: str  # the dtype's attribute of the torch module
    bytes: int  # per element (the dtype's itemsize), known without importing torch

    @property
    def dtype(self) -> torch.dtype:
        import torch

        return getattr(torch, self.torch_name)

    @property
    def autocast(self) -> bool:
        """Whether a step in this precision runs under autocast (to `dtype`): the 16-bit ones do, fp32 runs as
        it is."""
        return self.bytes < FP32.bytes


FP32 = Precision("fp32", "float32", 4)
PRECISIONS = {
    precision.name: precision
    for precision in (FP32, Precision("bf16", "bfloat16", 2), Precision("fp16", "float16", 2))
}
