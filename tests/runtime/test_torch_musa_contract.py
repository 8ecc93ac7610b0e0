"""Every `torch.musa` name portlayer dispatches to exists in the real torch_musa.

The names come from torch_musa's published source at release v2.7.1 (github.com/MooreThreads/torch_musa),
extracted without importing it by `extract_torch_musa_api.py` (in tools/vendor_api/) into
`torch_musa_api.json`; torch_musa is not on the package index, so the list is committed with its script.
"""

import json
from pathlib import Path

from portlayer.api import MIRRORED
from portlayer.backends import BY_NAME
from tools.vendor_api.extract_torch_musa_api import MODULE_PATH, main

RECORD = json.loads((Path(__file__).parents[1] / "vendor_api" / "torch_musa_api.json").read_text())


def test_the_record_comes_from_a_named_release():
    assert RECORD["torch_musa"] == "v2.7.1"
    assert RECORD["source"] == MODULE_PATH
    assert len(RECORD["names"]) > 90


def test_every_name_portlayer_takes_from_torch_musa_exists_there():
    dispatched = {name for name in MIRRORED if name not in BY_NAME["musa"].overrides}
    assert sorted(dispatched - set(RECORD["names"])) == []


def test_extraction_follows_definitions_own_imports_and_star_imports(tmp_path):
    package = tmp_path / "torch_musa"
    (package / "core").mkdir(parents=True)
    (package / "__init__.py").write_text(
        "import sys\n"
        "from typing import Set\n"                      # not the package's: left out
        "from .core.device import set_device, _hidden, Device as device\n"
        "from .core.memory import *\n"                  # expanded to its __all__
        "from .core.random import *\n"                  # no __all__: its public names
        "def synchronize(): pass\n"
        "try:\n    from .core import amp\nexcept ImportError:\n    pass\n"
    )
    (package / "core" / "__init__.py").write_text("")
    (package / "core" / "memory.py").write_text("__all__ = ['memory_allocated']\ndef other(): pass\n")
    (package / "core" / "random.py").write_text("def manual_seed(s): pass\ndef _private(): pass\nSEED = 0\n")
    output = tmp_path / "names.json"
    assert main([str(tmp_path), "--release", "v9.9.9", "-o", str(output)]) == 0
    assert json.loads(output.read_text()) == {
        "torch_musa": "v9.9.9",
        "source": MODULE_PATH,
        "names": ["SEED", "amp", "device", "manual_seed", "memory_allocated", "set_device", "synchronize"],
    }


def test_extraction_of_a_tree_without_torch_musa_is_one_line_and_exit_2(tmp_path, capsys):
    assert main([str(tmp_path), "--release", "v1", "-o", str(tmp_path / "out.json")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert not (tmp_path / "out.json").exists()
