import os

import pytest

from tests import fake_device
from tests.processes import fresh_process_json

# Nothing in the tests may reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


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
