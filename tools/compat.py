"""`make test-compat`: the runtime, drop-in and migrate-output tests on other torch releases.

    python tools/compat.py VERSION [VERSION ...]      # e.g. 2.13.0 2.14.1

Each release gets a virtual environment of its own, `.venv-torch<VERSION>` beside the checkout (kept, so a
second run only tests): the project's pinned dependencies (constraints.txt) without their own dependencies,
that torch, and portlayer in editable mode. PyPI's torch wheels for Linux are CUDA builds; most import on a
host without CUDA as they are, and those that need their CUDA libraries to import (2.1) get them installed
too, several GB. Then the same test files run on each, and the last line per release is pytest's summary.
Not part of `make test`: each release costs a download and a test run of several minutes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The runtime (selection, binding, fallbacks, DDP on gloo, the stand-in device), the drop-in, and
# migrate's output trained under torchrun.
TESTS = ("tests/runtime", "tests/dropin", "tests/stand_in/test_runtime_on_the_device.py",
         "tests/migrate_cli/test_migrated_training.py")  # fmt: skip


def run(*command: str | Path, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([str(part) for part in command], cwd=REPO, check=check, text=True, capture_output=not check)


def environment(version: str) -> Path:
    """The release's virtual environment, made on first use; returns its python."""
    venv = REPO / f".venv-torch{version}"
    python = venv / "bin" / "python"
    stamp = venv / ".portlayer-installed"
    if stamp.exists():
        return python
    run(sys.executable, "-m", "venv", venv)
    pins = venv / "pins.txt"
    pins.write_text(
        "".join(line + "\n" for line in (REPO / "constraints.txt").read_text().splitlines()
                if not line.lower().startswith("torch=="))
    )  # fmt: skip
    pip = (python, "-m", "pip", "install", "-q", "--disable-pip-version-check")
    run(*pip, "--no-deps", "-r", pins, f"torch=={version}")
    if run(python, "-c", "import torch", check=False).returncode != 0:
        run(*pip, f"torch=={version}")  # a build that needs its CUDA libraries even to import
    run(*pip, "--no-deps", "-e", ".")
    stamp.touch()
    return python


def main(versions: list[str]) -> int:
    if not versions:
        print("portlayer: error: name the torch releases to test, e.g. 2.13.0 2.14.1", file=sys.stderr)
        return 2
    summaries = {}
    for version in versions:
        python = environment(version)
        result = subprocess.run(
            [python, "-m", "pytest", "-q", "-n", "2", "-p", "no:randomly", "-p", "no:cacheprovider", *TESTS],
            cwd=REPO, text=True, capture_output=True,
        )  # fmt: skip
        print(result.stdout[-6000:], end="")
        lines = result.stdout.strip().splitlines()
        summaries[version] = (result.returncode, lines[-1] if lines else result.stderr.strip()[-300:])
    print()
    for version, (_, summary) in summaries.items():
        print(f"torch {version}: {summary.strip('= ')}")
    return max(code for code, _ in summaries.values())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
