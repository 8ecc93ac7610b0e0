"""Run after migrate, scale-out idioms: programs/fsdp_deepspeed.py (DeepSpeed's process group with
`dist_backend="nccl"`, FSDP1 with `device_id=torch.cuda.current_device()`, FSDP2 on a "cuda" device mesh),
migrated, trains on 2 cpu ranks (gloo, DeepSpeed's cpu accelerator) and each model ends up on the target's
device.

Targets it does not run on, and why: on the stand-in npu, FSDP1 stops at `flat_param.set_` ("Attempted to
set the storage of a tensor on device "cpu" to a storage on different device "npu:0"") and FSDP2's device
mesh at "ProcessGroup name not set" (the stand-in's hccl); DeepSpeed has no musa accelerator (PL415).
"""

from __future__ import annotations

import re
import shutil

import pytest

from tests.run_after_migrate.launch import PROGRAMS, TARGETS, assert_trains, finish, start

PROGRAM = "fsdp_deepspeed.py"
pytestmark = pytest.mark.deepspeed


@pytest.mark.parametrize("target", [t for t in TARGETS if t.name in ("neutral", "torch")], ids=str)
def test_migrated_scale_out_program_trains_on_two_ranks(target, tmp_path):
    script = tmp_path / PROGRAM
    shutil.copyfile(PROGRAMS / PROGRAM, script)
    target.prepare(script)
    migrated = script.read_text()
    assert "nccl" not in migrated and "torch.cuda" not in migrated and '"cuda"' not in migrated

    output = finish(start(script, [], target, 2), f"{PROGRAM} ({target}, torchrun x2)")

    for part in ("fsdp1", "fsdp2"):
        found = [float(value) for value in re.findall(rf"^{part} step \d+ loss (\S+)$", output, re.MULTILINE)]
        assert_trains(found, f"{PROGRAM} {part} ({target})")
        assert f"{part}: model on {target.device_type}" in output
