"""Run after migrate, on public files (public/README.md: repository, commit, license) that use CUDA-only
libraries: ported to each target by `portlayer migrate`, they import and run their attention and norm code
paths on the target's device (check_public_files.py; on the stand-in npu/musa, device bytes asserted), agree with plain torch, and a second migration changes nothing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.run_after_migrate.launch import TARGETS, finish, losses, start

HERE = Path(__file__).resolve().parent
FILES = {"dinov2": "dinov2/attention.py", "wan": "wan2_1/attention.py", "fairseq": "fairseq/layer_norm.py"}
MIGRATED_TARGETS = [target for target in TARGETS if target.name in ("neutral", "torch", "npu", "musa")]


@pytest.mark.parametrize("target", MIGRATED_TARGETS, ids=str)
def test_public_files_run_after_migrate(target, tmp_path):
    shutil.copy(HERE / "check_public_files.py", tmp_path)
    for relative in FILES.values():
        (tmp_path / relative).parent.mkdir(exist_ok=True)
        shutil.copy(HERE / "public" / relative, tmp_path / relative)
        target.prepare(tmp_path / relative)
    output = finish(start(tmp_path / "check_public_files.py", [target.device_type, *FILES], target, None), f"public files on {target}")
    assert [line for line in output.splitlines() if line.startswith("ok ")] == [f"ok {name}" for name in FILES]
    assert len(losses(output)) == 3 * len(FILES)


def test_stored_files_are_the_public_ones():
    """Stored unmodified: each still has the import the test is about."""
    assert "from xformers.ops import memory_efficient_attention" in (HERE / "public" / FILES["dinov2"]).read_text()
    assert "flash_attn.flash_attn_varlen_func(" in (HERE / "public" / FILES["wan"]).read_text()
    assert "from apex.normalization import FusedLayerNorm" in (HERE / "public" / FILES["fairseq"]).read_text()
