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


def test_the_training_job_reads_as_named_steps():
    # `_train` was one 154-line function; each step of the job is now a function that fits on a screen.
    source = (ROOT / "reference_train" / "train.py").read_text(encoding="utf-8")
    lengths = {
        node.name: node.end_lineno - node.lineno + 1
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef)
    }
    assert {name: length for name, length in lengths.items() if length > 60} == {}


def test_the_migrate_command_reads_as_named_steps():
    # `migrate()` was one 70-line function doing five jobs (option checks, configuration, the walk,
    # the report, the exit status); each is now a named step and the command only sequences them.
    tree = ast.parse((ROOT / "migrate" / "cli.py").read_text(encoding="utf-8"))
    lengths = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            body = node.body[1:] if ast.get_docstring(node) else node.body
            lengths[node.name] = body[-1].end_lineno - body[0].lineno + 1
    assert {name: length for name, length in lengths.items() if length > 30} == {}
