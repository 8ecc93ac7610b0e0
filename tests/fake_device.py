"""Run a program on the stand-in npu / musa device: the one helper other tests need.

    from tests.fake_device import environment
    subprocess.run(["torchrun", "--standalone", "--nproc_per_node", "2", "train.py"],
                   env=environment("npu"), check=True)
    # or, the same with a time limit that also ends ranks stuck at exit:
    result = torchrun("npu", "train.py", "--steps", 3)

`environment(vendor)` is a copy of `os.environ` in which `import torch_npu` (or `torch_musa`) loads the
stand-in plugin (tests/fake_plugins/): tensors live on `npu:N` / `musa:N` and compute on the cpu, the
collective `hccl` / `mccl` runs gloo underneath. Only that vendor's plugin is importable, so portlayer's
probe finds it with PORTLAYER_BACKEND unset (the caller's PORTLAYER_BACKEND and FAKE_* variables are dropped).
The host has `devices` devices (2 by default, one per torchrun rank); the vendor's visible-devices variable
(ASCEND_RT_VISIBLE_DEVICES, MUSA_VISIBLE_DEVICES) picks among them as on the real hardware.

The device is a C++ library compiled on first use and cached (tests/.fake_device_cache/). `environment()`
compiles it before returning, in the calling process: the processes started with that environment then only
load it, and no test that never asks for the stand-in pays for the compiler.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from portlayer.backends import IN_TREE
from portlayer.train.process_group import ProcessGroup
from tests.processes import HUNG_S

REPO = Path(__file__).resolve().parent.parent
FAKE_PLUGINS = REPO / "tests" / "fake_plugins"
BUILD = FAKE_PLUGINS / "fake_vendor" / "build.py"

# vendor -> its backend record (plugin module, collective, visible-devices variable, …): the backends with a
# stand-in plugin, each in the folder of its name under tests/fake_plugins/.
VENDORS = {backend.name: backend for backend in IN_TREE if (FAKE_PLUGINS / backend.name).is_dir()}


def plugin_path(*vendors: str) -> list[str]:
    """The PYTHONPATH entries that make these vendors' stand-in plugins importable."""
    return [str(FAKE_PLUGINS)] + [str(FAKE_PLUGINS / vendor) for vendor in vendors]


# Plugins that register a `torch.backends` entry point, which `import torch` loads by itself (torch's
# device-plugin autoload, TORCH_DEVICE_BACKEND_AUTOLOAD): recent torch_npu does. The stand-in's entry point
# is a dist-info folder of its own, on the path only when asked for.
AUTOLOADED = {"npu": FAKE_PLUGINS / "autoload" / "npu"}


def environment(vendor: str, base: dict | None = None, *, devices: int = 2, autoload: bool = False) -> dict:
    """A subprocess environment in which the stand-in `vendor` device ("npu" or "musa") is installed (and
    compiled, if it was not yet). With `autoload`, its entry point is installed too, as a real install has
    it: `import torch` loads the plugin, before any line of the program runs."""
    if vendor not in VENDORS:
        raise ValueError(f"no stand-in for {vendor!r}; choose one of {', '.join(VENDORS)}")
    if autoload and vendor not in AUTOLOADED:
        raise ValueError(f"the stand-in {vendor} has no autoload entry point")
    build()
    env = {
        k: v
        for k, v in (os.environ if base is None else base).items()
        if k != "PORTLAYER_BACKEND" and not k.startswith("FAKE_")
    }
    # Another stand-in on the caller's path (PORTLAYER_TESTS_ACCELERATOR, tests/accelerator.py) is left out.
    existing = [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry and not entry.startswith(str(FAKE_PLUGINS))]
    entry_points = [str(AUTOLOADED[vendor])] if autoload else []
    env["PYTHONPATH"] = os.pathsep.join([*entry_points, *plugin_path(vendor), str(REPO), *existing])
    env[f"FAKE_{vendor.upper()}_DEVICE_COUNT"] = str(devices)
    for variable in VENDORS[vendor].required_env:
        # A configured host has them (an Ascend host CANN's install path, from its set_env.sh), and the vendor
        # stack reads them; nothing under the stand-in's folder is read.
        env.setdefault(variable, str(FAKE_PLUGINS / vendor))
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


def torchrun(vendor: str, script, *args, nproc: int = 2, cwd=None, env: dict | None = None, timeout: float = HUNG_S):
    """`torchrun --standalone --nproc_per_node N script args…` on the stand-in `vendor` device; returns the
    CompletedProcess (stdout and stderr together in `.stdout`). `env` adds variables."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc)]
    command += [str(script), *map(str, args)]
    env = {**environment(vendor, devices=max(nproc, 2)), **(env or {})}
    # A group of its own, so that a rank stuck at exit is ended with the launcher.
    with ProcessGroup(command, cwd=cwd or Path(script).parent, env=env, stdout=subprocess.PIPE,
                      stderr=subprocess.STDOUT, text=True) as group:  # fmt: skip
        try:
            output = group.communicate(timeout)
        except subprocess.TimeoutExpired as expired:
            output = f"{expired.output}\n[torchrun did not finish in {timeout} s]"
    return subprocess.CompletedProcess(command, group.process.returncode, output, "")
