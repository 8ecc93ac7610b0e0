"""Host-side stand-ins for the device concepts a backend lacks (streams and events on the cpu, …).

They keep device-generic code working: work on such a backend is synchronous, so a stream is a no-op
ordering handle and an event is a wall-clock timestamp (`elapsed_time` still measures milliseconds).
"""

from __future__ import annotations

import contextlib
import os
import platform
import time
from functools import lru_cache
from types import SimpleNamespace


class WallClockEvent:
    """`torch.cuda.Event` for synchronous backends: `record()` takes the time, `elapsed_time` is in ms."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        self.enable_timing = enable_timing
        self._recorded_at: float | None = None

    def record(self, stream=None) -> None:
        self._recorded_at = time.perf_counter()

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def wait(self, stream=None) -> None:
        pass

    def elapsed_time(self, end_event: WallClockEvent) -> float:
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Events must be created with enable_timing=True to measure elapsed time")
        if self._recorded_at is None or end_event._recorded_at is None:
            raise RuntimeError("Both events must be recorded before measuring elapsed time")
        return (end_event._recorded_at - self._recorded_at) * 1000.0


class HostStream:
    """`torch.cuda.Stream` for synchronous backends: every operation is already ordered."""

    def __init__(self, device=None, priority: int = 0, **kwargs):
        self.device = device
        self.priority = priority

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True

    def wait_stream(self, stream) -> None:
        pass

    def wait_event(self, event) -> None:
        pass

    def record_event(self, event: WallClockEvent | None = None) -> WallClockEvent:
        event = event or WallClockEvent()
        event.record()
        return event


DEFAULT_STREAM = HostStream()


def current_stream(device=None) -> HostStream:
    return DEFAULT_STREAM


def stream(stream) -> contextlib.AbstractContextManager:
    return contextlib.nullcontext(stream)


def memory_info(device=None) -> tuple[int, int]:
    """(free, total) bytes of host memory, like `torch.cuda.mem_get_info`."""
    page = os.sysconf("SC_PAGE_SIZE")
    return os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page


@lru_cache(maxsize=1)
def cpu_name(device=None) -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def cpu_properties(device=None) -> SimpleNamespace:
    return SimpleNamespace(
        name=cpu_name(),
        total_memory=memory_info()[1],
        multi_processor_count=os.cpu_count() or 1,
        major=0,
        minor=0,
    )
