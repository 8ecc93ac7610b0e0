"""What a process allocated on the stand-in device, written at its exit for the test that started it.

A port that silently falls back to the host cpu exits 0 and prints falling losses like one that trains on
the device, so the exit code and the output cannot tell them apart; the device's byte counts can. When
FAKE_DEVICE_MEMORY_LOG names a file, each process that loaded the stand-in appends one JSON line there at
exit: its pid and session, its torchrun RANK (null outside torchrun), the device type, and per device the peak bytes
allocated and the number of allocations.
"""

from __future__ import annotations

import atexit
import json
import os

import torch

ENV = "FAKE_DEVICE_MEMORY_LOG"


def record_at_exit(device_type: str, device_count: int) -> None:
    """Arrange for this process's line; nothing when no log is asked for."""
    path = os.environ.get(ENV)
    if path:
        atexit.register(_append, path, device_type, device_count)


def _append(path: str, device_type: str, device_count: int) -> None:
    stats = [torch.ops.fake_device.memory_stats(index) for index in range(device_count)]
    line = {
        "pid": os.getpid(),
        "session": os.getsid(0),
        "rank": os.environ.get("RANK"),
        "device_type": device_type,
        "peak_bytes": [peak for _, peak, _, _ in stats],
        "allocations": [allocations for _, _, allocations, _ in stats],
    }
    # One short write in append mode: lines from ranks exiting together do not interleave.
    with open(path, "a", encoding="utf-8") as log:
        log.write(json.dumps(line) + "\n")
