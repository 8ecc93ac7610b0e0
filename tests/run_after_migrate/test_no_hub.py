"""The run-after-migrate programs name hub models and data sets; the suite builds each one locally under that
name (public_programs.py, test_zero2_program.py). A name it did not build must fail in the run, not download:
every run is offline for the hub's client, transformers and datasets, and the hub's address is a closed port."""

from __future__ import annotations

import subprocess
import sys

from tests.processes import HUNG_S
from tests.run_after_migrate.launch import TARGETS, environment

# What a run's loaders consult before any download, and what an attempt to reach the hub meets. No model or
# data set is named: nothing is loaded.
PROBE = """
import socket, urllib.parse
import datasets.config, huggingface_hub.constants, transformers.utils.hub
print(huggingface_hub.constants.HF_HUB_OFFLINE, transformers.utils.hub.is_offline_mode(),
      datasets.config.HF_HUB_OFFLINE)
endpoint = urllib.parse.urlsplit(huggingface_hub.constants.ENDPOINT)
try:
    socket.create_connection((endpoint.hostname, endpoint.port), timeout=5).close()
    print("reached", endpoint.netloc)
except OSError:
    print("refused", endpoint.netloc)
"""


def test_no_run_reaches_the_hub(tmp_path):
    host = next(target for target in TARGETS if target.name == "neutral")
    run = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=tmp_path, env=environment(host), capture_output=True, text=True, timeout=HUNG_S
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["True", "True", "True", "refused", "127.0.0.1:9"]
    assert list(tmp_path.iterdir()) == []
