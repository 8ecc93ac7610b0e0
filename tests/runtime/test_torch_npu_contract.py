"""Every `torch.npu` name portlayer dispatches to exists in the real torch_npu.

The names come from the wheel's `torch_npu/npu/__init__.py` `__all__`, extracted without importing it by
`extract_torch_npu_api.py` (in tools/vendor_api/) into `torch_npu_api.json`.
"""

import json
import zipfile
from pathlib import Path

from portlayer.api import MIRRORED
from portlayer.backends import BY_NAME
from tools.vendor_api.extract_torch_npu_api import MODULE_PATH, exported_names, main

RECORD = json.loads((Path(__file__).parents[1] / "vendor_api" / "torch_npu_api.json").read_text())


def test_the_record_comes_from_a_real_release():
    assert RECORD["torch_npu"].startswith("2.")
    assert len(RECORD["names"]) > 100


def test_every_name_portlayer_takes_from_torch_npu_exists_there():
    dispatched = {name for name in MIRRORED if name not in BY_NAME["npu"].overrides}
    assert sorted(dispatched - set(RECORD["names"])) == []


def test_extraction_reads_assignments_and_extensions_of_all(tmp_path):
    source = "import x\n__all__ = ['a', 'b']\n__all__ += ['c']\nother = ['d']\n"
    assert exported_names(source) == ["a", "b", "c"]
    wheel = tmp_path / "torch_npu-9.9.9-cp311-cp311-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(MODULE_PATH, source)
    output = tmp_path / "names.json"
    assert main([str(wheel), "-o", str(output)]) == 0
    assert json.loads(output.read_text()) == {
        "torch_npu": "9.9.9",
        "source": MODULE_PATH,
        "names": ["a", "b", "c"],
    }


def test_extraction_of_a_broken_wheel_is_one_line_and_exit_2(tmp_path, capsys):
    wheel = tmp_path / "torch_npu-1.0-none.whl"
    wheel.write_bytes(b"not a zip")
    assert main([str(wheel), "-o", str(tmp_path / "out.json")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
