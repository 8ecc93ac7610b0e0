"""A program's own fallback for a CUDA-only library keeps working after migration: the `try` branch that
imports the library gives way to the fallback (PL120), so the fallback runs even where a module of that
name is importable (PyPI's unrelated `apex`, a half-built install), and the calls of the CUDA branch are
not rewritten. A handler that raises is no fallback; an import under the program's own `if` check is left."""

import sys
import types

import pytest
import torch

from portlayer.migrate.engine import migrate_source

PROGRAM = """
import torch
try:
    from apex.normalization import FusedLayerNorm as LayerNorm
    from apex.optimizers import FusedAdam
    HAS_APEX = True
except ImportError:
    from torch.nn import LayerNorm
    HAS_APEX = False

norm = LayerNorm(8)
if HAS_APEX:
    optimizer = FusedAdam(norm.parameters(), lr=1e-3)
else:
    optimizer = torch.optim.AdamW(norm.parameters(), lr=1e-3, weight_decay=0.0)
"""


@pytest.fixture
def importable_apex(monkeypatch):
    """A module named apex that imports (and would be wrong to use on the target)."""
    fake = types.ModuleType("apex")
    fake.normalization = types.SimpleNamespace(FusedLayerNorm=None)
    fake.optimizers = types.SimpleNamespace(FusedAdam=None)
    for name, module in (("apex", fake), ("apex.normalization", fake.normalization),
                         ("apex.optimizers", fake.optimizers)):
        monkeypatch.setitem(sys.modules, name, module)


@pytest.mark.parametrize("target", ["neutral", "torch", "npu", "musa"])
def test_the_programs_fallback_is_what_the_migrated_code_runs(target, importable_apex):
    result = migrate_source(PROGRAM, target)
    assert [c.code for c in result.changes if c.code != "PL110"] == ["PL120"]
    assert "FusedAdam(norm.parameters(), lr=1e-3)" in result.code  # the CUDA branch's call, not rewritten
    if target in ("neutral", "torch"):  # the vendor targets import their plugin, absent here
        namespace = {}
        exec(compile(result.code, "<migrated>", "exec"), namespace)
        assert namespace["HAS_APEX"] is False
        assert type(namespace["norm"]) is torch.nn.LayerNorm
        assert type(namespace["optimizer"]) is torch.optim.AdamW


def test_a_handler_that_raises_is_no_fallback():
    source = "try:\n    import amp_C\nexcept ImportError:\n    raise SystemExit('needs apex')\n"
    result = migrate_source(source, "neutral")
    assert result.code == source
    assert [d.code for d in result.diagnostics] == ["PL201"]
    assert "optional here" in result.diagnostics[0].message


def test_an_import_under_the_programs_own_check_is_left_with_its_calls():
    source = ("if is_apex_available():\n    from apex.optimizers import FusedAdam\n"
              "    optimizer = FusedAdam(params)\n")
    result = migrate_source(source, "neutral")
    assert result.code == source
    assert [d.code for d in result.diagnostics] == ["PL201"]


def test_a_dropped_liger_patch_leaves_a_program_that_runs_without_liger():
    source = ("import torch\nfrom liger_kernel.transformers import apply_liger_kernel_to_llama\n\n"
              "apply_liger_kernel_to_llama(rms_norm=True)\nnorm = torch.nn.RMSNorm(4)\n")
    result = migrate_source(source, "torch")
    assert result.code == "import torch\n\nnorm = torch.nn.RMSNorm(4)\n"
    namespace = {}
    exec(compile(result.code, "<migrated>", "exec"), namespace)
    assert [d.code for d in result.diagnostics] == ["PL217"]


@pytest.mark.parametrize("source, expected", [
    # The handler's comments go with it; a header split over lines does not.
    ("try:\n    import apex\nexcept (\n    ImportError,\n):\n    # fallback\n    apex = None\n",
     "# fallback\napex = None\n"),
    # Tabs and CRLF kept; the `else` body never runs without the library.
    ("if x:\r\n\ttry:\r\n\t\timport apex\r\n\t\ty = 1\r\n\texcept ImportError:\r\n\t\ty = 2\r\n\telse:\r\n"
     "\t\ty = 3\r\nprint(y)\r\n", "if x:\r\n\ty = 2\r\nprint(y)\r\n"),
    # What ran before the library import, then the handler, then `finally`.
    ("try:\n    import os\n    import xformers\nexcept (ImportError, OSError):\n    xformers = None\n"
     "finally:\n    done = True\n", "import os\nxformers = None\ndone = True\n"),
    # A one-line handler; a block left empty keeps a `pass`.
    ("def f():\n    try: import bitsandbytes as bnb\n    except ImportError: bnb = None\n    return bnb\n",
     "def f():\n    bnb = None\n    return bnb\n"),
    ("class A:\n    try:\n        import apex\n    except ImportError:\n        pass\n", "class A:\n    pass\n"),
    # Megatron's chain of fallbacks: each is taken, the last one runs.
    ("try:\n    from apex.optimizers import FusedAdam as Adam\nexcept ImportError:\n    try:\n"
     "        from transformer_engine.pytorch.optimizers import FusedAdam as Adam\n    except ImportError:\n"
     "        from torch.optim import AdamW as Adam\nx = 1\n", "from torch.optim import AdamW as Adam\nx = 1\n"),
])
def test_the_fallback_replaces_its_try_statement(source, expected):
    assert migrate_source(source, "neutral").code == expected
