"""Every `torch.npu` name portlayer dispatches to exists in each real torch_npu release it supports.

The names come from each wheel's `torch_npu/npu/__init__.py` `__all__`, and the torch it pins from its
metadata, extracted without importing it by `extract_torch_npu_api.py` (in tools/vendor_api/) into
`torch_npu_api-<release>.json`.
"""

import json
import re
import zipfile

import pytest

from portlayer.api import MIRRORED
from portlayer.backends import BY_NAME
from tools.vendor_api.extract_torch_npu_api import MODULE_PATH, RECORDS, exported_names, main

RELEASES = {path.name: json.loads(path.read_text()) for path in sorted(RECORDS.glob("torch_npu_api-*.json"))}


def test_the_records_are_the_releases_that_pin_the_supported_torch_floor_and_the_newest():
    # Ascend's migration docs support transfer_to_npu on torch 2.6.0, 2.7.1 and 2.8.0 (MindSpeed-LLM 26.0 runs
    # on 2.7.1); 2.14.0 is the newest torch_npu. Each record is the newest torch_npu for its torch.
    pinned = {re.match(r"\d+\.\d+\.\d+", record["torch"]).group(0): record["torch_npu"] for record in RELEASES.values()}
    assert pinned == {"2.6.0": "2.6.0.post5", "2.7.1": "2.7.1.post11", "2.8.0": "2.8.0.post5", "2.14.0": "2.14.0"}


@pytest.mark.parametrize("record", sorted(RELEASES))
def test_every_name_portlayer_takes_from_torch_npu_exists_there(record):
    names = RELEASES[record]["names"]
    assert len(names) > 100 and RELEASES[record]["source"] == MODULE_PATH
    dispatched = {name for name in MIRRORED if name not in BY_NAME["npu"].overrides}
    assert sorted(dispatched - set(names)) == []


def test_extraction_reads_assignments_and_extensions_of_all(tmp_path):
    source = "import x\n__all__ = ['a', 'b']\n__all__ += ['c']\nother = ['d']\n"
    assert exported_names(source) == ["a", "b", "c"]
    wheel = tmp_path / "torch_npu-9.9.9.post1-cp311-cp311-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(MODULE_PATH, source)
        # The older metadata's spelling of the pin (torch_npu 2.6.0.post5), after another requirement.
        metadata = "Name: torch_npu\nRequires-Dist: torchvision\nRequires-Dist: torch (==9.9.0+cpu)\n"
        archive.writestr("torch_npu-9.9.9.post1.dist-info/METADATA", metadata)
    output = tmp_path / "names.json"
    assert main([str(wheel), "-o", str(output)]) == 0
    assert json.loads(output.read_text()) == {
        "torch_npu": "9.9.9.post1",
        "torch": "9.9.0+cpu",
        "source": MODULE_PATH,
        "names": ["a", "b", "c"],
    }


def test_extraction_of_a_broken_wheel_is_one_line_and_exit_2(tmp_path, capsys):
    wheel = tmp_path / "torch_npu-1.0-none.whl"
    wheel.write_bytes(b"not a zip")
    assert main([str(wheel), "-o", str(tmp_path / "out.json")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
