"""`portlayer parity run --preset gpt2-tiny --nproc 2` on the stand-in npu and musa devices matches the
committed cpu baseline at rounding level, and the run file and the parity table say which device ran it.

The stand-in runs the cpu's own kernels, so the loss must agree to rounding (docs/parity.md, "Tolerance and what an error means": cpu
against H100 is 1e-7 – 2e-7 for this preset); what this proves is the path: portlayer's probe, the
vendor's collective under DDP, the device memory figures and the run file's metadata.
"""

import subprocess
import sys

import pytest

from portlayer.train import runfile
from portlayer.train.band import BANDS
from tests.example_reference import REPO
from tests.fake_device import environment
from tests.processes import HUNG_S

BASELINE = runfile.BASELINES / "gpt2-tiny.cpu-cpu.json"
ROUNDING = 1e-6


def portlayer(vendor, *args):
    return subprocess.run(
        [sys.executable, "-m", "portlayer", *map(str, args)],
        capture_output=True, text=True, env=environment(vendor), cwd=REPO, timeout=HUNG_S,
    )  # fmt: skip


@pytest.mark.parametrize(("vendor", "device_name"), [("npu", "Ascend910B"), ("musa", "MTT S4000")])
def test_parity_run_on_the_stand_in_device_matches_the_cpu_baseline(vendor, device_name, tmp_path, stand_in_device):
    from portlayer.train import runfile

    out = tmp_path / "run.json"
    run = portlayer(vendor, "parity", "run", "--preset", "gpt2-tiny", "--nproc", 2, "--out", out)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]

    metadata = runfile.read_run(out)["metadata"]
    assert (metadata["backend"], metadata["device_type"]) == (vendor, vendor)
    assert metadata["device_name"].startswith(device_name)
    assert metadata["vendor"]["module"] == f"torch_{vendor}"
    # Peak device memory is what the device held: the model, its gradients and AdamW's two moments at least.
    assert all(step["peak_memory_bytes"] > 4 * 1_000_000 for step in runfile.read_run(out)["steps"])

    compare = portlayer(vendor, "parity", "compare", BASELINE, out, "--rtol", ROUNDING)
    assert compare.returncode == 0, compare.stdout + compare.stderr
    device_row = next(line for line in compare.stdout.splitlines() if line.startswith("| gpt2-tiny") and vendor in line)
    assert f"| {vendor} (fp32) |" in device_row
    assert "parity OK" in compare.stdout

    banded = portlayer(vendor, "parity", "compare", BASELINE, out, "--band", BANDS / "gpt2-tiny.fp32.json")
    assert banded.returncode == 0, banded.stdout + banded.stderr
    assert banded.stdout.strip().splitlines()[-1].startswith(
        "within the band: 30 steps of loss, gradient norm, learning rate;"
    )
