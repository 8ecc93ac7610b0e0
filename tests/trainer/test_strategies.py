"""`--strategy fsdp2|zero1|zero2|zero3`: 2-process gloo jobs held to the committed DDP baselines.

A strategy changes how state is sharded, never the experiment, so each run must match the DDP baseline of its
preset at the same-strategy tolerance (docs/parity.md, "Across strategies": the reordered reduction moves the
loss by under 1e-7 here). The zero2 run is also killed part-way and resumed from its checkpoint, so one pair of
jobs proves both the strategy's parity and its checkpoint with DeepSpeed's own cpu accelerator; fsdp2's and
zero3's are killed and resumed on the stand-in devices (tests/stand_in/test_strategies.py).
"""

import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from portlayer.cli import cli
from portlayer.train import runfile
from portlayer.train.parity_run import run
from tests.accelerator import devices_stay_hidden
from tests.parity.logs_data import band_path
from tests.processes import HUNG_S
from tests.trainer.helpers import (
    BASELINES,
    KILL_OPTIONS,
    RTOL,
    assert_killed_with_a_checkpoint,
    baseline,
    free_port,
    max_relative_difference,
    needs_cpu_fsdp2,
)

# Gloo jobs on the cpu, held to the cpu baselines: the devices are hidden from the ranks (tests/accelerator.py). On a
# GPU host the ranks would otherwise take nccl, rank 1 asking for a cuda:1 a one-GPU host does not have.
pytestmark = pytest.mark.usefixtures("without_accelerators")

def parity_run(*args):
    return CliRunner().invoke(run, [*map(str, args), "--quiet"], catch_exceptions=False)


def assert_matches_the_ddp_baseline(preset: str, out, strategy: str) -> None:
    expected, actual = baseline(preset), runfile.read_run(out)
    assert expected["metadata"]["strategy"] == "ddp"  # read as what a file from before --strategy meant
    assert actual["metadata"]["strategy"] == strategy
    assert max_relative_difference(expected, actual) < RTOL
    for key in ("config_hash", "data_checksum", "init_weights_checksum", "world_size"):
        assert actual["metadata"][key] == expected["metadata"][key], key
    # The strategy's own gradient norm (DeepSpeed's global norm, fsdp2's reduced DTensor) is DDP's too.
    compared = CliRunner().invoke(
        cli,
        ["parity", "compare", str(BASELINES / f"{preset}.cpu-cpu.json"), str(out), "--band", str(band_path(preset, "fp32"))],
    )
    assert compared.exit_code == 0, compared.output
    assert compared.output.strip().splitlines()[-1].startswith(
        "within the band: 30 steps of loss, gradient norm, learning rate;"
    )


# The run killed and resumed on the cpu, with DeepSpeed's own accelerator.
KILLED = ("gpt2-tiny", "zero2")


@pytest.mark.deepspeed
def test_a_killed_sharded_run_resumes_to_the_ddp_baseline(tmp_path):
    preset, strategy = KILLED
    out, checkpoints = tmp_path / "run.json", tmp_path / "checkpoints"
    common = ("--preset", preset, "--nproc", 2, "--steps", 30, "--out", out, "--strategy", strategy)
    common += ("--checkpoint-dir", checkpoints)

    killed = parity_run(*common, *KILL_OPTIONS)
    assert_killed_with_a_checkpoint(killed.exit_code, killed.output, checkpoints, strategy)

    resumed = parity_run(*common, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert_matches_the_ddp_baseline(preset, out, strategy)


# Each preset under one sharded strategy on the cpu; with the killed run above, these are the preset x strategy
# pairs the stand-in's cases leave to the cpu (tests/stand_in/test_strategies.py).
OTHER_PRESETS = (("bert-base-uncased-tiny", "zero3"), ("mixtral-8x7b-tiny", "fsdp2"))
ON_THE_CPU = {KILLED, *OTHER_PRESETS}


@pytest.mark.parametrize(
    ("preset", "strategy"),
    [pytest.param(*case, marks=[pytest.mark.deepspeed] if case[1].startswith("zero") else [needs_cpu_fsdp2])
     for case in OTHER_PRESETS],
)
def test_the_other_presets_match_their_ddp_baseline_under_a_sharded_strategy(tmp_path, preset, strategy):
    out = tmp_path / "run.json"
    result = parity_run("--preset", preset, "--nproc", 2, "--steps", 30, "--out", out, "--strategy", strategy)
    assert result.exit_code == 0, result.output
    assert_matches_the_ddp_baseline(preset, out, strategy)


@pytest.mark.deepspeed
def test_the_deepspeed_launcher_runs_the_trainer(tmp_path):
    """`deepspeed --num_gpus 2 --module portlayer.train …`: ranks from DeepSpeed's launcher (which passes
    --local_rank), ZeRO-1, the same losses as the DDP baseline."""
    out = tmp_path / "run.json"
    launcher = [sys.executable, "-m", "deepspeed.launcher.runner", "--num_gpus", "2", "--master_port", free_port()]
    trainer = ["--module", "portlayer.train", "--preset", "gpt2-tiny", "--parity", "--steps", "30"]
    # The launcher writes CUDA_VISIBLE_DEVICES=0,1 for its ranks: kept empty there, they are the cpu ranks they mean.
    env = devices_stay_hidden({**os.environ, "OMP_NUM_THREADS": "1"})
    result = subprocess.run(
        [*map(str, launcher), *trainer, "--strategy", "zero1", "--out", str(out), "--quiet"],
        capture_output=True, text=True, timeout=HUNG_S, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert_matches_the_ddp_baseline("gpt2-tiny", out, "zero1")


