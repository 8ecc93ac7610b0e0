import os
import stat

import pytest

from portlayer.atomic import replacing, write_atomic


def test_replaces_content_and_keeps_the_files_mode(tmp_path):
    target = tmp_path / "train.sh"
    target.write_text("old")
    target.chmod(0o750)
    write_atomic(target, "new ✓")
    assert target.read_text(encoding="utf-8") == "new ✓"
    assert stat.S_IMODE(target.stat().st_mode) == 0o750


def test_a_link_keeps_pointing_at_the_replaced_file(tmp_path):
    real = tmp_path / "real.py"
    real.write_bytes(b"a")
    link = tmp_path / "link.py"
    link.symlink_to(real)
    write_atomic(link, b"b")
    assert link.is_symlink() and real.read_bytes() == b"b"


def test_missing_parent_folders_are_made(tmp_path):
    write_atomic(tmp_path / "a" / "b" / "run.json", "{}")
    assert (tmp_path / "a" / "b" / "run.json").read_text() == "{}"


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "report.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), replacing(target) as temporary:
        temporary.write_text("half")
        raise RuntimeError("disk full")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["report.json"]


def test_the_temporary_keeps_the_suffix_for_format_sniffing_writers(tmp_path):
    with replacing(tmp_path / "plot.png") as temporary:
        assert temporary.suffix == ".png" and temporary.parent == tmp_path
        temporary.write_bytes(b"png")
    assert (tmp_path / "plot.png").read_bytes() == b"png"
