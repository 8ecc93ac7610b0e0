"""Processes of their own for the tests: torch's privateuse1 backend can be renamed once per process, so a test
that installs a (stand-in) vendor plugin or picks a backend runs its code in a process of its own (a fork of the
warm interpreter, tests/warm, which has renamed nothing).

`HUNG_S` is how long a test lets a process it starts run before calling it hung. It is not a speed check: a
limit that guesses the machine's speed fails good changes on a busy one (issue 35). The only times the tests
hold the product to are the ones it promises (Ctrl-C ending `portlayer parity run`, docs/parity.md).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# A process of the test suite that runs this long is hung, not slow: the slowest, a DeepSpeed job under
# `make test` on a loaded 2-core machine, takes a few minutes.
HUNG_S = 1200


def run_python(code: str, *, fake_plugins: bool = True, env: dict | None = None, timeout: float = HUNG_S):
    """Run `code` in a fresh interpreter (torch's privateuse1 backend can be renamed once per process); with
    `fake_plugins`, the stand-in npu and musa plugins are importable (and their device compiled first)."""
    from tests import fake_device

    path = [str(REPO)]
    if fake_plugins:
        fake_device.build()
        path += fake_device.plugin_path("npu", "musa")
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("PORTLAYER_", "FAKE_"))}
    full_env["PYTHONPATH"] = os.pathsep.join(path)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=timeout, cwd=REPO
    )


def fresh_process_json(code: str, env: dict | None = None, timeout: float = HUNG_S, fake_plugins: bool = True):
    """Run `code` in a fresh interpreter (with the fake vendor plugins importable unless `fake_plugins` is
    False); return the JSON it prints on its last line."""
    result = run_python(code, fake_plugins=fake_plugins, env=env, timeout=timeout)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])
