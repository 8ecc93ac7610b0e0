"""portlayer's runtime API on the stand-in npu and musa, with PORTLAYER_BACKEND unset: the probe finds the
plugin, and the answers are the device's (real bytes, real device objects)."""

import json
import subprocess
import sys

import pytest

from tests.example_reference import REPO
from tests.fake_device import VENDORS, environment
from tests.processes import HUNG_S

CALLS = r"""
import json, warnings
import torch, portlayer
warnings.simplefilter("error")   # nothing portlayer answers may warn
portlayer.set_device(f"{portlayer.device_type()}:1")
held = torch.empty(256, device=portlayer.device())      # 1024 bytes on device 1
major, minor = portlayer.get_device_capability()
free, total = portlayer.mem_get_info()
print(json.dumps({
    "backend": portlayer.backend().name, "dist": portlayer.dist_backend(),
    "device": str(portlayer.device()), "tensor": str(held.device), "current": portlayer.current_device(),
    "allocated": portlayer.memory_allocated(1), "held_by_0": portlayer.memory_allocated(0),
    "capability": [major, minor], "mem": total - free,
}))
"""


@pytest.mark.parametrize("vendor", sorted(VENDORS))
def test_the_runtime_answers_for_the_device_the_probe_found(vendor, stand_in_device):
    result = subprocess.run(
        [sys.executable, "-c", CALLS], capture_output=True, text=True, env=environment(vendor), cwd=REPO, timeout=HUNG_S
    )
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["backend"] == vendor and seen["dist"] == VENDORS[vendor].dist_backend
    assert seen["device"] == seen["tensor"] == f"{vendor}:1" and seen["current"] == 1
    assert (seen["allocated"], seen["held_by_0"]) == (1024, 0)
    # torch_musa v2.7.1 answers the S4000's (2, 2); torch_npu answers None, which portlayer turns into the
    # (0, 0) it gives every backend without the concept.
    assert seen["capability"] == ([2, 2] if vendor == "musa" else [0, 0])
    assert seen["mem"] == 1024
