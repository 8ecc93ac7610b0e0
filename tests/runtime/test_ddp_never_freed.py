"""A DDP model the script never frees: its reducer (which holds the process group and its worker threads)
goes before the interpreter finalises, where a gloo rank used to abort now and then ("terminate called
without an active exception"). The drop-in frees it inside `destroy_process_group`; the runtime, at exit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import accelerator
from tests.processes import HUNG_S

REPO = Path(__file__).resolve().parents[2]
PROGRAM = Path(__file__).with_name("programs") / "ddp_never_freed.py"


def torchrun(way: str) -> subprocess.CompletedProcess:
    # Two gloo ranks on a host without accelerators (one GPU has no second device for rank 1).
    env = accelerator.hidden({k: v for k, v in os.environ.items() if not k.startswith(("PORTLAYER_", "FAKE_"))})
    env.update(PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    return subprocess.run(
        [*command, str(PROGRAM), way], capture_output=True, text=True, env=env, cwd=REPO, timeout=HUNG_S
    )


@pytest.mark.parametrize(("way", "freed_at_destroy"), [("dropin", True), ("neutral", False)])
def test_a_ddp_model_never_freed_loses_its_reducer_before_the_interpreter_finalises(way, freed_at_destroy):
    run = torchrun(way)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    lines = run.stdout.splitlines()
    # Both ranks; the neutral program keeps its reducer past destroy_process_group (torch's own function).
    assert sorted(line for line in lines if line.startswith("freed")) == sorted(
        [f"freed at destroy: {freed_at_destroy}", "freed by exit: True"] * 2
    )
