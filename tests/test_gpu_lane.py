"""The GPU machine's lane (tools/gpu_lane.py, `make test-gpu`) in its dry mode, on a machine without CUDA: it
says what it would install and run, skips the CUDA-only checks, and runs nothing."""

import os
import subprocess
import sys

from tests.accelerator import NONE_VISIBLE
from tests.processes import HUNG_S, REPO

LANE = REPO / "tools" / "gpu_lane.py"
TINY_PRESETS = ("gpt2-tiny", "bert-base-uncased-tiny", "mixtral-8x7b-tiny")


def lane(*args) -> subprocess.CompletedProcess:
    # A machine without CUDA, whichever this is.
    env = {**os.environ, **NONE_VISIBLE}
    return subprocess.run([sys.executable, str(LANE), *map(str, args)], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=HUNG_S)  # fmt: skip


def steps(output: str) -> dict[str, str]:
    """Each step's name and what the dry run says of it (the line after its command)."""
    lines = output.splitlines()
    return {
        line[3:].split(": ", 1)[0]: lines[i + 1].strip()
        for i, line in enumerate(lines)
        if line.startswith("== ")
    }


def test_the_dry_run_plans_the_install_the_suite_and_the_cuda_checks_and_runs_nothing(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "libcst-1.8.6-cp311-cp311-manylinux_2_17_x86_64.whl").touch()
    out = tmp_path / "out"
    result = lane("--dry-run", "--wheels", wheels, "--out", out)
    assert result.returncode == 0, result.stderr
    said = steps(result.stdout)
    expected = {
        "install the carried wheels": "would run (dry run)",
        "install portlayer": "would run (dry run)",
        "the suite, CUDA visible": "would run (dry run), beside the others",
        "the example in four forms": "skipped: dry run, no CUDA device",
    }
    for preset in TINY_PRESETS:
        for precision, suffix in (("fp32", ""), ("bf16", "-bf16")):
            baseline = f"reference_train/baselines/{preset}.cuda-h200{suffix}.json"
            band = f"reference_train/bands/{preset}.bf16.json"
            missing = next((f for f in (baseline, band if suffix else None) if f and not (REPO / f).is_file()), None)
            expected[f"parity {preset} {precision} vs H200"] = (
                f"skipped: no {missing} committed" if missing else "skipped: dry run, no CUDA device"
            )
    for strategy in ("ddp", "fsdp2", "zero1", "zero2", "zero3"):
        expected[f"strategy {strategy} on one GPU"] = said[f"strategy {strategy} on one GPU"]
        assert said[f"strategy {strategy} on one GPU"].startswith("skipped: ")
    expected["trainer throughput vs HF Trainer, gpt2 bf16"] = "skipped: dry run, no CUDA device"
    assert said == expected
    assert "CUDA devices: none" in result.stdout
    assert result.stdout.splitlines()[-1] == f"dry run: {len(expected)} steps planned, nothing run"
    # The machine's own python, pip without an index or dependencies, the suite in parallel.
    commands = [line for line in result.stdout.splitlines() if line.startswith("== ")]
    assert all(sys.executable in command for command in commands if "pip" in command or "pytest" in command)
    assert f"pip install --no-index --no-deps --disable-pip-version-check {wheels}/libcst-" in commands[0]
    assert commands[1].endswith(f"--no-build-isolation -e {REPO}")
    # The bench first, alone on the device; then the suite, beside the CUDA checks.
    assert "bench/trainer_throughput.py" in commands[2]
    assert "-m pytest -v -n " in commands[3]
    assert not out.exists()


def test_a_portlayer_wheel_among_the_carried_ones_is_installed_instead_of_the_checkout(tmp_path):
    (tmp_path / "portlayer-0.9.0-py3-none-any.whl").touch()
    result = lane("--dry-run", "--wheels", tmp_path)
    assert result.returncode == 0, result.stderr
    assert "install portlayer" not in steps(result.stdout)
    assert "portlayer-0.9.0-py3-none-any.whl" in result.stdout


def test_a_carried_deepspeed_wheel_counts_as_installed_when_the_plan_is_made(tmp_path):
    # The plan is made before the wheels are installed: DeepSpeed among them plans the ZeRO checks.
    (tmp_path / "deepspeed-0.19.8-py3-none-any.whl").touch()
    said = steps(lane("--dry-run", "--wheels", tmp_path).stdout)
    for strategy in ("zero1", "zero2", "zero3"):
        assert said[f"strategy {strategy} on one GPU"] == "skipped: dry run, no CUDA device"


def test_without_cuda_and_without_dry_run_it_refuses_in_one_line(tmp_path):
    result = lane("--out", tmp_path / "out")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == "gpu_lane: error: no CUDA device on this machine; --dry-run says what the lane would run\n"
    assert not (tmp_path / "out").exists()


def test_a_missing_wheels_folder_is_one_line(tmp_path):
    result = lane("--dry-run", "--wheels", tmp_path / "absent")
    assert result.returncode == 2
    assert result.stderr == f"gpu_lane: error: --wheels {tmp_path / 'absent'}: no such folder\n"
