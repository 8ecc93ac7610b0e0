"""How the run-after-migrate suite prepares a program for a target and runs it, in one process or under
torchrun, and reads the losses it prints.

A target is a way to turn a CUDA training program into one that runs here: `portlayer migrate --target T`
(neutral, torch, and the vendors' npu and musa on the stand-in device that computes) or the one-line drop-in. Adding a target is
adding one `Target` to `TARGETS`: its name, how it prepares the copied program, the environment its runs
need and the device type the program must end up on.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from portlayer.cli import cli
from portlayer.train.process_group import ProcessGroup
from tests import accelerator, fake_device
from tests.processes import HUNG_S

PROGRAMS = Path(__file__).resolve().parent / "programs"
# Public training programs, stored as published (each folder's SOURCE.txt names the repository, commit, path
# and license).
PUBLIC = Path(__file__).resolve().parent / "public"
# The stand-in device writes what each process allocated to this file (tests/fake_plugins/fake_vendor/memory_log.py).
MEMORY_LOG_ENV = "FAKE_DEVICE_MEMORY_LOG"

# `loss 0.123`, `loss: 0.123`, `valid loss 2.733`, and the HF Trainer's `{'loss': '2.443', …}`.
_LOSS = re.compile(r"""\bloss['"]?\s*[:=]?\s*['"]?(-?\d+(?:\.\d+)?(?:e-?\d+)?)""")


def migrate(path: Path, target: str) -> str:
    """`portlayer migrate --target TARGET PATH`, through the real command; returns what it printed. With
    `--exit-zero`: sites left for a human (warnings) are what the run prints, not a failure of the port."""
    result = CliRunner().invoke(cli, ["migrate", "--exit-zero", "--target", target, str(path)],
                                catch_exceptions=False)
    assert result.exit_code == 0, f"migrate --target {target} exited {result.exit_code}:\n{result.output}"
    return result.output


def migrated(script: Path, target: str) -> None:
    """Migrate the script's folder (the whole program) in place, then hold the second run to changing
    nothing."""
    folder = script.parent
    migrate(folder, target)
    first = {path: path.read_bytes() for path in folder.rglob("*.py")}
    migrate(folder, target)
    for path, text in first.items():
        assert path.read_bytes() == text, f"a second `migrate --target {target}` changed {path.name}"


def through_dropin(path: Path) -> None:
    """The drop-in's promise: `import torch` → `import portlayer.torch as torch`, and nothing else."""
    source = path.read_text()
    ported = re.sub(r"(?m)^import torch$", "import portlayer.torch as torch", source)
    assert ported.count("import portlayer.torch as torch") == 1, f"{path.name}: no single `import torch` line"
    path.write_text(ported)


def _host(base: dict) -> dict:
    """A host without accelerators (devices hidden on a GPU host, tests/accelerator.py): portlayer selects the cpu."""
    return accelerator.hidden({k: v for k, v in base.items() if not k.startswith(("PORTLAYER_", "FAKE_"))})


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


def _torch_target_on_the_host(base: dict) -> dict:
    """The host, with torch_target_exit/sitecustomize.py: torch's gloo exit race is not the port's."""
    env = _host(base)
    exit_hook = str(Path(__file__).with_name("torch_target_exit"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (exit_hook, env.get("PYTHONPATH"))))
    return env


TARGETS = (
    Target("neutral", functools.partial(migrated, target="neutral")),
    Target("torch", functools.partial(migrated, target="torch"), env=_torch_target_on_the_host),
    Target("dropin", through_dropin),
    # The vendors' own API, run on the stand-in device that computes (tests/fake_device.py).
    *(
        Target(v, functools.partial(migrated, target=v), device_type=v, env=_on_fake(v))
        for v in ("npu", "musa")
    ),
    Target("dropin-npu", through_dropin, device_type="npu", env=_on_fake("npu")),
)


# Public programs read their model, tokenizer and data by hub name (`from_pretrained("bert-base-cased")`); the
# tests build each locally in a folder of that name in the run's directory, which the loaders take first.
# Offline, with the hub's address a closed local port, a name the test did not build fails there and then:
# nothing is ever downloaded (test_no_run_reaches_the_hub).
NO_HUB = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_ENDPOINT": "http://127.0.0.1:9",
}


def environment(target: Target) -> dict:
    env = target.env(dict(os.environ))
    env.update(NO_HUB, OMP_NUM_THREADS="1")
    return env


@dataclass
class Running:
    """A started run: its processes, and where the stand-in device logs what each process allocated (None
    for targets that run on the host cpu)."""

    group: ProcessGroup
    nproc: int | None
    memory_log: Path | None


def start(script: Path, args: list[str], target: Target, nproc: int | None) -> Running:
    """The program in one plain process (`nproc=None`) or under `torchrun --nproc_per_node NPROC`."""
    launcher = (
        [] if nproc is None else ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]
    )
    env, memory_log = environment(target), None
    if target.device_type != "cpu":
        memory_log = script.parent / "device-memory.jsonl"
        memory_log.unlink(missing_ok=True)
        env[MEMORY_LOG_ENV] = str(memory_log)
    # A group of its own, so that a rank stuck at exit is ended with its launcher.
    group = ProcessGroup(
        [sys.executable, *launcher, str(script), *args],
        cwd=script.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return Running(group, nproc, memory_log)


def finish(running: Running, what: str) -> str:
    """Wait for the run; it must exit 0 and, on the stand-in device, must have trained there. Returns
    everything it printed."""
    with running.group as group:
        try:
            output = group.communicate(HUNG_S)
        except subprocess.TimeoutExpired as expired:
            raise AssertionError(f"{what} did not finish in {HUNG_S} s:\n{expired.output[-4000:]}") from None
    status = group.process.returncode
    assert status == 0, f"{what} exited {status}:\n{output[-4000:]}"
    if running.memory_log is not None:
        assert_allocated_on_the_device(device_memory(running), what, running.nproc)
    return output


def device_memory(running: Running) -> dict[str, int]:
    """Peak bytes each training process allocated on the stand-in device, summed over its devices: by
    torchrun rank ("0", "1", …), or "main" for a program run in one process. A process that never loaded
    the stand-in is missing."""
    log = running.memory_log
    lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    if running.nproc is None:
        # Only the program's own process, which leads the session it was started in (ProcessGroup): not the
        # workers of a data loader, say, forked from it, that load the plugin too.
        own = [sum(line["peak_bytes"]) for line in lines if line["pid"] == line["session"]]
        return {"main": own[0]} if own else {}
    # Under torchrun the launcher (no RANK) may load the plugin too; only the ranks train.
    return {line["rank"]: sum(line["peak_bytes"]) for line in lines if line["rank"] is not None}


def assert_allocated_on_the_device(peaks: dict[str, int], what: str, nproc: int | None = None) -> None:
    """Every training process allocated device memory: a port that fell back to the cpu fails here,
    whatever its exit code and however its loss fell."""
    expected = ["main"] if nproc is None else [str(rank) for rank in range(nproc)]
    for process in expected:
        who = "the program" if process == "main" else f"rank {process}"
        assert process in peaks, (
            f"{what}: {who} never loaded the stand-in"
            f" device: it trained on the host cpu, not on the device it was ported to"
        )
        assert peaks[process] > 0, (
            f"{what}: {who} loaded the stand-in device"
            f" but allocated 0 bytes on it: it trained on the host cpu, not on the device it was ported to"
        )


def losses(output: str) -> list[float]:
    return [float(match) for match in _LOSS.findall(output)]


def assert_trains(found: list[float], what: str) -> None:
    """At least three losses printed, all finite, and the last clearly below the first."""
    assert len(found) >= 3, f"{what}: fewer than 3 losses printed: {found}"
    assert all(math.isfinite(value) for value in found), f"{what}: non-finite loss in {found}"
    assert found[-1] < 0.8 * found[0], f"{what}: the loss did not fall: {found}"
