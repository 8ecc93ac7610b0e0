"""A process that exits right after a backward on the stand-in device exits cleanly.

It used to abort with "terminate called without an active exception" (exit 134) about half the time: the
device's autograd thread could free the backward's last state (which holds a Python object in torch 2.13)
while the interpreter was finalising (see fake_vendor/__init__.py `_release_the_last_backward`).

The test repeats the exit in forked children of one interpreter (torch is imported once, and no backward
runs before the fork, so each child starts its own autograd threads). A long GIL switch interval keeps the
main thread from handing the GIL to the device thread before it finalises: without the fix, about 8 children
in 10 aborted, so 8 children miss the bug once in hundreds of thousands of runs.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.example_reference import REPO
from tests.processes import HUNG_S

CHILDREN = 8

FIRST_BACKWARD_THEN_EXIT = r"""
import json, os, sys
import torch
import torch_npu

statuses = []
for _ in range(int(sys.argv[1])):
    child = os.fork()
    if child == 0:
        sys.setswitchinterval(10)
        model = torch.nn.Linear(8, 4).to("npu:0")
        model(torch.randn(16, 8, device="npu:0")).sum().backward()
        # Nothing printed after the backward: writing releases the GIL, and the device thread would win.
        sys.exit(0 if model.weight.grad.device == torch.device("npu", 0) else 3)
    statuses.append(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]))
print(json.dumps(statuses))
"""


def test_processes_exit_cleanly_right_after_their_first_backward_on_the_device(stand_in_device):
    result = subprocess.run(
        [sys.executable, "-c", FIRST_BACKWARD_THEN_EXIT, str(CHILDREN)],
        capture_output=True, text=True, env=stand_in_device("npu"), cwd=REPO, timeout=HUNG_S,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    # -6: SIGABRT, from std::terminate.
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [0] * CHILDREN, result.stderr[-2000:]
    assert "terminate called" not in result.stderr
