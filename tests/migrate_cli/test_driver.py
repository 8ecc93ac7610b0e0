"""`portlayer migrate` as a command: what it writes, prints and exits with."""

from __future__ import annotations

import gc
import json
import os
import re
import stat
import subprocess
from pathlib import Path

import pytest

from portlayer.migrate import job, parallel
from tests.migrate_cli.helpers import CUDA_SOURCE, PLAIN_SOURCE, snapshot, write_tree

SYNCHRONIZED = "portlayer.synchronize()"


# --- writing in place -----------------------------------------------------------------------------


def test_writes_in_place_and_leaves_plain_files_byte_identical(tmp_path, migrate):
    write_tree(tmp_path, {"train.py": CUDA_SOURCE, "model.py": PLAIN_SOURCE})
    plain_mtime = os.stat(tmp_path / "model.py").st_mtime_ns

    run = migrate(tmp_path)

    assert run.exit_code == 0, run.stderr
    assert SYNCHRONIZED in (tmp_path / "train.py").read_text()
    assert "torch.cuda" not in (tmp_path / "train.py").read_text()
    assert (tmp_path / "model.py").read_text() == PLAIN_SOURCE
    assert os.stat(tmp_path / "model.py").st_mtime_ns == plain_mtime
    assert "2 files scanned, 1 changed, 0 failed" in run.stderr
    assert list(tmp_path.glob(".*")) == []  # no temporary file left behind


def test_keeps_utf8_bom(tmp_path, migrate):
    path = tmp_path / "bom.py"
    path.write_bytes(b"\xef\xbb\xbf# \xc3\xa9t\xc3\xa9\n" + CUDA_SOURCE.encode())

    assert migrate(path).exit_code == 0

    data = path.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf# \xc3\xa9t\xc3\xa9\n")
    assert data.count(b"\xef\xbb\xbf") == 1
    assert SYNCHRONIZED.encode() in data


def test_keeps_a_latin1_coding_cookie_and_its_bytes(tmp_path, migrate):
    path = tmp_path / "latin.py"
    head = "# -*- coding: latin-1 -*-\n# caf\xe9 au lait\n".encode("latin-1")
    path.write_bytes(head + CUDA_SOURCE.encode())

    assert migrate(path).exit_code == 0

    data = path.read_bytes()
    assert data.startswith(head)  # é stays the single byte 0xE9
    assert data.decode("latin-1").endswith(f"    {SYNCHRONIZED}\n")


def test_keeps_crlf_line_endings_also_on_added_lines(tmp_path, migrate):
    path = tmp_path / "windows.py"
    path.write_bytes(CUDA_SOURCE.replace("\n", "\r\n").encode())

    assert migrate(path).exit_code == 0

    data = path.read_bytes()
    assert SYNCHRONIZED.encode() in data
    assert b"import portlayer\r\n" in data
    assert data.count(b"\n") == data.count(b"\r\n")


def test_keeps_file_mode(tmp_path, migrate):
    path = tmp_path / "run.py"
    path.write_text("#!/usr/bin/env python\n" + CUDA_SOURCE)
    path.chmod(0o751)

    assert migrate(path).exit_code == 0

    assert stat.S_IMODE(path.stat().st_mode) == 0o751
    assert SYNCHRONIZED in path.read_text()


def test_writes_through_a_symbolic_link(tmp_path, migrate):
    real = write_tree(tmp_path, {"real/train.py": CUDA_SOURCE}) / "real" / "train.py"
    link = tmp_path / "link.py"
    link.symlink_to(real)

    assert migrate(link).exit_code == 0

    assert link.is_symlink()
    assert SYNCHRONIZED in real.read_text()


# --- --diff and --check ---------------------------------------------------------------------------


def test_diff_prints_a_unified_diff_and_writes_nothing(tmp_path, migrate, monkeypatch):
    write_tree(tmp_path, {"pkg/train.py": CUDA_SOURCE, "pkg/model.py": PLAIN_SOURCE})
    before = snapshot(tmp_path)
    monkeypatch.chdir(tmp_path)

    run = migrate("pkg", "--diff")

    assert run.exit_code == 0
    assert snapshot(tmp_path) == before
    assert run.stdout.startswith("--- a/pkg/train.py\n+++ b/pkg/train.py\n@@ ")
    assert "-    torch.cuda.synchronize()\n" in run.stdout
    assert f"+    {SYNCHRONIZED}\n" in run.stdout
    assert "model.py" not in run.stdout
    assert "1 would change" in run.stderr


def test_diff_marks_a_last_line_without_newline(tmp_path, migrate):
    path = tmp_path / "train.py"
    path.write_text(CUDA_SOURCE.rstrip("\n"))

    run = migrate(path, "--diff")

    assert f"+    {SYNCHRONIZED}\n\\ No newline at end of file\n" in run.stdout


def test_check_exits_1_when_a_file_would_change_and_writes_nothing(tmp_path, migrate):
    write_tree(tmp_path, {"train.py": CUDA_SOURCE})
    before = snapshot(tmp_path)

    run = migrate(tmp_path, "--check")

    assert run.exit_code == 1
    assert snapshot(tmp_path) == before
    assert "1 would change" in run.stderr


def test_diff_keeps_diagnostics_off_stdout_so_the_patch_applies(tmp_path, migrate, monkeypatch):
    write_tree(tmp_path, {"train.py": "import apex\n" + CUDA_SOURCE})
    monkeypatch.chdir(tmp_path)

    run = migrate("train.py", "--diff")

    assert run.exit_code == 1  # PL201, a warning, remains
    assert "train.py:1:8: PL201" in run.stderr
    assert "PL201" not in run.stdout and "hint:" not in run.stdout
    assert run.stdout.startswith("--- a/train.py\n+++ b/train.py\n@@ ")
    assert all(line[:1] in " +-@\\" for line in run.stdout.splitlines())
    patched = subprocess.run(["patch", "-p1", "--dry-run"], input=run.stdout, text=True, capture_output=True)
    assert patched.returncode == 0, patched.stdout + patched.stderr


def test_check_with_diff_prints_the_patch_exits_1_and_writes_nothing(tmp_path, migrate, monkeypatch):
    write_tree(tmp_path, {"train.py": CUDA_SOURCE, "model.py": PLAIN_SOURCE})
    before = snapshot(tmp_path)
    monkeypatch.chdir(tmp_path)

    run = migrate(".", "--check", "--diff")

    assert run.exit_code == 1
    assert snapshot(tmp_path) == before
    assert run.stdout.startswith("--- a/train.py\n+++ b/train.py\n@@ ")
    assert f"+    {SYNCHRONIZED}\n" in run.stdout
    assert "1 would change" in run.stderr


def test_check_with_diff_on_a_migrated_tree_prints_nothing_and_exits_0(tmp_path, migrate):
    write_tree(tmp_path, {"model.py": PLAIN_SOURCE})

    run = migrate(tmp_path, "--check", "--diff")

    assert (run.exit_code, run.stdout) == (0, "")


def test_check_exits_0_when_nothing_would_change(tmp_path, migrate):
    write_tree(tmp_path, {"model.py": PLAIN_SOURCE})

    assert migrate(tmp_path, "--check").exit_code == 0


# --- the exit status while sites are left for a human (ruff's: 1 while violations remain) ---------

# Converted, and a site left: flash_attn (PL202, a warning); or a cudnn flag left (PL302, info).
LEFT_FOR_A_HUMAN = CUDA_SOURCE + "import flash_attn\n"
INFO_ONLY = CUDA_SOURCE + "torch.backends.cudnn.benchmark = True\n"


def test_a_rewrite_that_leaves_a_warning_exits_1_and_still_writes(tmp_path, migrate):
    write_tree(tmp_path, {"train.py": LEFT_FOR_A_HUMAN})

    run = migrate(tmp_path)

    assert run.exit_code == 1
    assert SYNCHRONIZED in (tmp_path / "train.py").read_text()
    assert "train.py:6:8: PL202" in run.stdout
    assert "1 changed, 0 failed; 2 changes; 0 errors, 1 warning, 0 info" in run.stderr


def test_exit_zero_opts_out_of_the_findings_but_not_out_of_check(tmp_path, migrate):
    write_tree(tmp_path, {"train.py": LEFT_FOR_A_HUMAN})

    assert migrate(tmp_path, "--check", "--exit-zero").exit_code == 1  # a file would change
    assert migrate(tmp_path, "--exit-zero").exit_code == 0
    # Migrated: nothing would change any more, and the warning remains.
    assert migrate(tmp_path, "--check").exit_code == 1
    assert migrate(tmp_path, "--check", "--exit-zero").exit_code == 0


def test_info_findings_do_not_set_the_exit_status(tmp_path, migrate):
    write_tree(tmp_path, {"train.py": INFO_ONLY})

    run = migrate(tmp_path)

    assert run.exit_code == 0
    assert "0 errors, 0 warnings, 1 info" in run.stderr


def test_a_warning_a_per_file_ignore_drops_does_not_set_the_exit_status(tmp_path, migrate, monkeypatch):
    write_tree(tmp_path, {"train.py": LEFT_FOR_A_HUMAN,
                          "pyproject.toml": '[tool.portlayer.per-file-ignores]\n"train.py" = ["PL202"]\n'})
    monkeypatch.chdir(tmp_path)

    assert migrate("train.py").exit_code == 0


def test_an_unprocessable_file_exits_2_whatever_else_remains(tmp_path, migrate):
    write_tree(tmp_path, {"train.py": LEFT_FOR_A_HUMAN, "broken.py": "import torch\ntorch.cuda.synchronize(\n"})

    assert migrate(tmp_path, "--exit-zero").exit_code == 2
    assert migrate(tmp_path).exit_code == 2


# --- files that cannot be processed ---------------------------------------------------------------


def test_a_broken_file_is_named_left_untouched_and_the_others_still_processed(tmp_path, migrate):
    broken_syntax = "import torch\ntorch.cuda.synchronize(\n"
    write_tree(
        tmp_path,
        {
            "a_syntax.py": broken_syntax,
            "b_bytes.py": b"import torch\nx = '\xff\xfe'\ntorch.cuda.synchronize()\n",
            "c_good.py": CUDA_SOURCE,
        },
    )
    undecodable = (tmp_path / "b_bytes.py").read_bytes()

    run = migrate(tmp_path)

    assert run.exit_code == 2
    assert (tmp_path / "a_syntax.py").read_text() == broken_syntax
    assert (tmp_path / "b_bytes.py").read_bytes() == undecodable
    assert SYNCHRONIZED in (tmp_path / "c_good.py").read_text()
    assert f"{tmp_path / 'a_syntax.py'}:" in run.stdout and " PL901 " in run.stdout
    assert f"{tmp_path / 'b_bytes.py'}:2:6: PL902 byte 0xff is not valid utf-8" in run.stdout
    assert "3 files scanned, 1 changed, 2 failed" in run.stderr
    assert "Traceback" not in run.stdout + run.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["does/not/exist.py"], "does/not/exist.py: no such file or directory"),
        (["--target", "cuda", "."], "Invalid value for '--target'"),
        (["--jobs", "0", "."], "Invalid value for '-j' / '--jobs'"),
        ([], "Missing argument 'PATHS...'"),
        (["-q", "-v", "."], "--quiet and --verbose exclude each other"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, migrate, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)

    run = migrate(*args)

    assert run.exit_code == 2
    assert message in run.stderr
    assert len(run.stderr.strip().splitlines()) <= 2  # the error, and the summary line if it got that far
    assert "Traceback" not in run.stderr and "Usage:" not in run.stderr


def test_a_directory_without_python_files_is_an_error(tmp_path, migrate):
    write_tree(tmp_path, {"empty/README.md": "hello"})

    run = migrate(tmp_path / "empty")

    assert run.exit_code == 2
    assert "no Python files or shell scripts in this directory" in run.stderr


def test_an_unreadable_file_is_named_and_the_run_goes_on(tmp_path, migrate, monkeypatch):
    write_tree(tmp_path, {"secret.py": CUDA_SOURCE, "train.py": CUDA_SOURCE})
    read_bytes = Path.read_bytes

    def guarded(path):  # what reading a chmod-000 file does to anyone but root
        if path.name == "secret.py":
            raise PermissionError(13, "Permission denied")
        return read_bytes(path)

    monkeypatch.setattr(Path, "read_bytes", guarded)

    run = migrate(tmp_path)

    assert run.exit_code == 2
    assert f"error: {tmp_path / 'secret.py'}: Permission denied" in run.stderr
    assert SYNCHRONIZED in (tmp_path / "train.py").read_text()


def test_a_file_that_cannot_be_written_is_named_and_left_as_it_was(tmp_path, migrate, monkeypatch):
    write_tree(tmp_path, {"ro/train.py": CUDA_SOURCE, "rw/train.py": CUDA_SOURCE})
    replace = os.replace

    def full_disk(source, target):  # fails after the temporary file was written, before it replaces the file
        if "/ro/" in str(target):
            raise OSError(28, "No space left on device")
        replace(source, target)

    monkeypatch.setattr(os, "replace", full_disk)

    run = migrate(tmp_path)

    assert run.exit_code == 2
    assert f"error: {tmp_path / 'ro' / 'train.py'}: cannot write: No space left on device" in run.stderr
    assert (tmp_path / "ro" / "train.py").read_text() == CUDA_SOURCE
    assert os.listdir(tmp_path / "ro") == ["train.py"]  # the temporary file is gone
    assert SYNCHRONIZED in (tmp_path / "rw" / "train.py").read_text()


# --- which files ----------------------------------------------------------------------------------


def test_walk_skips_hidden_venv_build_and_cache_folders_and_honours_exclude(tmp_path, migrate):
    skipped = [
        ".git/hooks/train.py",
        ".venv/lib/train.py",
        "myenv/lib/train.py",
        "build/lib/train.py",
        "__pycache__/train.py",
        "legacy/train.py",
        "src/old_train.py",
    ]
    write_tree(tmp_path, {name: CUDA_SOURCE for name in [*skipped, "src/train.py", "src/nested/deep.py"]})
    (tmp_path / "myenv" / "pyvenv.cfg").write_text("home = /usr/bin\n")

    run = migrate(tmp_path, "--exclude", "legacy", "--exclude", "src/old_*")

    assert run.exit_code == 0
    assert "2 files scanned, 2 changed" in run.stderr
    for name in skipped:
        assert (tmp_path / name).read_text() == CUDA_SOURCE, name
    assert SYNCHRONIZED in (tmp_path / "src/nested/deep.py").read_text()


# mmengine's distributed package: `mmengine/dist/utils.py`, named like a build output.
DIST_UTILS = (
    "import torch\nimport torch.distributed as torch_dist\n\n\n"
    "def init_dist(local_rank):\n"
    "    torch.cuda.set_device(local_rank)\n"
    "    torch_dist.init_process_group(backend='nccl')\n"
)


def test_a_source_package_named_dist_or_build_is_walked(tmp_path, migrate):
    write_tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/dist/__init__.py": "from .utils import init_dist\n",
        "pkg/dist/utils.py": DIST_UTILS,
        "pkg/ops/__init__.py": "",
        "pkg/ops/build/kernels.py": CUDA_SOURCE,  # a folder of a package: source too
        "tools/build/__init__.py": "",
        "tools/build/train.py": CUDA_SOURCE,  # a package itself
    })

    run = migrate(tmp_path)

    assert run.exit_code == 0, run.stderr
    migrated = (tmp_path / "pkg/dist/utils.py").read_text()
    assert "portlayer.set_device(local_rank)" in migrated
    assert "backend=portlayer.dist_backend()" in migrated
    assert SYNCHRONIZED in (tmp_path / "pkg/ops/build/kernels.py").read_text()
    assert SYNCHRONIZED in (tmp_path / "tools/build/train.py").read_text()
    assert "note:" not in run.stderr


def test_a_build_output_folder_holding_python_files_is_skipped_with_a_notice(tmp_path, migrate):
    write_tree(tmp_path, {
        "src/train.py": CUDA_SOURCE,
        "build/lib/pkg/__init__.py": "",
        "build/lib/pkg/train.py": CUDA_SOURCE,  # setuptools' copy of the package
        "dist/pkg-0.1.tar.gz": b"\x1f\x8b",
        "pkg_ns/dist/utils.py": DIST_UTILS,  # a namespace package: no __init__.py to tell it from an output
    })

    run = migrate(tmp_path)

    assert run.exit_code == 0, run.stderr
    notes = [line for line in run.stderr.splitlines() if "note:" in line]
    assert notes == [
        f"portlayer: note: {tmp_path / 'build'}: skipped as a build output (2 Python files); "
        "name it on the command line to migrate it",
        f"portlayer: note: {tmp_path / 'pkg_ns' / 'dist'}: skipped as a build output (1 Python file); "
        "name it on the command line to migrate it",
    ]
    assert (tmp_path / "build/lib/pkg/train.py").read_text() == CUDA_SOURCE
    assert (tmp_path / "pkg_ns/dist/utils.py").read_text() == DIST_UTILS
    assert migrate(tmp_path / "pkg_ns" / "dist").exit_code == 0  # as the notice says
    assert "portlayer.set_device(local_rank)" in (tmp_path / "pkg_ns/dist/utils.py").read_text()
    assert "note:" not in migrate(tmp_path, "-q").stderr


def test_a_file_named_on_the_command_line_is_taken_even_in_a_skipped_folder(tmp_path, migrate):
    write_tree(tmp_path, {"build/train.py": CUDA_SOURCE})

    assert migrate(tmp_path / "build" / "train.py").exit_code == 0

    assert SYNCHRONIZED in (tmp_path / "build/train.py").read_text()


# --- the report -----------------------------------------------------------------------------------


FALLBACK_SOURCE = """import torch
from torch.cuda.amp import autocast

try:
    import apex
    HAS_APEX = True
except ImportError:
    apex = None
    HAS_APEX = False


def step(model, batch):
    torch.cuda.synchronize()
    with autocast():
        return model(batch.cuda())
"""


def test_the_summary_sizes_the_rewrite_by_kind_as_a_diff_stat_does(tmp_path, migrate):
    """Three sites, three imports (`import torch` and `from torch.cuda.amp import autocast` no longer read,
    `import portlayer` added), and apex's fallback taken: its two `except` lines dedented, none of them a
    site."""
    write_tree(tmp_path, {"train.py": FALLBACK_SOURCE, "plain.py": PLAIN_SOURCE})

    run = migrate(tmp_path, "--report", str(tmp_path / "report.json"))

    assert run.exit_code == 0, run.stderr
    assert run.stderr.splitlines()[-1].endswith(
        "; 5 changes; 0 errors, 0 warnings, 0 info; rewritten: 3 sites, 3 imports, 1 fallback taken "
        "(2 lines dedented)")
    summary = json.loads((tmp_path / "report.json").read_text())["summary"]
    assert summary["rewritten"] == {"sites": 3, "imports": 3, "fallbacks": 1, "dedented": 2}
    assert "rewritten" not in migrate(tmp_path).stderr  # nothing left to rewrite: no sizes to give


def test_report_lists_changes_and_diagnostics_per_file_and_counts_by_category(tmp_path, migrate):
    write_tree(
        tmp_path,
        {
            "src/train.py": CUDA_SOURCE,
            "src/model.py": PLAIN_SOURCE,
            "src/broken.py": "torch.cuda.synchronize(\n",
            "run.sh": "export NCCL_IB_DISABLE=1\nexport CUDA_VISIBLE_DEVICES=0\nnvidia-smi\n",
        },
    )
    report_path = tmp_path / "out" / "report.json"
    report_path.parent.mkdir()

    run = migrate(tmp_path / "src", tmp_path / "run.sh", "--target", "npu", "--report", report_path)

    assert run.exit_code == 2
    report = json.loads(report_path.read_text())
    assert report["target"] == "npu" and report["wrote_files"] is True
    files = {entry["path"]: entry for entry in report["files"]}
    assert sorted(files) == sorted(
        str(tmp_path / name) for name in ("src/train.py", "src/broken.py", "run.sh")
    )

    train = files[str(tmp_path / "src/train.py")]
    assert train["status"] == "changed"
    assert {(c["code"], c["line"]) for c in train["changes"]} >= {("PL102", 5)}

    script = files[str(tmp_path / "run.sh")]
    # Columns are 1-based, as printed: `export CUDA_VISIBLE_DEVICES` names the variable at column 8.
    assert [(c["code"], c["line"], c["col"]) for c in script["changes"]] == [("PL107", 2, 8)]
    assert [(d["code"], d["line"], d["col"], d["severity"]) for d in script["diagnostics"]] == [
        ("PL605", 1, 8, "warning"),
        ("PL603", 3, 1, "warning"),
    ]
    assert all(d["hint"] for d in script["diagnostics"])
    assert files[str(tmp_path / "src/broken.py")]["diagnostics"][0]["code"] == "PL901"

    summary = report["summary"]
    assert summary["files"] == {"scanned": 4, "changed": 2, "unchanged": 1, "failed": 1}
    assert summary["changes"] == len(train["changes"]) + 1
    assert summary["diagnostics"] == {"error": 1, "warning": 2, "info": 0}
    assert summary["by_category"]["environment"] == {"converted": 1, "reported": 2}
    assert summary["by_category"]["api"]["converted"] >= 1
    assert summary["by_code"]["PL107"]["count"] == 1


# --- parallel runs and repeated runs ----------------------------------------------------------------


def _tree(root):
    files = {
        f"pkg{i}/train_{j}.py": CUDA_SOURCE.replace("step", f"step_{i}_{j}")
        for i in range(2)
        for j in range(2)
    }
    files |= {f"pkg{i}/model.py": PLAIN_SOURCE for i in range(2)}
    files["pkg1/broken.py"] = "torch.cuda.synchronize(\n"
    # Still mentions CUDA after migration (apex is reported, not converted): a re-run reaches the rules
    # instead of stopping at the prefilter.
    files["pkg1/with_apex.py"] = "import torch\nimport apex\n\n\ndef step():\n    torch.cuda.synchronize()\n"
    files["launch.sh"] = "CUDA_VISIBLE_DEVICES=0,1 torchrun --nproc_per_node 2 pkg0/train_0.py\n"
    return write_tree(root, files)


def test_jobs_n_gives_the_same_files_and_output_as_jobs_1(tmp_path, migrate, monkeypatch):
    monkeypatch.setattr(parallel, "POOL_MIN_BYTES", 0)  # a pool even for this small tree
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path / "one")
    _tree(tmp_path / "four")

    serial = migrate("one", "--target", "musa", "--jobs", "1")
    pooled = migrate("four", "--target", "musa", "--jobs", "4")

    assert serial.exit_code == pooled.exit_code == 2
    assert snapshot(tmp_path / "one") == snapshot(tmp_path / "four")
    assert serial.stdout.replace("one/", "") == pooled.stdout.replace("four/", "")
    assert serial.stderr.replace("one/", "") == pooled.stderr.replace("four/", "")


@pytest.mark.parametrize("enabled", [True, False])
def test_a_file_leaves_the_cycle_collector_as_it_found_it(enabled):
    # The collector is paused while a file's trees are built (it was 3/4 of the parse's time); a run
    # in a program's own process, or one whose file fails, must not leave it off, or turn it on.
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        for source in (CUDA_SOURCE, "x = torch.cuda.synchronize(\n"):
            result = job.process_bytes("train.py", "python", source.encode(), job.Options(write=False))
            assert result.status in ("changed", "failed")
            assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


@pytest.mark.parametrize("target", ["neutral", "torch", "npu", "musa"])
def test_a_second_run_changes_nothing(tmp_path, migrate, target):
    _tree(tmp_path)
    migrate(tmp_path, "--target", target)
    after_first = snapshot(tmp_path)

    second = migrate(tmp_path, "--target", target, "--check")

    assert second.exit_code == 2  # the broken file is still broken, and nothing else would change
    assert "0 would change" in second.stderr
    assert snapshot(tmp_path) == after_first
    # The apex file went through the rules again: its diagnostic is reported again.
    assert re.search(r"with_apex\.py:\d+:8: PL201 ", second.stdout), second.stdout


def test_quiet_prints_nothing_and_verbose_adds_changes_and_statistics(tmp_path, migrate):
    write_tree(tmp_path, {"train.py": CUDA_SOURCE, "run.sh": "nvidia-smi\nexport CUDA_VISIBLE_DEVICES=1\n"})

    quiet = migrate(tmp_path, "--check", "-q")
    verbose = migrate(tmp_path, "--check", "-v")

    # black -q: nothing but errors; the exit status still says that files would change.
    assert quiet.exit_code == verbose.exit_code == 1
    assert quiet.stdout == quiet.stderr == ""
    assert f"{tmp_path / 'train.py'}:5:5: PL102 " in verbose.stdout
    assert f"{tmp_path / 'run.sh'}:2:8: PL604 " in verbose.stdout
    assert "  hint: " in verbose.stdout
    assert "category" in verbose.stderr and "converted" in verbose.stderr


def test_annotate_comments_each_reported_statement_once(tmp_path, migrate):
    path = tmp_path / "train.py"
    path.write_text("import torch\n\ntorch.backends.cudnn.benchmark = True\n")

    first = migrate(path, "--annotate")
    again = migrate(path, "--annotate", "--check")

    assert first.exit_code == 0 and again.exit_code == 0
    lines = path.read_text().splitlines()
    assert lines[2].startswith("# portlayer: PL302 ")
    assert lines[3] == "torch.backends.cudnn.benchmark = True"
    assert sum(line.startswith("# portlayer:") for line in lines) == 1


@pytest.mark.parametrize(
    "target, expected",
    [
        ("neutral", "export CUDA_VISIBLE_DEVICES=0,1\n"),
        ("torch", "export CUDA_VISIBLE_DEVICES=0,1\n"),
        ("npu", "export ASCEND_RT_VISIBLE_DEVICES=0,1\n"),
        ("musa", "export MUSA_VISIBLE_DEVICES=0,1\n"),
    ],
)
def test_shell_scripts_per_target_through_the_command(tmp_path, migrate, target, expected):
    script = write_tree(tmp_path, {"launch.sh": "export CUDA_VISIBLE_DEVICES=0,1\n"}) / "launch.sh"
    script.chmod(0o755)

    run = migrate(tmp_path, "--target", target)

    assert run.exit_code == 0
    assert script.read_text() == expected
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    assert (" PL604 " in run.stdout) == (target in ("neutral", "torch"))
