import os

import pytest

from tests import accelerator, fake_device
from tests.processes import fresh_process_json

# Nothing in the tests may reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
# PORTLAYER_TESTS_ACCELERATOR=npu: the run as on a host with an accelerator (tests/accelerator.py).
accelerator.show()


@pytest.fixture
def in_fresh_process():
    return fresh_process_json


@pytest.fixture(scope="session")
def stand_in_device():
    """`tests.fake_device.environment`, with the stand-in device compiled. Only the tests that start a process
    on the stand-in pay for compiling it (once per machine and source change, about a minute): they ask for
    this fixture, or call `fake_device.environment` / `torchrun` / `run_python`, which compile it first."""
    fake_device.build()
    return fake_device.environment


@pytest.fixture
def without_accelerators(monkeypatch):
    """This test means a host without accelerators: the processes it starts see none (tests/accelerator.py).
    Returns that environment, for the test's own subprocesses."""
    hidden = accelerator.hidden()
    for name in set(os.environ) - set(hidden):
        monkeypatch.delenv(name)
    for name, value in hidden.items():
        monkeypatch.setenv(name, value)
    return hidden
