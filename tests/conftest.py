import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import fake_device

REPO = Path(__file__).resolve().parent.parent

# Nothing in the tests may reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


def run_python(code: str, *, fake_plugins: bool = True, env: dict | None = None, timeout: int = 120):
    """Run `code` in a fresh interpreter (torch's privateuse1 backend can be renamed once per process)."""
    path = [str(REPO)] + (fake_device.plugin_path("npu", "musa") if fake_plugins else [])
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("PORTLAYER_", "FAKE_"))}
    full_env["PYTHONPATH"] = os.pathsep.join(path)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=timeout, cwd=REPO
    )


def fresh_process_json(code: str, env: dict | None = None, timeout: int = 180):
    """Run `code` in a fresh interpreter with the fake vendor plugins importable; return the JSON it prints
    on its last line."""
    result = run_python(code, env=env, timeout=timeout)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture
def in_fresh_process():
    return fresh_process_json


@pytest.fixture(scope="session", autouse=True)
def stand_in_device_built():
    """The stand-in npu/musa device is compiled before any test runs (once per machine and source change,
    about a minute), not inside the first subprocess that imports it, where a test's timeout would count it."""
    return fake_device.build()


@pytest.fixture(scope="session")
def stand_in_device(stand_in_device_built):
    """`tests.fake_device.environment`, with the stand-in device compiled."""
    return fake_device.environment
