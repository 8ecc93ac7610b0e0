"""Synthetic run files (tests/run_files.py, made from the schema) for testing compare without training."""

from __future__ import annotations

import pytest

from portlayer.train import runfile
from tests.run_files import perturbed as _perturbed
from tests.run_files import synthetic_run


@pytest.fixture
def make_run():
    return synthetic_run


@pytest.fixture
def perturbed():
    return _perturbed


@pytest.fixture
def write_run(tmp_path):
    """Write a run with the trainer's own writer, as `portlayer parity run` would."""

    def write(run: dict, name: str) -> str:
        path = tmp_path / name
        runfile.write_run(path, run)
        return str(path)

    return write
