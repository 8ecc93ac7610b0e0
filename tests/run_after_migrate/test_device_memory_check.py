"""The suite's check that a port trained on the stand-in device and not on the host cpu (launch.finish):
it must fail loudly for a program that exits 0 with a falling loss while computing on the cpu, and pass
for one that computes on the device. Each case runs one small program on the stand-in npu."""

from __future__ import annotations

import pytest

from tests.run_after_migrate.launch import TARGETS, finish, start

STAND_IN_NPU = next(target for target in TARGETS if target.name == "npu")

# Trains a linear fit where `device` says; prints falling losses either way.
PROGRAM = """
import torch
import torch_npu  # noqa: F401  (the stand-in: loaded, as a port to the npu loads it)

device = {device!r}
weights = torch.zeros(4, device=device, requires_grad=True)
inputs = torch.randn(64, 4).to(device)
targets = inputs @ torch.tensor([1.0, -2.0, 3.0, 0.5]).to(device)
optimizer = torch.optim.SGD([weights], lr=0.1)
for step in range(5):
    loss = ((inputs @ weights - targets) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"loss {{loss.item():.4f}}")
"""


def run(tmp_path, device: str, nproc: int | None = None):
    script = tmp_path / "fit.py"
    script.write_text(PROGRAM.format(device=device))
    return finish(start(script, [], STAND_IN_NPU, nproc), f"fit.py on {device}")


def test_a_program_that_trains_on_the_host_cpu_fails_whatever_its_exit_code(tmp_path):
    with pytest.raises(AssertionError, match="allocated 0 bytes on it: it trained on the host cpu"):
        run(tmp_path, "cpu")


def test_a_program_that_never_loads_the_device_fails(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text("print('loss 1.0')\n")
    with pytest.raises(AssertionError, match="never loaded the stand-in device"):
        finish(start(script, [], STAND_IN_NPU, None), "plain.py")


@pytest.mark.parametrize("nproc", [None, 2], ids=["one-process", "torchrun-x2"])
def test_a_program_that_trains_on_the_device_passes(tmp_path, nproc):
    output = run(tmp_path, "npu", nproc)
    assert "loss" in output
