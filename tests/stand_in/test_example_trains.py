"""The bundled CUDA example, ported every way portlayer offers, trains under 2-process torchrun on the
stand-in npu and musa devices, and trains the same as plain torch does on the cpu.

- `--target npu` / `--target musa`: the vendor's own API (`import torch_npu`, `torch.npu.*`, "hccl");
- `--target neutral`: portlayer's API, and the drop-in (`import portlayer.torch as torch`, nothing else
  changed): both with PORTLAYER_BACKEND unset, so portlayer's probe has to find the plugin.

Each run must print a non-zero peak of device memory: the model really lived on the device (on the cpu
backend the same line reads 0.0 MiB).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.example_reference import REPO, STEPS, reference_losses
from tests.fake_device import torchrun

EXAMPLE = REPO / "examples" / "cuda_ddp_train.py"


@pytest.fixture(scope="module")
def expected_losses():
    return reference_losses()


def ported(tmp_path, way: str):
    script = tmp_path / "train.py"
    source = EXAMPLE.read_text()
    if way == "dropin":
        script.write_text(source.replace("\nimport torch\n", "\nimport portlayer.torch as torch\n", 1))
        return script
    script.write_text(source)
    result = subprocess.run(
        [sys.executable, "-m", "portlayer", "migrate", "--target", way, str(script)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    return script


# Each vendor with its own API, and each of portlayer's two ways on one of them (each run takes a while).
@pytest.mark.parametrize(
    ("way", "vendor"), [("vendor", "npu"), ("vendor", "musa"), ("neutral", "npu"), ("dropin", "musa")]
)
def test_the_ported_example_trains_on_the_stand_in_device(way, vendor, tmp_path, stand_in_device, expected_losses):
    script = ported(tmp_path, vendor if way == "vendor" else way)
    if way == "vendor":
        assert f"import torch_{vendor}" in script.read_text()

    losses_out = tmp_path / "losses.json"
    run = torchrun(vendor, script, "--steps", STEPS, "--losses_out", losses_out)

    assert run.returncode == 0, run.stdout[-4000:]
    assert json.loads(losses_out.read_text()) == pytest.approx(expected_losses, rel=1e-5)
    peak = re.search(r"peak memory ([\d.]+) MiB", run.stdout)
    assert peak and float(peak.group(1)) > 1.0, run.stdout[-2000:]
