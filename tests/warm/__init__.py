"""A warm interpreter for the processes the tests start: a `python` that costs a fork, not the seconds of imports a
new interpreter pays before a training program's first line (torch, its compiler front-end and distributed
packages, transformers: about 8 s of CPU, most of this suite's time on 2 cores).

Every test runs with `sys.executable` set to it (the `warm_interpreter` fixture, tests/conftest.py), so each
process a test starts with `[sys.executable, …]` (`SCRIPT`, `-m MODULE`, `-c CODE`, with `-u`/`-B`) is warm, and so
are the processes those start: the ranks of torchrun and of `portlayer parity run`, multiprocessing's fork server.
Its client (client.py) hands the program to a server (server.py) that has imported those modules once in the
program's own environment: one server per environment, started by the environment's second program (the first
runs in a new interpreter), ending when idle or when the session ends. The program then runs in a fork of it as
`python` would run it: in a session of its own, with its arguments, working directory, environment, open
descriptors, sitecustomize, exit status, and signals passed on; killing the client kills it.

What differs from a new interpreter is what was imported before the program's first line, by the rule
`portlayer.train.launch` forks its ranks by: torch's modules always, transformers only where no device plugin is
installed (importing it loads one), and nothing where `import torch` loads a plugin itself. A test about what a
new interpreter imports is marked `real_interpreter`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

CLIENT = Path(__file__).with_name("client.py")
# The real interpreter, before any test stands the warm one in for sys.executable.
REAL = sys.executable
# Set by the session's first process (the xdist controller, before its workers start): the folder every process
# of the run shares, with the wrapper and the servers' sockets.
FOLDER_ENV = "TESTS_WARM_INTERPRETER"


def python() -> str:
    """The warm interpreter's executable for this test session (its folder made on first use)."""
    if FOLDER_ENV not in os.environ:
        start_session()
    return str(Path(os.environ[FOLDER_ENV]) / "python")


def new_folder() -> Path:
    """A folder of servers of its own, with its `python` wrapper."""
    folder = Path(tempfile.mkdtemp(prefix="portlayer-warm-"))
    wrapper = folder / "python"
    wrapper.write_text(f"#!/bin/sh\nexec '{REAL}' -I -S '{CLIENT}' '{folder}' \"$@\"\n")
    wrapper.chmod(0o755)
    return folder


def stop(folder: Path) -> None:
    """Stop the servers of `folder`, and remove it."""
    for pids in folder.glob("*.pids"):
        for pid in pids.read_text().split():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(int(pid), signal.SIGTERM)
    shutil.rmtree(folder, ignore_errors=True)


def start_session() -> None:
    os.environ[FOLDER_ENV] = str(new_folder())


def end_session() -> None:
    folder = os.environ.pop(FOLDER_ENV, None)
    if folder is not None:
        stop(Path(folder))
