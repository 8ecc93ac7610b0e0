"""`portlayer parity run --tp 2`, `--pp 2` and `--tp 2 --sp --pp 2` on the stand-in npu and musa match the committed
cpu DDP baseline: the split model on a device mesh of the vendor's device type, its all-reduces, all-gathers and
reduce-scatters over the vendor's collective (hccl, mccl); the stages' activations and gradients sent and received
over it.

The stand-in computes with the cpu's kernels, so what differs from the baseline is the split matmuls' and summed
gradients' rounding alone; what this proves is the path. The layouts, one rank per device: on the npu 2 copies
split over 2 ranks, and one copy in 2 stages each split over 2 ranks with the sequence split too; on musa one copy
split over 2 ranks, and one copy in 2 stages. A copy's batch is the baseline's 2 DDP ranks' together, in micro-batches through a pipeline.
"""

import subprocess
import sys

import pytest

from portlayer.train import runfile
from tests.example_reference import REPO
from tests.processes import HUNG_S
from tests.trainer.helpers import BASELINES

PRESET = "mixtral-8x7b-tiny"


# The baseline: 2 ranks x 4 sequences.
@pytest.mark.parametrize(
    ("vendor", "nproc", "tensor", "pipeline", "options"),
    [
        ("npu", 4, 2, 1, ()),
        ("npu", 4, 2, 2, ("--sp", "--grad-accum", 2)),
        ("musa", 2, 2, 1, ("--per-device-batch", 8)),
        ("musa", 2, 1, 2, ("--grad-accum", 2)),
    ],
)
def test_a_split_model_on_the_stand_in_device_matches_the_cpu_ddp_baseline(
    vendor, nproc, tensor, pipeline, options, tmp_path, stand_in_device
):
    env = stand_in_device(vendor, devices=nproc)

    def portlayer(*args):
        return subprocess.run(
            [sys.executable, "-m", "portlayer", *map(str, args)],
            capture_output=True, text=True, env=env, cwd=REPO, timeout=HUNG_S,
        )  # fmt: skip

    out = tmp_path / "run.json"
    layout = ("--tp", tensor, "--pp", pipeline)
    run = portlayer("parity", "run", "--preset", PRESET, "--nproc", nproc, *layout, *options, "--out", out)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]

    metadata = runfile.read_run(out)["metadata"]
    where = ("device_type", "tensor_parallel", "pipeline_parallel", "world_size")
    assert tuple(metadata[key] for key in where) == (vendor, tensor, pipeline, nproc)
    compare = portlayer("parity", "compare", BASELINES / f"{PRESET}.cpu-cpu.json", out)
    assert compare.returncode == 0, compare.stdout + compare.stderr
    assert compare.stdout.strip().splitlines()[-1].endswith("rounding: reduction order")
