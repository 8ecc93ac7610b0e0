"""`make test-compat`: the runtime, drop-in, migrate-output, trainer and parity tests on other torch releases,
and a 2-rank cpu parity run of each tiny preset held to its committed baseline.

    python tools/compat.py VERSION [VERSION ...]      # e.g. 2.6.0 2.7.1 2.15.0

Each release gets a virtual environment of its own, `.venv-torch<VERSION>` beside the checkout (kept, so a
second run only tests): the project's pinned dependencies (constraints.txt, with `LIBRARIES_FOR_TORCH`'s
changes for that release) without their own dependencies, that torch, DeepSpeed built against it, and
portlayer in editable mode. The release's pins go to pip as its constraint file (PIP_CONSTRAINT), which takes
the place of a machine-wide one that caps torch. PyPI's torch wheels for Linux are CUDA builds; most import on
a host without CUDA as they are, and those that need their CUDA libraries to import get them installed too,
several GB. A folder of downloaded wheels can be named with PIP_FIND_LINKS.

Per release it prints pytest's summary, each preset's parity figure (`portlayer parity compare --json`: the
largest relative loss error over the baseline's steps, at rtol 1e-5), the time taken, and a row for the
README's "Tested torch releases" table. Not part of `make test`: each release costs a download and a test run
of several minutes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The runtime (selection, binding, stand-ins, DDP on gloo, the stand-in device), the drop-in, migrate's
# output trained under torchrun, the trainer's runs and its strategies, parity's comparisons, and an
# install of portlayer beside a torch pip must leave alone.
TESTS = ("tests/runtime", "tests/dropin", "tests/stand_in/test_runtime_on_the_device.py",
         "tests/migrate_cli/test_migrated_training.py", "tests/trainer", "tests/parity",
         "tests/test_install_beside_torch.py")  # fmt: skip
# Run by `parity` below instead, which also reports the figure.
PARITY_TEST = "tests/trainer/test_parity_runs.py::test_two_process_run_matches_the_committed_baseline"
# The libraries that call into torch, whose releases are recorded per torch (the README table).
STACK = ("torch", "transformers", "accelerate", "deepspeed")
# torch release -> pins that replace constraints.txt's for it. constraints.txt's transformers 5.23 declares
# torch>=2.6, its accelerate 1.15 and DeepSpeed 0.19.8 torch>=2.0: they serve every tested release.
LIBRARIES_FOR_TORCH: dict[str, dict[str, str]] = {
    "2.6.0": {"sympy": "1.13.1"},  # torch 2.6.0 requires exactly this sympy
}
RTOL = 1e-5
# DeepSpeed ships as a source archive; built against the release's torch, with no compiled ops (Makefile).
SOURCE_BUILT = ("deepspeed",)


def run(*command: str | Path, env: dict | None = None) -> None:
    subprocess.run([str(part) for part in command], cwd=REPO, check=True, env=env)


def pins(version: str) -> dict[str, str]:
    """distribution name -> the release pinned for torch `version`."""
    pinned = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        requirement, _, marker = line.partition(";")
        name, _, release = requirement.strip().partition("==")
        if release and not marker:  # tomli's line is for Python 3.10 only
            pinned[name] = release
    pinned.update(LIBRARIES_FOR_TORCH.get(version, {}), torch=version)
    return pinned


def environment(version: str) -> Path:
    """The release's virtual environment, made on first use; returns its python."""
    venv = REPO / f".venv-torch{version}"
    python = venv / "bin" / "python"
    stamp = venv / ".portlayer-installed"
    if stamp.exists():
        return python
    run(sys.executable, "-m", "venv", venv)  # an interrupted one is completed: pip skips what it holds
    pinned = pins(version)
    constraints = venv / "pins.txt"
    constraints.write_text("".join(f"{name}=={release}\n" for name, release in pinned.items()))
    env = {**os.environ, "PIP_CONSTRAINT": str(constraints), "DS_BUILD_OPS": "0"}
    pip = (python, "-m", "pip", "install", "-q", "--disable-pip-version-check")
    wheels = [f"{name}=={release}" for name, release in pinned.items() if name not in SOURCE_BUILT]
    run(*pip, "--no-deps", *wheels, env=env)
    if subprocess.run([python, "-c", "import torch"], capture_output=True).returncode != 0:
        run(*pip, f"torch=={version}", env=env)  # a build that needs its CUDA libraries even to import
    # The builds below run in the environment: setuptools new enough for pyproject's license expression.
    run(*pip, "setuptools>=77", env=env)
    sources = [f"{name}=={pinned[name]}" for name in SOURCE_BUILT]
    run(*pip, "--no-deps", "--no-build-isolation", *sources, env=env)
    run(*pip, "--no-deps", "--no-build-isolation", "-e", ".", env=env)
    stamp.touch()
    return python


def installed(python: Path) -> dict[str, str]:
    code = "import json, sys; from importlib import metadata; print(json.dumps({n: metadata.version(n) for n in sys.argv[1:]}))"
    result = subprocess.run([python, "-c", code, *STACK], capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def pytest_summary(python: Path) -> tuple[int, str]:
    result = subprocess.run(
        [python, "-m", "pytest", "-q", "-n", "2", "-p", "no:randomly", "-p", "no:cacheprovider", *TESTS,
         "--deselect", PARITY_TEST],
        cwd=REPO, text=True, capture_output=True,
    )  # fmt: skip
    print(result.stdout[-6000:], end="")
    lines = result.stdout.strip().splitlines()
    return result.returncode, (lines[-1] if lines else result.stderr.strip()[-300:]).strip("= ")


def parity(python: Path, preset: str, folder: Path) -> tuple[int, str]:
    """A 2-rank cpu run of `preset` over its baseline's steps, compared with the baseline at RTOL."""
    baseline = REPO / "reference_train" / "baselines" / f"{preset}.cpu-cpu.json"
    steps = len(json.loads(baseline.read_text())["steps"])
    out = folder / f"{preset}.json"
    portlayer = (python, "-m", "portlayer")
    trained = subprocess.run(
        [*portlayer, "parity", "run", "--preset", preset, "--nproc", "2", "--steps", str(steps), "--out", out,
         "--quiet"], cwd=REPO, text=True, capture_output=True,
    )  # fmt: skip
    if trained.returncode != 0:
        return trained.returncode, f"parity run failed: {(trained.stdout + trained.stderr).strip()[-300:]}"
    compared = subprocess.run(
        [*portlayer, "parity", "compare", baseline, out, "--rtol", str(RTOL), "--json"],
        cwd=REPO, text=True, capture_output=True,
    )  # fmt: skip
    if compared.returncode not in (0, 1):
        return compared.returncode, compared.stderr.strip()[-300:]
    worst = json.loads(compared.stdout)["max_rel_error"]  # null for a NaN loss
    return compared.returncode, "NaN" if worst is None else f"{worst:.1e}"


def presets() -> list[str]:
    return sorted(path.name.removesuffix(".cpu-cpu.json") for path in (REPO / "reference_train" / "baselines").glob("*.cpu-cpu.json"))


def release(version: str) -> tuple[int, str]:
    """Tests and parity on torch `version`; returns the worst exit status and the README table's row."""
    started = time.monotonic()
    python = environment(version)
    status, summary = pytest_summary(python)
    figures = []
    with tempfile.TemporaryDirectory(prefix=f"compat-{version}-") as folder:
        for preset in presets():
            code, figure = parity(python, preset, Path(folder))
            status = max(status, code)
            figures.append(f"{preset} {figure}")
    minutes = (time.monotonic() - started) / 60
    stack = installed(python)
    libraries = ", ".join(f"{name} {stack[name]}" for name in STACK[1:])
    return status, f"| {stack['torch']} | {libraries} | {summary} | {'; '.join(figures)} | {minutes:.0f} min |"


def main(versions: list[str]) -> int:
    if not versions:
        print("portlayer: error: name the torch releases to test, e.g. 2.6.0 2.15.0", file=sys.stderr)
        return 2
    if bad := [v for v in versions if not re.fullmatch(r"\d+\.\d+\.\d+", v)]:
        print(f"portlayer: error: not a torch release: {bad[0]} (write it as 2.7.1)", file=sys.stderr)
        return 2
    rows = {}
    for version in versions:
        rows[version] = release(version)
        print(f"torch {version}: {rows[version][1]}", flush=True)
    print("\n| torch | libraries | tests | parity (max relative error, rtol 1e-5) | time |")
    print("| --- | --- | --- | --- | --- |")
    for _, row in rows.values():
        print(row)
    return max(code for code, _ in rows.values())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
