"""The suite on a host with an accelerator, and the tests that need a host without one.

A GPU host runs the suite with CUDA visible: every test that means "the active backend" must pass there, and a
test that means "a host without accelerators" must say so and hide the devices itself. On a machine without
one, `PORTLAYER_TESTS_ACCELERATOR=npu` (or `musa`) makes the stand-in device (tests/fake_device.py) installed
and visible to the whole run, the pytest process and every process it starts, as CUDA is on a GPU host; the
probe then picks it with PORTLAYER_BACKEND unset:

    PORTLAYER_TESTS_ACCELERATOR=npu .venv/bin/python -m pytest tests/runtime tests/dropin

The tests that mean a host without accelerators ask for the `without_accelerators` fixture (tests/conftest.py),
or start their process with `hidden()`'s environment: no backend forced, no stand-in plugin importable, and
every backend's visible-devices variable empty (`CUDA_VISIBLE_DEVICES=""`: the CUDA runtime then sees none).
A process that has loaded a device cannot unsee it (torch caches CUDA's device count, a plugin reads its
variable at import), so such a test checks the host in a fresh process.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from portlayer.backends import IN_TREE

VARIABLE = "PORTLAYER_TESTS_ACCELERATOR"
# Each backend's visible-devices variable (cuda, mps and cpu share CUDA_VISIBLE_DEVICES).
VISIBLE_DEVICES = sorted({backend.visible_devices_env for backend in IN_TREE})
# What a process on a host without accelerators is started with (`run_python(..., fake_plugins=False, env=NONE)`).
NONE_VISIBLE = dict.fromkeys(VISIBLE_DEVICES, "")

SELECT = """
import json, sys
from portlayer.errors import PortlayerError
from portlayer.selection import select
try:
    selection = select(sys.argv[1] if len(sys.argv) > 1 else None)
except PortlayerError as error:
    print(json.dumps({"error": str(error)}))
else:
    print(json.dumps({"backend": selection.backend.name, "reason": selection.reason,
                      "probes": {p.backend: [p.available, p.detail] for p in selection.probes}}))
"""


def stand_in() -> str | None:
    """The stand-in vendor this run shows as the host's accelerator (PORTLAYER_TESTS_ACCELERATOR), or None."""
    return os.environ.get(VARIABLE, "").strip().lower() or None


def show() -> None:
    """Install the stand-in device this run asks for, in this process and the processes it starts (called
    once, from tests/conftest.py, before any test imports torch's plugins)."""
    vendor = stand_in()
    if vendor is None:
        return
    from tests import fake_device

    # Compiled here, once, so that no process started later races to compile it.
    os.environ.update(fake_device.environment(vendor))
    for entry in reversed(os.environ["PYTHONPATH"].split(os.pathsep)):
        if entry not in sys.path:
            sys.path.insert(0, entry)


def hidden(base: dict | None = None) -> dict:
    """`base` (else os.environ) as a host without accelerators has it: no backend forced, no stand-in plugin
    on PYTHONPATH, every visible-devices variable empty."""
    from tests.fake_device import FAKE_PLUGINS

    env = {
        name: value
        for name, value in (os.environ if base is None else base).items()
        if name not in (VARIABLE, "PORTLAYER_BACKEND") and not name.startswith("FAKE_")
    }
    path = [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry]
    kept = [entry for entry in path if not entry.startswith(str(FAKE_PLUGINS))]
    if kept:
        env["PYTHONPATH"] = os.pathsep.join(kept)
    else:
        env.pop("PYTHONPATH", None)
    env.update(NONE_VISIBLE)
    return env


# Named for tests/devices_stay_hidden/sitecustomize.py: the variables it empties in every process started below.
HIDDEN_DEVICES_ENV = "PORTLAYER_TESTS_HIDDEN_DEVICES"
DEVICES_STAY_HIDDEN = Path(__file__).resolve().parent / "devices_stay_hidden"


def devices_stay_hidden(env: dict) -> dict:
    """`env`, with which every process it starts, and every process those start, empties each visible-devices
    variable at its start (a sitecustomize first on PYTHONPATH), whatever a launcher wrote on the way."""
    return {
        **env,
        "PYTHONPATH": os.pathsep.join(filter(None, (str(DEVICES_STAY_HIDDEN), env.get("PYTHONPATH")))),
        HIDDEN_DEVICES_ENV: ",".join(VISIBLE_DEVICES),
    }


def hidden_from_launched(base: dict | None = None) -> dict:
    """`hidden(base)`, kept so in the processes a launcher starts after writing a visible-devices variable of its
    own (accelerate's `gpu_ids`, DeepSpeed's `--num_gpus`: CUDA_VISIBLE_DEVICES=0,1), which would show a GPU
    host's devices to them again."""
    return devices_stay_hidden(hidden(base))


def selected_without_accelerators(name: str = "") -> dict:
    """`select(name)` (probing, without a name) in a fresh process on a host without accelerators: the backend,
    the reason and each probe's (available, detail), or the error's line."""
    from tests.processes import fresh_process_json

    return fresh_process_json(f"import sys; sys.argv[1:] = {[name] if name else []!r}\n" + SELECT,
                              env=NONE_VISIBLE, fake_plugins=False)  # fmt: skip
