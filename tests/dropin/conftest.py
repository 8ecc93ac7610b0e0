import importlib

import pytest


@pytest.fixture(scope="module")
def dropin():
    """`portlayer.torch` on the cpu backend, its patches applied for this module's tests and removed after."""
    import portlayer
    from portlayer import runtime

    runtime.activate("cpu")
    with portlayer.patched():
        yield importlib.import_module("portlayer.torch")
