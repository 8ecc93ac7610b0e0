"""requires-python is the true floor: the sources need nothing newer (grammar and standard library), and
ruff checks them for that version."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

from tests.processes import HUNG_S

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("portlayer", "migrate", "reference_train")


def floor() -> tuple[int, int]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    match = re.fullmatch(r">=\s*3\.(\d+)", project["project"]["requires-python"])
    assert match, "requires-python should be a plain lower bound"
    return 3, int(match.group(1))


def sources() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (REPO / package).rglob("*.py"))


def test_ruff_targets_the_floor():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    major, minor = floor()
    assert project["tool"]["ruff"]["target-version"] == f"py{major}{minor}"


def test_every_source_parses_with_the_floor_grammar():
    failures = []
    for path in sources():
        try:
            ast.parse(path.read_text(encoding="utf-8"), str(path), feature_version=floor())
        except SyntaxError as exc:
            failures.append(f"{path.relative_to(REPO)}:{exc.lineno}: {exc.msg}")
    assert failures == []


def test_no_source_needs_a_newer_python_than_the_floor():
    # vermin knows when each standard-library name, argument and syntax appeared (bisect's key= in 3.10).
    major, minor = floor()
    run = subprocess.run(
        [sys.executable, "-c", "import sys; from vermin.main import main; sys.exit(main())", "--no-tips", "--violations", f"--target={major}.{minor}-",
         *(str(REPO / package) for package in PACKAGES)],
        capture_output=True, text=True, timeout=HUNG_S,
    )
    assert run.returncode == 0, run.stdout + run.stderr
