"""The run-after-migrate programs name hub models and data sets; the suite builds each one locally under that
name (public_programs.py, test_zero2_program.py). A name it did not build must fail in the run, not download."""

from __future__ import annotations

import subprocess
import sys

from tests.run_after_migrate.launch import TARGETS, environment

# A repository id that no hub holds: whatever the network, nothing can come down; what is shown is that the
# run does not try (offline, the hub's address a closed local port).
LOAD = "from transformers import AutoTokenizer\nAutoTokenizer.from_pretrained('portlayer-tests/never-built')\n"


def test_no_run_reaches_the_hub(tmp_path):
    host = next(target for target in TARGETS if target.name == "neutral")
    run = subprocess.run(
        [sys.executable, "-c", LOAD], cwd=tmp_path, env=environment(host), capture_output=True, text=True, timeout=120
    )
    assert run.returncode != 0
    assert "offline" in run.stderr.lower() or "127.0.0.1" in run.stderr, run.stderr[-2000:]
    assert list(tmp_path.iterdir()) == []
