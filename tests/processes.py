"""Fresh interpreters for the tests: torch's privateuse1 backend can be renamed once per process, so a test
that installs a (stand-in) vendor plugin or picks a backend runs its code in a process of its own."""

import json
import os
import subprocess
import sys
from pathlib import Path

from tests import fake_device

REPO = Path(__file__).resolve().parent.parent


def run_python(code: str, *, fake_plugins: bool = True, env: dict | None = None, timeout: int = 120):
    """Run `code` in a fresh interpreter (torch's privateuse1 backend can be renamed once per process); with
    `fake_plugins`, the stand-in npu and musa plugins are importable (and their device compiled first)."""
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


def fresh_process_json(code: str, env: dict | None = None, timeout: int = 180, fake_plugins: bool = True):
    """Run `code` in a fresh interpreter (with the fake vendor plugins importable unless `fake_plugins` is
    False); return the JSON it prints on its last line."""
    result = run_python(code, fake_plugins=fake_plugins, env=env, timeout=timeout)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])
