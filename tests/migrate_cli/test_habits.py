"""The habits users bring from ruff and black: --check naming files, -q, pyproject config, stdin,
.gitignore, shebang scripts, output formats, pre-commit, shell completion, the progress bar."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from portlayer.cli import cli
from portlayer.findings import Finding, github_line
from portlayer.migrate.progress import FileProgress
from portlayer.migrate.walk import shebang_kind
from tests.migrate_cli.helpers import CUDA_SOURCE, PLAIN_SOURCE, snapshot, write_tree
from tests.processes import HUNG_S

REPO = Path(__file__).resolve().parents[2]
SMI_SCRIPT = "#!/bin/bash\nnvidia-smi\n"


def run_in(directory: Path, *args: str, stdin: bytes | None = None):
    """`portlayer migrate ARGS…` with `directory` as the working directory (config is found from it)."""
    old = Path.cwd()
    os.chdir(directory)
    try:
        return CliRunner().invoke(cli, ["migrate", *args], input=stdin, catch_exceptions=False)
    finally:
        os.chdir(old)


# -- --check, -q -------------------------------------------------------------------------------------


def test_check_names_each_file_that_would_change_and_ends_with_the_summary(tmp_path):
    write_tree(tmp_path, {"a.py": CUDA_SOURCE, "b.py": PLAIN_SOURCE, "sub/c.py": CUDA_SOURCE})

    result = run_in(tmp_path, "--check", ".")

    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines[:-1] == ["would change a.py", "would change sub/c.py"]
    assert lines[-1].startswith("3 files scanned, 2 would change, 0 failed;")


def test_quiet_still_names_errors_on_stderr(tmp_path, migrate):
    result = migrate("-q", tmp_path / "missing.py")

    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == f"portlayer: error: {tmp_path / 'missing.py'}: no such file or directory\n"


# -- [tool.portlayer] --------------------------------------------------------------------------------

PYPROJECT = """\
[project]
name = "demo"

[tool.portlayer]
target = "npu"
exclude = ["legacy"]
extend-exclude = ["*_gen.py"]

[tool.portlayer.per-file-ignores]
"src/scripts/*" = ["PL6"]
"""


def test_pyproject_table_is_found_from_the_paths_upward_and_flags_win(tmp_path):
    write_tree(tmp_path, {
        "pyproject.toml": PYPROJECT,
        "src/train.py": CUDA_SOURCE,
        "src/legacy/old.py": CUDA_SOURCE,
        "src/model_gen.py": CUDA_SOURCE,
        "src/scripts/run.sh": SMI_SCRIPT,
        "src/run.sh": SMI_SCRIPT,
    })
    inner = tmp_path / "src"

    configured = run_in(inner, "--diff", ".")
    # target = "npu": torch.cuda.synchronize() becomes torch.npu.synchronize() (docs/migrate.md's table).
    assert "+    torch.npu.synchronize()" in configured.stdout
    assert "legacy/old.py" not in configured.stdout and "model_gen.py" not in configured.stdout
    # per-file-ignores drops PL6xx under src/scripts/ (globs are relative to the pyproject.toml) only.
    assert "run.sh:2:1: PL603" in configured.stderr
    assert "scripts/run.sh" not in configured.stderr

    flagged = run_in(inner, "--diff", "--target", "neutral", "--exclude", "nothing", ".")
    assert "+    portlayer.synchronize()" in flagged.stdout
    assert "b/legacy/old.py" in flagged.stdout  # --exclude replaced exclude ...
    assert "model_gen.py" not in flagged.stdout  # ... and extend-exclude still applies


@pytest.mark.parametrize(
    "table, message",
    [
        ('target = "cuda"', "target = 'cuda'; expected one of"),
        ('excludes = ["x"]', "unknown key 'excludes' in [tool.portlayer]"),
        ('per-file-ignores = {"*" = ["E501"]}', "must be a list of codes like"),
        ("respect-gitignore = 1", "respect-gitignore must be true or false"),
        ("target = ", "not valid TOML"),
    ],
)
def test_a_bad_pyproject_table_is_one_line_and_exit_2(tmp_path, table, message):
    write_tree(tmp_path, {"pyproject.toml": f"[tool.portlayer]\n{table}\n", "train.py": CUDA_SOURCE})
    before = snapshot(tmp_path)

    result = run_in(tmp_path, "train.py")

    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and message in result.stderr and "pyproject.toml" in result.stderr
    assert snapshot(tmp_path) == before


# -- stdin ---------------------------------------------------------------------------------------------


def test_stdin_gives_the_code_a_file_would_get_on_stdout(tmp_path):
    write_tree(tmp_path, {"train.py": CUDA_SOURCE})
    run_in(tmp_path, "-q", "train.py")
    migrated_file = (tmp_path / "train.py").read_bytes()

    result = run_in(tmp_path, "-", stdin=CUDA_SOURCE.encode())

    assert result.exit_code == 0
    assert result.stdout_bytes == migrated_file != CUDA_SOURCE.encode()
    assert result.stderr.splitlines()[-1].startswith("1 file scanned, 1 changed, 0 failed;")


def test_stdin_echoes_code_with_nothing_to_change_and_check_prints_no_code(tmp_path):
    echoed = run_in(tmp_path, "-q", "-", stdin=PLAIN_SOURCE.encode())
    checked = run_in(tmp_path, "-q", "--check", "-", stdin=CUDA_SOURCE.encode())

    assert (echoed.exit_code, echoed.stdout) == (0, PLAIN_SOURCE)
    assert (checked.exit_code, checked.stdout) == (1, "")


def test_stdin_filename_names_the_code_and_chooses_its_kind(tmp_path):
    result = run_in(tmp_path, "--stdin-filename", "tools/launch", "-", stdin=SMI_SCRIPT.encode())

    assert result.exit_code == 0
    assert result.stdout == SMI_SCRIPT  # a shell script: nvidia-smi is reported, not rewritten
    assert "tools/launch:2:1: PL603 nvidia-smi only sees NVIDIA GPUs" in result.stderr


def test_stdin_that_does_not_parse_prints_no_code_and_exits_2(tmp_path):
    result = run_in(tmp_path, "-", stdin=b"import torch\ntorch.cuda.synchronize(\n")

    assert result.exit_code == 2
    assert result.stdout == ""
    assert "-:" in result.stderr and "PL901" in result.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["-", "train.py"], "`-` (stdin) cannot be combined with other paths"),
        (["--stdin-filename", "x.py", "train.py"], "--stdin-filename needs `-` as the path"),
        (["--diff", "--output-format", "json", "."], "cannot be combined with --output-format json"),
    ],
)
def test_stdin_and_format_misuse_is_one_line_and_exit_2(tmp_path, args, message):
    write_tree(tmp_path, {"train.py": CUDA_SOURCE})

    result = run_in(tmp_path, *args, stdin=b"")

    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and message in result.stderr


# -- .gitignore ------------------------------------------------------------------------------------


def test_directory_walks_respect_gitignore_files_up_to_the_repository_top(tmp_path):
    (tmp_path / ".git").mkdir()
    write_tree(tmp_path, {
        ".gitignore": "generated/\n*_old.py\n",
        "src/.gitignore": "!keep_old.py\n",
        "src/train.py": CUDA_SOURCE,
        "src/train_old.py": CUDA_SOURCE,
        "src/keep_old.py": CUDA_SOURCE,
        "src/generated/model.py": CUDA_SOURCE,
    })

    respected = run_in(tmp_path / "src", "--check", ".")
    ignoring_none = run_in(tmp_path / "src", "--check", "--no-respect-gitignore", ".")
    named = run_in(tmp_path / "src", "--check", "generated")  # an ignored folder named is walked (ripgrep, ruff)

    assert respected.stderr.splitlines()[:-1] == ["would change keep_old.py", "would change train.py"]
    assert ignoring_none.stderr.splitlines()[:-1] == [  # a folder's files, then its subfolders
        "would change keep_old.py",
        "would change train.py",
        "would change train_old.py",
        "would change generated/model.py",
    ]
    assert named.stderr.splitlines()[:-1] == ["would change generated/model.py"]


def test_respect_gitignore_can_be_turned_off_in_pyproject(tmp_path):
    write_tree(tmp_path, {
        "pyproject.toml": "[tool.portlayer]\nrespect-gitignore = false\n",
        ".gitignore": "*.py\n",
        "train.py": CUDA_SOURCE,
    })

    assert run_in(tmp_path, "--check", ".").stderr.startswith("would change train.py\n")
    assert run_in(tmp_path, "--check", "--respect-gitignore", ".").stderr.startswith("portlayer: error: .: no Python")


# -- shebang scripts ---------------------------------------------------------------------------------


def test_extensionless_scripts_are_recognised_by_their_shebang_in_a_walk_and_when_named(tmp_path):
    write_tree(tmp_path, {
        "bin/train": "#!/usr/bin/env python3\n" + CUDA_SOURCE,
        "bin/launch": SMI_SCRIPT,
        "bin/launch_env": "#!/usr/bin/env bash\nnvidia-smi\n",
        "bin/README": "nvidia-smi and torch.cuda, in prose\n",
        "bin/tool": "#!/usr/bin/perl\nprint 'cuda';\n",
    })

    walked = run_in(tmp_path, "--check", "bin")
    named = run_in(tmp_path, "--check", "bin/launch")

    assert walked.stderr.splitlines()[:-1] == ["would change bin/train"]
    assert walked.stdout.count("PL603") == 2  # both shell scripts, read as shell
    assert "3 files scanned" in walked.stderr  # not README, not the perl script
    assert named.exit_code == 0
    assert named.stdout.startswith("bin/launch:2:1: PL603 nvidia-smi only sees NVIDIA GPUs")
    assert "PL901" not in named.stdout


# -- output formats ----------------------------------------------------------------------------------


def _formatted(tmp_path, fmt):
    write_tree(tmp_path, {"train.py": CUDA_SOURCE, "run.sh": SMI_SCRIPT})
    return run_in(tmp_path, "--check", "--output-format", fmt, ".")


def test_json_lists_changes_and_diagnostics_with_their_places(tmp_path):
    result = _formatted(tmp_path, "json")

    rows = json.loads(result.stdout)
    assert result.exit_code == 1
    assert {(r["path"], r["line"], r["col"], r["code"], r["severity"]) for r in rows} == {
        ("run.sh", 2, 1, "PL603", "warning"),
        ("train.py", 5, 5, "PL102", "change"),
        ("train.py", 5, 5, "PL110", "change"),
    }
    assert all(set(r) == {"path", "line", "col", "code", "severity", "message", "hint", "title"} for r in rows)


def test_csv_has_the_columns_of_ascend_transplant_reports(tmp_path):
    result = _formatted(tmp_path, "csv")

    rows = list(csv.reader(io.StringIO(result.stdout)))
    # msFmkTransplt's change_list.csv header, then ours.
    assert rows[0][:5] == ["File", "Start Line", "End Line", "Operation Type", "Message"]
    assert rows[0][5:] == ["Code", "Severity", "Column", "Hint"]
    smi = next(row for row in rows if row[5] == "PL603")
    assert smi[:3] == ["run.sh", "2", "2"] and smi[4] == "nvidia-smi only sees NVIDIA GPUs"
    assert len(rows) == 4


def test_sarif_is_a_valid_2_1_0_log(tmp_path):
    log = json.loads(_formatted(tmp_path, "sarif").stdout)

    # The properties SARIF 2.1.0 (OASIS, sections 3.13, 3.14, 3.18, 3.19, 3.27, 3.28) requires or constrains.
    assert log["version"] == "2.1.0" and log["$schema"].endswith("sarif-2.1.0.json")
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "portlayer migrate"
    rule_ids = [rule["id"] for rule in driver["rules"]]
    assert rule_ids == sorted(set(rule_ids)) == ["PL102", "PL110", "PL603"]
    for result in run["results"]:
        assert result["level"] in ("none", "note", "warning", "error")
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["message"]["text"]
        (location,) = result["locations"]
        region = location["physicalLocation"]["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
    levels = {r["ruleId"]: r["level"] for r in run["results"]}
    assert levels == {"PL603": "warning", "PL102": "note", "PL110": "note"}


def test_github_format_is_one_workflow_command_per_finding(tmp_path):
    lines = _formatted(tmp_path, "github").stdout.splitlines()

    assert lines[0].startswith("::warning file=run.sh,line=2,col=1,title=PL603::nvidia-smi only sees NVIDIA GPUs")
    assert lines[1].startswith("::notice file=train.py,line=5,col=5,title=PL102::torch.cuda.synchronize -> ")
    assert len(lines) == 3


def test_github_escapes_what_workflow_commands_reserve():
    # GitHub's toolkit (command.ts): data escapes % CR LF; properties also , and :.
    finding = Finding("a,b:c.py", 3, 4, "PL605", "error", "50%\ndone")

    assert github_line(finding) == "::error file=a%2Cb%3Ac.py,line=3,col=4,title=PL605::50%25%0Adone"


# -- pre-commit, completion, progress --------------------------------------------------------------


def test_pre_commit_hook_runs_migrate_check_on_python_and_shell_files():
    (hook,) = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())

    assert hook["id"] == "portlayer-migrate"
    assert hook["entry"] == "portlayer migrate --check"
    assert hook["language"] == "python"
    assert set(hook["types_or"]) == {"python", "shell"}


@pytest.mark.parametrize("shell, marker", [("bash", "complete -o nosort -F"), ("zsh", "compdef"), ("fish", "complete")])
def test_shell_completion_script_comes_from_the_documented_variable(shell, marker):
    script = subprocess.run(
        [sys.executable, "-c", "from portlayer.cli import main; main()"],
        env={**os.environ, "_PORTLAYER_COMPLETE": f"{shell}_source"},
        capture_output=True, text=True, timeout=HUNG_S,
    )

    assert script.returncode == 0
    assert marker in script.stdout and "_PORTLAYER_COMPLETE" in script.stdout


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_only_on_a_terminal_and_only_for_large_runs():
    terminal, pipe, small = _Terminal(), io.StringIO(), _Terminal()
    for stream, total in ((terminal, 300), (pipe, 300), (small, 10)):
        progress = FileProgress(total, stream)
        for _ in range(total):
            progress.advance()
        progress.close()

    assert "/300" in terminal.getvalue() and "file" in terminal.getvalue()
    assert pipe.getvalue() == small.getvalue() == ""


@pytest.mark.parametrize(
    "first_line, kind",
    [
        (b"#!/usr/bin/python3.11\n", "python"),
        (b"#! /usr/bin/env python\n", "python"),
        (b"#!/usr/bin/env -S python3 -u\n", "python"),
        (b"#!/usr/bin/env pypy3\n", "python"),
        (b"#!/bin/sh -e\n", "shell"),
        (b"#!/usr/bin/env bash\n", "shell"),
        (b"#!/bin/zsh\n", "shell"),
        (b"#!/usr/bin/perl\n", None),
        (b"#!/usr/bin/env node\n", None),
        (b"import torch\n", None),
    ],
)
def test_shebang_kinds(first_line, kind):
    assert shebang_kind(first_line) == kind
