"""A command and every process it starts, ended as one: how `portlayer parity run`, the demo and the tests run
torchrun.

The command runs in a session of its own, so that one signal to its process group reaches it and every child
that stays in the group, and a terminal's Ctrl-C reaches only the caller. torchrun starts each rank in a
session of its own too (torch.distributed.elastic's SubprocessHandler), out of the group's reach: the ranks,
and what they start, are found from /proc while the command is still their parent, and signalled one by one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from pathlib import Path


def process_tree(pid: int) -> list[int]:
    """Every process below `pid`, from /proc (Linux; elsewhere none are known)."""
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        children = []
        for task in Path(f"/proc/{parent}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                children += [int(child) for child in task.read_text().split()]
        found += children
        frontier += children
    return found


def _start_time(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot), None if there is none: a pid and its start time name
    one process, where a pid alone may be reused once it exits."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


class ProcessGroup:
    """`ProcessGroup(command, **popen)`: `subprocess.Popen(command, **popen)` in a session of its own. Used as a
    context manager, nothing it started outlives the block."""

    def __init__(self, command: list[str], **popen) -> None:
        self.process = subprocess.Popen(command, start_new_session=True, **popen)
        self.interrupts = 0
        # Every process seen below the command, by pid, with its start time: a rank torchrun leaves behind is
        # no longer below it, and is still stopped.
        self._seen: dict[int, str | None] = {}

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(self, *exc) -> None:
        # Ended early (an exception, Ctrl-C): whatever is left goes.
        if self.process.poll() is None or self.interrupts:
            self.send(signal.SIGKILL)
        self.process.__exit__(*exc)

    def send(self, number: int) -> None:
        """Send signal `number` to the command's process group and to every process it started that is still
        there: below it now, or seen below it before."""
        for pid in [self.process.pid, *process_tree(self.process.pid)]:
            self._seen.setdefault(pid, _start_time(pid))
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, number)
        for pid, started in self._seen.items():
            if started is not None and _start_time(pid) == started:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, number)

    def kill(self) -> None:
        self.send(signal.SIGKILL)

    def communicate(self, timeout: float) -> str | None:
        """Wait at most `timeout` s for the command, and return what it wrote to its pipe. Past the timeout every
        process it started is killed, and `subprocess.TimeoutExpired` raised with the output so far."""
        try:
            return self.process.communicate(timeout=timeout)[0]
        except subprocess.TimeoutExpired:
            self.kill()
            output = self.process.communicate()[0]
            raise subprocess.TimeoutExpired(self.process.args, timeout, output) from None

    @contextlib.contextmanager
    def stopped_by_ctrl_c(self, grace_s: float):
        """Inside the block, Ctrl-C (SIGINT) stops the command instead of raising KeyboardInterrupt wherever the
        caller happens to be: the first sends SIGTERM to every process it started and kills whatever is left
        `grace_s` later (SIGALRM), a second kills at once. `interrupts` counts them; the caller reads the
        command's output to its end, which comes once they are all gone. (Only the main thread receives signals:
        in another, the block changes nothing.)"""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return

        def on_interrupt(signum, frame) -> None:
            self.interrupts += 1
            if self.interrupts == 1:
                self.send(signal.SIGTERM)
                signal.setitimer(signal.ITIMER_REAL, grace_s)
            else:
                self.kill()

        previous = signal.signal(signal.SIGINT, on_interrupt), signal.signal(signal.SIGALRM, lambda *_: self.kill())
        try:
            yield self
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGINT, previous[0])
            signal.signal(signal.SIGALRM, previous[1])
