import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FAKE_PLUGINS = REPO / "tests" / "fake_plugins"


@pytest.fixture(scope="module")
def dropin():
    """`portlayer.torch` on the cpu backend, its patches applied for this module's tests and removed after."""
    import portlayer
    from portlayer import runtime

    runtime.activate("cpu")
    with portlayer.patched():
        yield importlib.import_module("portlayer.torch")
