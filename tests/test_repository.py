"""What a reader of the source relies on: the documents it cites are in the repository, and a class name
means one thing within a package."""

from __future__ import annotations

import ast
import collections
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tracked_python_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / name for name in listed.stdout.split()]


def test_every_document_a_source_file_cites_is_in_the_repository():
    missing = []
    for path in _tracked_python_files():
        for cited in set(re.findall(r"\b((?:docs/)?[\w.-]+\.md)\b", path.read_text(encoding="utf-8"))):
            if not ((ROOT / cited).is_file() or (ROOT / "docs" / cited).is_file()):
                missing.append(f"{path.relative_to(ROOT)} cites {cited}")
    assert missing == []


def test_no_two_classes_of_the_trainer_package_share_a_name():
    # compare.Comparison (two loss curves) and locate's per-module report once shared a name.
    where = collections.defaultdict(list)
    for path in sorted((ROOT / "reference_train").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                where[node.name].append(str(path.relative_to(ROOT)))
    assert {name: files for name, files in where.items() if len(files) > 1} == {}


# A function longer than this (its `def` line to its last) says why, in a comment on the line right above it
# (above its decorators): `# over 60 lines: <the reason>`.
LONGEST_FUNCTION = 60
_REASON_FOR_LENGTH = re.compile(r"^\s*# over 60 lines: \S")


def _long_functions_without_a_reason(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []
    for node in ast.walk(ast.parse("\n".join(lines))):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        length = node.end_lineno - node.lineno + 1
        first = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
        above = lines[first - 2] if first > 1 else ""
        if length > LONGEST_FUNCTION and not _REASON_FOR_LENGTH.match(above):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_outside_the_tests_runs_over_60_lines_without_a_reason_above_it():
    # `_train` was one 154-line function; each step of a job is a function that fits on a screen.
    paths = [path for path in _tracked_python_files() if path.relative_to(ROOT).parts[0] != "tests"]
    assert [found for path in paths for found in _long_functions_without_a_reason(path)] == []


def test_a_long_function_passes_with_its_reason_right_above_it_and_only_there(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)

    def function(lines: int) -> str:  # `lines` long, its def line included
        return "def f():\n" + "".join(f"    x{i} = {i}\n" for i in range(lines - 1))

    sources = {
        "at_the_limit.py": function(LONGEST_FUNCTION),
        "over_it.py": function(LONGEST_FUNCTION + 1),
        "reasoned.py": "# over 60 lines: one table, read top to bottom\n@staticmethod\n" + function(LONGEST_FUNCTION + 1),
        "reason_too_far.py": "# over 60 lines: one table\n\n" + function(LONGEST_FUNCTION + 1),
    }
    for name, source in sources.items():
        (tmp_path / name).write_text(source)
    found = {name: _long_functions_without_a_reason(tmp_path / name) for name in sources}
    assert found == {
        "at_the_limit.py": [],
        "over_it.py": ["over_it.py:1 f (61 lines)"],
        "reasoned.py": [],
        "reason_too_far.py": ["reason_too_far.py:3 f (61 lines)"],
    }
