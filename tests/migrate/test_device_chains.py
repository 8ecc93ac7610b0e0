"""Device-selection `if` chains (docs/migrate.md, "Meaning", rules 4 and 5): a chain already dispatches only
when one of its branches serves the backend the migrated program will run on. A CUDA/mps/cpu chain does
not (mps is never a port's target): its CUDA branch is placement and must put the program on the active
backend, on the stand-in npu as on this cpu-only host. A port that silently trains on the host cpu while
an accelerator is there is the worst outcome, so the programs run here print where their tensors went and
how many bytes the device holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from portlayer.migrate.engine import migrate_source
from tests import accelerator
from tests.processes import HUNG_S

# A GPT training script's auto-detection (nanoGPT-style forks): the cpu unless CUDA, or Apple's mps.
AUTO_DETECT = '''
import torch
device = "cpu"
if torch.cuda.is_available():
    device = "cuda"
elif hasattr(torch.backends, "mps") and torch.backends.mps.is_available():
    device = "mps"
x = torch.ones(64, device=device)
'''

# pytorch/examples word_language_model/main.py (2025): `--cuda` is the user's request for the accelerator.
CUDA_FLAG = '''
import argparse
import torch
parser = argparse.ArgumentParser()
parser.add_argument("--cuda", action="store_true", default=False)
parser.add_argument("--mps", action="store_true", default=False)
args = parser.parse_args(["--cuda"])
use_mps = args.mps and torch.backends.mps.is_available()
if args.cuda:
    device = torch.device("cuda")
elif use_mps:
    device = torch.device("mps")
else:
    device = torch.device("cpu")
x = torch.ones(64).to(device)
'''

PROGRAMS = {"auto_detect": AUTO_DETECT, "cuda_flag": CUDA_FLAG}

# Each migrated program run in turn in one process; what it printed: each program's tensor's device type,
# and the bytes the active device holds once all have run.
RUNNER = '''
import json, sys
import torch
where, ran = {}, []
for name, code in json.loads(sys.argv[1]).items():
    ran.append({"__name__": name})
    exec(compile(code, name, "exec"), ran[-1])
    where[name] = ran[-1]["x"].device.type
module = torch.get_device_module(torch.accelerator.current_accelerator()) if torch.accelerator.is_available() else None
where["allocated"] = module.memory_allocated() if module else 0
print(json.dumps(where))
'''


def run_migrated(target: str, env: dict | None) -> dict:
    migrated = {}
    for name, source in PROGRAMS.items():
        result = migrate_source(source, target)
        assert "PL411" not in [d.code for d in result.diagnostics], f"{name}: left whole as if it dispatched"
        migrated[name] = result.code
    ran = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(migrated)], capture_output=True, text=True,
                         env=env, timeout=HUNG_S)
    assert ran.returncode == 0, ran.stderr[-3000:]
    return json.loads(ran.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("target", ["neutral", "npu"])
def test_a_cuda_or_mps_chain_places_on_the_stand_in_npu(target, stand_in_device):
    ran = run_migrated(target, stand_in_device("npu"))
    assert (ran["auto_detect"], ran["cuda_flag"]) == ("npu", "npu")
    assert ran["allocated"] >= 2 * 64 * 4  # both tensors are held by the device, not the host


@pytest.mark.parametrize("target", ["neutral", "torch"])
def test_a_cuda_or_mps_chain_falls_back_to_the_cpu_without_an_accelerator(target):
    host = accelerator.hidden({k: v for k, v in os.environ.items() if not k.startswith(("PORTLAYER_", "FAKE_"))})
    ran = run_migrated(target, host)
    assert (ran["auto_detect"], ran["cuda_flag"], ran["allocated"]) == ("cpu", "cpu", 0)


@pytest.mark.parametrize("target", ["neutral", "torch", "npu", "musa"])
@pytest.mark.parametrize("vendor", ["npu", "musa", "mlu", "sdaa", "supa", "hpu", "xpu"])
def test_a_chain_with_a_branch_for_a_backend_the_port_runs_on_is_left_whole(vendor, target):
    source = (f"import torch\nif is_{vendor}_available():\n    torch.{vendor}.set_device(0)\n"
              "else:\n    torch.cuda.set_device(0)\n")
    result = migrate_source(source, target)
    if target in ("neutral", "torch") or target == vendor:
        # The program may run on that backend: its branch must still be reached.
        assert result.code == source and [d.code for d in result.diagnostics] == ["PL411"]
    else:
        # Ported to another vendor, the chain's other branch is never taken: its CUDA branch is placement.
        assert f"torch.{target}.set_device(0)" in result.code and "PL411" not in [d.code for d in result.diagnostics]
