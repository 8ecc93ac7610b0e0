from __future__ import annotations

import os
from dataclasses import dataclass

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, settings

from portlayer.cli import cli

# Property tests: modest example counts, no deadline (LibCST's first parse of a shape is slow).
settings.register_profile(
    "migrate-cli", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@dataclass
class Run:
    exit_code: int
    stdout: str
    stderr: str


@pytest.fixture
def migrate():
    """`portlayer migrate ARGS…` in this process, through the real `portlayer` command group."""

    def run(*args: str | os.PathLike) -> Run:
        result = CliRunner().invoke(cli, ["migrate", *map(str, args)], catch_exceptions=False)
        return Run(result.exit_code, result.stdout, result.stderr)

    return run
