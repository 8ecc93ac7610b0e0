"""The drop-in leaves CUDA-only attention libraries absent (docs/dropin.md, "CUDA-only libraries at run
time"): a program's own ImportError fallback still runs after `import portlayer.torch as torch`."""

import importlib
import subprocess
import sys
import textwrap

import pytest

from tests.processes import HUNG_S

LIBRARIES = ("flash_attn", "flash_attn_interface", "xformers", "xformers.ops")


def test_cuda_only_attention_libraries_stay_absent():
    program = textwrap.dedent(f"""
        import sys
        import portlayer.torch as torch
        for library in {LIBRARIES!r}:
            try:
                __import__(library)
                print(library, "imported")
            except ImportError:
                print(library, "fallback")
        print(sorted({{name.split(".")[0] for name in sys.modules}} & {{"flash_attn", "flash_attn_interface", "xformers"}}))
    """)
    output = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=HUNG_S,
                            check=True).stdout.splitlines()
    assert output == [f"{library} fallback" for library in LIBRARIES] + ["[]"]


def test_the_libraries_are_absent_here_too():
    """The test above can only tell a stand-in from the real library where the real one is absent."""
    for library in ("flash_attn", "xformers"):
        with pytest.raises(ImportError):
            importlib.import_module(library)
