"""`--target torch` output runs on the vendor's device only through torch's device-plugin autoload.

The torch target adds no import: nothing in the migrated program imports torch_npu. Recent torch_npu
registers a `torch.backends` entry point, which `import torch` loads (torch/__init__.py
`_import_device_backends`, on unless TORCH_DEVICE_BACKEND_AUTOLOAD=0; the entry-point form is
pytorch/pytorch test/autoload/device_backend/setup.py). The stand-in registers one the same way
(tests/fake_plugins/autoload/npu), so the migrated program must train on the stand-in npu, its bytes counted
there; with autoload off, the same program trains on the cpu.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from portlayer.migrate.engine import migrate_source
from tests.accelerator import NONE_VISIBLE
from tests.example_reference import REPO
from tests.processes import HUNG_S

CUDA_PROGRAM = """\
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
model = torch.nn.Linear(16, 4).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x = torch.randn(8, 16).cuda()
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
torch.cuda.synchronize()
print(f"trained on {next(model.parameters()).device}")
"""

# Runs the program, then reports what the stand-in counted (its library is loaded only with the plugin).
RUN_AND_COUNT = """\
import json, runpy, sys, torch
runpy.run_path(sys.argv[1], run_name="__main__")
loaded = hasattr(torch.ops.fake_device, "memory_stats")
print(json.dumps({"peak_bytes": torch.ops.fake_device.memory_stats(0)[1] if loaded else None}))
"""


@pytest.fixture(scope="module")
def migrated(tmp_path_factory):
    program = tmp_path_factory.mktemp("torch_target") / "train.py"
    program.write_text(migrate_source(CUDA_PROGRAM, target="torch").code)
    assert "import torch_npu" not in program.read_text()
    return program


def run(program, env) -> tuple[str, dict]:
    result = subprocess.run(
        [sys.executable, "-c", RUN_AND_COUNT, str(program)],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=HUNG_S,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    trained_on, counted = result.stdout.strip().splitlines()[-2:]
    return trained_on, json.loads(counted)


def test_torch_target_output_trains_on_the_autoloaded_device(migrated, stand_in_device):
    trained_on, counted = run(migrated, stand_in_device("npu", autoload=True))
    assert trained_on == "trained on npu:0"
    assert counted["peak_bytes"] > 16 * 4 * 4  # at least the weight, on the device


def test_without_autoload_the_same_output_trains_on_the_cpu(migrated, stand_in_device):
    # A host whose one accelerator is the stand-in: every other backend's devices hidden (on a GPU host the program
    # would otherwise find CUDA), the stand-in's own variable left as it is.
    others = {name: "" for name in NONE_VISIBLE if name != "ASCEND_RT_VISIBLE_DEVICES"}
    env = {**stand_in_device("npu", autoload=True), **others, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    assert run(migrated, env) == ("trained on cpu", {"peak_bytes": None})
