import importlib
import json
import os
import subprocess
import sys
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


def run_with_fake_plugins(code: str, backend: str, timeout: int = 180) -> dict:
    """Run `code` in a fresh interpreter (privateuse1 can be renamed once per process) with the fake vendor
    plugins importable and `PORTLAYER_BACKEND=backend`; return the JSON it prints last."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PORTLAYER_", "FAKE_"))}
    env.update(PYTHONPATH=os.pathsep.join([str(REPO), str(FAKE_PLUGINS)]), PORTLAYER_BACKEND=backend)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=timeout, cwd=REPO
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])
