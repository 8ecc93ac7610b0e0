"""Run a program on the stand-in npu / musa device: the one helper other tests need.

    from tests.fake_device import environment
    subprocess.run(["torchrun", "--standalone", "--nproc_per_node", "2", "train.py"],
                   env=environment("npu"), check=True)

`environment(vendor)` is a copy of `os.environ` in which `import torch_npu` (or `torch_musa`) loads the
stand-in plugin (tests/fake_plugins/): tensors live on `npu:N` / `musa:N` and compute on the cpu, the
collective `hccl` / `mccl` runs gloo underneath. Only that vendor's plugin is importable, so portlayer's
probe finds it with PORTLAYER_BACKEND unset (any PORTLAYER_* / FAKE_* variable of the caller is dropped).
The host has `devices` devices (2 by default, one per torchrun rank); the vendor's visible-devices variable
(ASCEND_RT_VISIBLE_DEVICES, MUSA_VISIBLE_DEVICES) picks among them as on the real hardware.

The device is a C++ library compiled on first use and cached (tests/.fake_device_cache/); call `build()`
once before starting several processes, so that they do not all wait on the compiler.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FAKE_PLUGINS = REPO / "tests" / "fake_plugins"

# vendor -> (plugin module, collective, visible-devices variable)
VENDORS = {
    "npu": ("torch_npu", "hccl", "ASCEND_RT_VISIBLE_DEVICES"),
    "musa": ("torch_musa", "mccl", "MUSA_VISIBLE_DEVICES"),
}


def plugin_path(*vendors: str) -> list[str]:
    """The PYTHONPATH entries that make these vendors' stand-in plugins importable."""
    return [str(FAKE_PLUGINS)] + [str(FAKE_PLUGINS / vendor) for vendor in vendors]


def environment(vendor: str, base: dict | None = None, *, devices: int = 2) -> dict:
    """A subprocess environment in which the stand-in `vendor` device ("npu" or "musa") is installed."""
    if vendor not in VENDORS:
        raise ValueError(f"no stand-in for {vendor!r}; choose one of {', '.join(VENDORS)}")
    env = {k: v for k, v in (os.environ if base is None else base).items() if not k.startswith(("PORTLAYER_", "FAKE_"))}
    existing = [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry]
    env["PYTHONPATH"] = os.pathsep.join([*plugin_path(vendor), str(REPO), *existing])
    env[f"FAKE_{vendor.upper()}_DEVICE_COUNT"] = str(devices)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def build() -> Path:
    """Compile the stand-in device now if it is not cached yet; returns the library's path."""
    sys.path.insert(0, str(FAKE_PLUGINS))
    try:
        from fake_vendor import build as builder
    finally:
        sys.path.remove(str(FAKE_PLUGINS))
    return builder.library()
