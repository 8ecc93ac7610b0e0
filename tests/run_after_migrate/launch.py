"""How the run-after-migrate suite prepares a program for a target and runs it, in one process or under
torchrun, and reads the losses it prints.

A target is a way to turn a CUDA training program into one that runs here: `portlayer migrate --target T`
(neutral, torch, and the vendors' npu and musa on the stand-in device that computes) or the one-line drop-in. Adding a target is
adding one `Target` to `TARGETS`: its name, how it prepares the copied program, the environment its runs
need and the device type the program must end up on.
"""

from __future__ import annotations

import functools
import math
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from portlayer.cli import cli
from tests import fake_device

PROGRAMS = Path(__file__).resolve().parent / "programs"
TIMEOUT_S = 300

# `loss 0.123`, `loss: 0.123`, `valid loss 2.733`, and the HF Trainer's `{'loss': '2.443', …}`.
_LOSS = re.compile(r"""\bloss['"]?\s*[:=]?\s*['"]?(-?\d+(?:\.\d+)?(?:e-?\d+)?)""")


def migrate(path: Path, target: str) -> str:
    """`portlayer migrate --target TARGET PATH`, through the real command; returns what it printed."""
    result = CliRunner().invoke(cli, ["migrate", "--target", target, str(path)], catch_exceptions=False)
    assert result.exit_code == 0, f"migrate --target {target} exited {result.exit_code}:\n{result.output}"
    return result.output


def migrated(path: Path, target: str) -> None:
    """Migrate in place, then hold the second run to changing nothing."""
    migrate(path, target)
    first = path.read_bytes()
    migrate(path, target)
    assert path.read_bytes() == first, f"a second `migrate --target {target}` changed {path.name}"


def through_dropin(path: Path) -> None:
    """The drop-in's promise: `import torch` → `import portlayer.torch as torch`, and nothing else."""
    source = path.read_text()
    ported = re.sub(r"(?m)^import torch$", "import portlayer.torch as torch", source)
    assert ported.count("import portlayer.torch as torch") == 1, f"{path.name}: no single `import torch` line"
    path.write_text(ported)


def _host(base: dict) -> dict:
    """This machine as it is: no accelerator, so portlayer selects the cpu."""
    return {k: v for k, v in base.items() if not k.startswith(("PORTLAYER_", "FAKE_"))}


@dataclass(frozen=True)
class Target:
    name: str
    prepare: Callable[[Path], None]
    # The device type the program's model must end up on, with the runs' environment made by `env`.
    device_type: str = "cpu"
    env: Callable[[dict], dict] = _host

    def __str__(self) -> str:
        return self.name


def _on_fake(vendor: str) -> Callable[[dict], dict]:
    return lambda base: fake_device.environment(vendor, base)


TARGETS = (
    *(Target(name, functools.partial(migrated, target=name)) for name in ("neutral", "torch")),
    Target("dropin", through_dropin),
    # The vendors' own API, run on the stand-in device that computes (tests/fake_device.py).
    *(
        Target(v, functools.partial(migrated, target=v), device_type=v, env=_on_fake(v))
        for v in ("npu", "musa")
    ),
    Target("dropin-npu", through_dropin, device_type="npu", env=_on_fake("npu")),
)


def environment(target: Target) -> dict:
    env = target.env(dict(os.environ))
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", OMP_NUM_THREADS="1")
    return env


def start(script: Path, args: list[str], target: Target, nproc: int | None) -> subprocess.Popen:
    """The program in one plain process (`nproc=None`) or under `torchrun --nproc_per_node NPROC`."""
    launcher = (
        [] if nproc is None else ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]
    )
    # A session of its own, so that a rank stuck at exit is ended with its launcher (killpg below).
    return subprocess.Popen(
        [sys.executable, *launcher, str(script), *args],
        cwd=script.parent,
        env=environment(target),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def finish(process: subprocess.Popen, what: str) -> str:
    """Wait for the run; it must exit 0. Returns everything it printed."""
    try:
        output, _ = process.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        raise AssertionError(f"{what} did not finish in {TIMEOUT_S} s:\n{output[-4000:]}") from None
    assert process.returncode == 0, f"{what} exited {process.returncode}:\n{output[-4000:]}"
    return output


def losses(output: str) -> list[float]:
    return [float(match) for match in _LOSS.findall(output)]


def assert_trains(found: list[float], what: str) -> None:
    """At least three losses printed, all finite, and the last clearly below the first."""
    assert len(found) >= 3, f"{what}: fewer than 3 losses printed: {found}"
    assert all(math.isfinite(value) for value in found), f"{what}: non-finite loss in {found}"
    assert found[-1] < 0.8 * found[0], f"{what}: the loss did not fall: {found}"
