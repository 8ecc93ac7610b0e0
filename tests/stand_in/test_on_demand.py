"""The stand-in npu/musa device (a C++ library, about a minute to compile) is built only for the tests that
start a process on it: a run of pure migrate tests compiles nothing. (A run with tests on the stand-in starts
the build when they are collected, tests/conftest.py.)"""

import os
import subprocess
import sys
from pathlib import Path

from tests.processes import HUNG_S

REPO = Path(__file__).resolve().parents[2]


def test_a_run_of_migrate_tests_compiles_no_stand_in_device(tmp_path):
    cache = tmp_path / "fake_device_cache"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:xdist", "-p", "no:cacheprovider",
         "tests/migrate/test_import_placement.py"],
        capture_output=True, text=True, cwd=REPO, timeout=HUNG_S,
        env={**os.environ, "FAKE_DEVICE_CACHE": str(cache)},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert " passed" in result.stdout
    # An autouse build would have compiled into (or at least created) the cache named above.
    assert not cache.exists()
