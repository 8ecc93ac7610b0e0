"""`portlayer parity run --tp 2` on the stand-in npu and musa matches the committed cpu DDP baseline: the split
model on a device mesh of the vendor's device type, its all-reduces over the vendor's collective (hccl, mccl).

The stand-in computes with the cpu's kernels, so what differs from the baseline is the split matmuls' rounding
alone; what this proves is the path. The npu run is the 4-rank layout (2 copies of the model, each split over 2
ranks, one rank per device); the musa run the 2-rank one (one copy, its batch the two DDP ranks' together).
"""

import subprocess
import sys

import pytest

from portlayer.train import runfile
from tests.example_reference import REPO
from tests.processes import HUNG_S
from tests.trainer.helpers import BASELINES

PRESET = "mixtral-8x7b-tiny"


@pytest.mark.parametrize(
    ("vendor", "nproc", "options"),
    [("npu", 4, ()), ("musa", 2, ("--per-device-batch", 8))],  # the baseline: 2 ranks x 4
)
def test_tensor_parallel_on_the_stand_in_device_matches_the_cpu_ddp_baseline(
    vendor, nproc, options, tmp_path, stand_in_device
):
    env = stand_in_device(vendor, devices=nproc)

    def portlayer(*args):
        return subprocess.run(
            [sys.executable, "-m", "portlayer", *map(str, args)],
            capture_output=True, text=True, env=env, cwd=REPO, timeout=HUNG_S,
        )  # fmt: skip

    out = tmp_path / "run.json"
    run = portlayer("parity", "run", "--preset", PRESET, "--nproc", nproc, "--tp", 2, *options, "--out", out)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]

    metadata = runfile.read_run(out)["metadata"]
    assert (metadata["device_type"], metadata["tensor_parallel"], metadata["world_size"]) == (vendor, 2, nproc)
    compare = portlayer("parity", "compare", BASELINES / f"{PRESET}.cpu-cpu.json", out)
    assert compare.returncode == 0, compare.stdout + compare.stderr
    assert compare.stdout.strip().splitlines()[-1].endswith("rounding: reduction order")
