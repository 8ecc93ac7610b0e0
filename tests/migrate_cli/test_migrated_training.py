"""The end-to-end promise: a CUDA DDP training script, migrated to `neutral`, trains under torchrun on a
machine without a GPU (two cpu processes, gloo), and trains the same as one process does.

The reference is the same migrated script in one process with twice the batch: the script draws its
synthetic tokens as one (steps, world_size, batch, seq) tensor, so one process with batch 8 sees exactly
the rows that two ranks with batch 4 split between them, and DDP's averaged gradient is the gradient of
that batch's mean loss.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from portlayer.train.process_group import ProcessGroup
from tests import accelerator
from tests.processes import HUNG_S

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cuda_ddp_train.py"
STEPS = 6


def torchrun(script: Path, nproc: int, batch_size: int, losses: Path) -> ProcessGroup:
    # A machine without a GPU: on one with CUDA visible, two ranks would take nccl and ask for cuda:0 and cuda:1.
    env = accelerator.hidden({k: v for k, v in os.environ.items() if not k.startswith("PORTLAYER_")})
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1")
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        str(nproc),
        str(script),
        "--steps",
        str(STEPS),
        "--batch_size",
        str(batch_size),
        "--losses_out",
        str(losses),
    ]
    # A group of its own, so that a rank stuck at exit is ended with the launcher.
    return ProcessGroup(
        command, cwd=script.parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def finish(group: ProcessGroup) -> None:
    try:
        output = group.communicate(HUNG_S)
    except subprocess.TimeoutExpired as expired:
        pytest.fail(f"torchrun did not finish in {HUNG_S} s:\n{expired.output[-3000:]}")
    assert group.process.returncode == 0, output[-3000:]


def test_migrated_cuda_ddp_script_trains_on_cpu_like_a_single_process(tmp_path, migrate):
    script = tmp_path / EXAMPLE.name
    script.write_bytes(EXAMPLE.read_bytes())

    run = migrate(script)

    assert run.exit_code == 0, run.stdout + run.stderr
    migrated = script.read_text()
    assert "torch.cuda." not in migrated and '"nccl"' not in migrated and ".cuda()" not in migrated

    ddp, single = tmp_path / "ddp.json", tmp_path / "single.json"
    # Side by side: half the wait.
    with torchrun(script, 2, 4, ddp) as two_ranks, torchrun(script, 1, 8, single) as one_process:
        finish(two_ranks)
        finish(one_process)

    ddp_losses, single_losses = json.loads(ddp.read_text()), json.loads(single.read_text())
    assert len(ddp_losses) == len(single_losses) == STEPS
    assert all(math.isfinite(loss) for loss in ddp_losses)
    assert len(set(ddp_losses)) == STEPS  # the model moves: no two steps give the same loss
    for step, (got, want) in enumerate(zip(ddp_losses, single_losses)):
        assert abs(got - want) <= 1e-5 * abs(want), f"step {step + 1}: ddp {got} vs one process {want}"
