"""Devices a step is checked against, with the memory their makers publish, and `--memory 48GiB` sizes.

A device's figure is its memory as the device tool reports it (nvidia-smi's total; the makers' GB as GiB
where no reading is at hand). The prediction it is held against is what that tool would show in use: the
caching allocator's reserved memory and the runtime's own where it can be cited; the runtime's context has no
citable size, so a prediction within a GiB or two of the capacity is a close call, and the verdict says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from portlayer.errors import PortlayerError

GiB = 1 << 30
# Below this much headroom a fit is "tight": the runtime's own share and fragmentation can take it.
TIGHT_MARGIN = 2 * GiB


@dataclass(frozen=True)
class Device:
    name: str  # what --device takes
    label: str
    memory: int  # bytes
    backend: str  # the backend it runs: what `--device` checks the ops against when `--target` is not given
    capability: tuple[int, int] | None = None  # a CUDA device's compute capability (its kernels and workspaces)

    def describe(self) -> str:
        return f"{self.label}, {format_bytes(self.memory)}"


DEVICES = {device.name: device for device in (
    # Huawei's Atlas 800T A2 datasheet: 910B (B1–B3) with 64 GB HBM2e; the 910B4 has 32 GB.
    Device("910b", "Huawei Ascend 910B", 64 * GiB, "npu"),
    Device("910b4", "Huawei Ascend 910B4", 32 * GiB, "npu"),
    # Moore Threads MTT S4000: 48 GB GDDR6.
    Device("s4000", "Moore Threads MTT S4000", 48 * GiB, "musa"),
    # NVIDIA A100 40GB / 80GB, H100 80GB and H200 141GB (nvidia-smi shows 40960 / 81920 / 81559 / 143771 MiB;
    # the H200's is the reading beside the H200 run files: reference_train/baselines/README.md).
    Device("a100-40gb", "NVIDIA A100 40GB", 40 * GiB, "cuda", (8, 0)),
    Device("a100-80gb", "NVIDIA A100 80GB", 80 * GiB, "cuda", (8, 0)),
    Device("h100-80gb", "NVIDIA H100 80GB", 81559 * (1 << 20), "cuda", (9, 0)),
    Device("h200", "NVIDIA H200 141GB", 143771 * (1 << 20), "cuda", (9, 0)),
)}

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """`48GiB`, `40 GB`, `81920MiB`, `5e9` is not accepted: a number and a unit (B, KB…TB, KiB…TiB)."""
    match = _SIZE.match(text)
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _UNITS:
        raise PortlayerError(f"--memory {text!r}: expected a size such as 48GiB, 40GB or 81920MiB")
    size = int(float(match.group(1)) * _UNITS[unit])
    if size <= 0:
        raise PortlayerError(f"--memory {text!r}: must be more than 0")
    return size


def get_device(name: str) -> Device:
    try:
        return DEVICES[name.lower()]
    except KeyError:
        raise PortlayerError(f"unknown device {name!r}; choose from {', '.join(DEVICES)} or pass --memory SIZE") \
            from None


def format_bytes(size: int) -> str:
    return f"{size / GiB:.1f} GiB" if abs(size) >= GiB else f"{size / (1 << 20):.1f} MiB"
