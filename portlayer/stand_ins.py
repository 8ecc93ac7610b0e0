"""The one place that says what portlayer's API does where a backend has no answer of its own.

- Host stand-ins: on a synchronous backend (the cpu) a stream is a no-op ordering handle, an event a
  wall-clock timestamp (`elapsed_time` still measures milliseconds), memory and the device name the host's.
  The cpu record (`backends/cpu.py`) takes them in place of `torch.cpu`'s, which cannot time or take arguments.
- `FALLBACKS`: for each mirrored name a device module lacks, what the runtime binds instead. RNG names fall
  back to torch's global generator (which seeds every device); memory statistics report 0 (the backend keeps
  none); streams and events become the host stand-ins.
"""

from __future__ import annotations

import contextlib
import os
import platform
import time
from collections.abc import Callable
from functools import lru_cache
from types import ModuleType, SimpleNamespace
from typing import Any

from portlayer.api import RNG
from portlayer.backends.base import Backend


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


def _nothing(*args, **kwargs) -> None:
    return None


def _zero_bytes(device=None) -> int:
    return 0


def _bf16_probe(backend: Backend) -> Callable[..., bool]:
    answer: list[bool] = []

    def is_bf16_supported(including_emulation: bool = True) -> bool:
        if not answer:
            import torch

            try:
                ones = torch.ones(2, dtype=torch.bfloat16, device=backend.device_type)
                answer.append(bool((ones + ones).sum().item() == 4))
            except RuntimeError:
                answer.append(False)
        return answer[0]

    return is_bf16_supported


def _host_rng(backend: Backend, module: ModuleType) -> dict[str, Callable]:
    import torch

    def manual_seed(seed: int) -> None:
        torch.manual_seed(seed)

    def get_rng_state(device=None):
        return torch.get_rng_state()

    def set_rng_state(new_state, device=None) -> None:
        torch.set_rng_state(new_state)

    return {
        "manual_seed": manual_seed,
        "manual_seed_all": manual_seed,
        "seed": torch.seed,
        "initial_seed": torch.initial_seed,
        "get_rng_state": get_rng_state,
        "set_rng_state": set_rng_state,
    }


def _rng(name: str) -> Callable[[Backend, ModuleType], Any]:
    return lambda backend, module: _host_rng(backend, module)[name]


def _properties(backend: Backend, module: ModuleType):
    return lambda device=None: SimpleNamespace(name=backend.name, total_memory=0, multi_processor_count=1)


FALLBACKS: dict[str, Callable[[Backend, ModuleType], Any]] = {
    "is_available": lambda backend, module: lambda: backend.count_devices(module) > 0,
    "device_count": lambda backend, module: lambda: backend.count_devices(module),
    "current_device": lambda backend, module: lambda: 0,
    "set_device": lambda backend, module: _nothing,
    "synchronize": lambda backend, module: _nothing,
    **{name: _rng(name) for name in RNG},
    "empty_cache": lambda backend, module: _nothing,
    **{
        name: (lambda backend, module: _zero_bytes)
        for name in ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved")
    },
    "reset_peak_memory_stats": lambda backend, module: _nothing,
    "mem_get_info": lambda backend, module: memory_info,
    "get_device_name": lambda backend, module: lambda device=None: backend.name,
    "get_device_properties": _properties,
    "get_device_capability": lambda backend, module: lambda device=None: (0, 0),
    "is_bf16_supported": lambda backend, module: _bf16_probe(backend),
    "Event": lambda backend, module: WallClockEvent,
    "Stream": lambda backend, module: HostStream,
    "stream": lambda backend, module: stream,
    "current_stream": lambda backend, module: current_stream,
    "default_stream": lambda backend, module: current_stream,
    # No graph capture without the vendor's graphs: nothing is being captured.
    "is_current_stream_capturing": lambda backend, module: lambda: False,
}
