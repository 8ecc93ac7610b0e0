"""The `torch.npu` / `torch.musa` module of the stand-in device: the vendor's names, backed by `device.cpp`.

Names follow the vendors' own modules (torch_npu 2.14's `torch.npu.__all__`, torch_musa v2.7.1's
`torch.musa`); only the subset portlayer and migrated training scripts use is here. Work on this device is
synchronous, so `synchronize` has nothing to wait for and events time with the host clock (in C++).
"""

from __future__ import annotations

import contextlib
import os
import types
import warnings
from dataclasses import dataclass

import torch

OPS = torch.ops.fake_device


@dataclass(frozen=True)
class Vendor:
    device_type: str
    device_name: str
    total_memory: int
    # What `get_device_capability` answers: torch_npu has no such concept and returns None.
    capability: tuple[int, int] | None


def _signed(seed) -> int:
    seed = int(seed) % 2**64
    return seed - 2**64 if seed >= 2**63 else seed


def build(module: types.ModuleType, vendor: Vendor, device_count: int) -> dict:
    """The device-module functions, as a name -> object dict (the caller may wrap them)."""
    device_type = vendor.device_type

    def index(device=None, optional: bool = True) -> int:
        """A device index from an int, a "npu:1" / "npu" string, a torch.device or None (the current one)."""
        if device is None or (isinstance(device, str) and device == device_type):
            return OPS.current_device()
        if isinstance(device, str):
            device = torch.device(device)
        if isinstance(device, torch.device):
            if device.type != device_type:
                raise ValueError(f"Expected a {device_type} device, but got: {device}")
            return OPS.current_device() if device.index is None else device.index
        if isinstance(device, int) and not isinstance(device, bool):
            return device
        raise TypeError(f"invalid device {device!r}: expected an int, a string or a torch.device")

    def checked(device=None) -> int:
        i = index(device)
        if not 0 <= i < device_count:
            raise RuntimeError(f"invalid device ordinal {i}: this process sees {device_count} {device_type} device(s)")
        return i

    def set_device(device) -> None:
        OPS.set_device(checked(device))

    def synchronize(device=None) -> None:
        checked(device)

    # RNG: one default generator per device, in C++; random kernels on a device draw from it. Seeds are
    # 64-bit unsigned, carried through torch's signed int.
    def manual_seed(seed) -> None:
        OPS.manual_seed(OPS.current_device(), _signed(seed))

    def manual_seed_all(seed) -> None:
        for i in range(device_count):
            OPS.manual_seed(i, _signed(seed))

    def seed() -> None:
        manual_seed(int.from_bytes(os.urandom(8), "little"))

    def seed_all() -> None:
        manual_seed_all(int.from_bytes(os.urandom(8), "little"))

    def initial_seed() -> int:
        return OPS.initial_seed(OPS.current_device()) % 2**64

    def get_rng_state(device=device_type) -> torch.Tensor:
        return OPS.get_rng_state(checked(device))

    def set_rng_state(new_state, device=device_type) -> None:
        OPS.set_rng_state(checked(device), new_state)

    def get_rng_state_all() -> list:
        return [OPS.get_rng_state(i) for i in range(device_count)]

    def set_rng_state_all(new_states) -> None:
        for i, state in enumerate(new_states):
            OPS.set_rng_state(i, state)

    # Memory: the bytes the device holds now and at its peak (no cache: reserved is allocated).
    def memory_allocated(device=None) -> int:
        return OPS.memory_stats(checked(device))[0]

    def max_memory_allocated(device=None) -> int:
        return OPS.memory_stats(checked(device))[1]

    def memory_stats(device=None) -> dict:
        current, peak, allocations, frees = OPS.memory_stats(checked(device))
        return {
            "allocated_bytes.all.current": current,
            "allocated_bytes.all.peak": peak,
            "reserved_bytes.all.current": current,
            "reserved_bytes.all.peak": peak,
            "allocation.all.allocated": allocations,
            "allocation.all.freed": frees,
        }

    def reset_peak_memory_stats(device=None) -> None:
        OPS.reset_peak(checked(device))

    def mem_get_info(device=None) -> tuple[int, int]:
        return vendor.total_memory - memory_allocated(device), vendor.total_memory

    def get_device_capability(device=None):
        checked(device)
        if vendor.capability is None:  # torch_npu's answer, warning included
            warnings.warn(f"torch.{device_type}.get_device_capability isn't implemented!", stacklevel=2)
        return vendor.capability

    def get_device_properties(device=None):
        checked(device)
        return types.SimpleNamespace(
            name=vendor.device_name,
            total_memory=vendor.total_memory,
            major=(vendor.capability or (0, 0))[0],
            minor=(vendor.capability or (0, 0))[1],
            multi_processor_count=1,
        )

    class Event:
        """`torch.npu.Event` over a torch.Event of this device type (timing from the device guard, in ms).

        Composed, not derived: torch.Event.elapsed_time accepts only torch.Event itself."""

        def __init__(self, enable_timing=False, blocking=False, interprocess=False):
            self._event = torch.Event(
                device=device_type, enable_timing=enable_timing, blocking=blocking, interprocess=interprocess
            )

        def record(self, stream=None):
            self._event.record(stream)

        def wait(self, stream=None):
            self._event.wait(stream)

        def query(self):
            return self._event.query()

        def synchronize(self):
            self._event.synchronize()

        def elapsed_time(self, end_event):
            return self._event.elapsed_time(end_event._event)

    class Stream(torch.Stream):
        """`torch.npu.Stream`: every stream of a synchronous device is always done."""

        def __new__(cls, device=None, priority=0, **kwargs):
            if kwargs:
                return super().__new__(cls, **kwargs)
            return super().__new__(cls, device=torch.device(device_type, index(device)), priority=priority)

        # torch.Stream takes only torch.Event: the vendor's Event is unwrapped (FSDP2 passes its own).
        def wait_event(self, event):
            return super().wait_event(getattr(event, "_event", event))

        def record_event(self, event=None):
            if event is None:
                return super().record_event()
            super().record_event(getattr(event, "_event", event))
            return event

    def current_stream(device=None) -> Stream:
        # The guard hands out the one default stream for every request.
        return Stream(checked(device))

    def stream(s):
        return contextlib.nullcontext(s)

    class device:  # noqa: N801 - torch.npu.device is a class named in lower case
        """`torch.npu.device(i)`: makes device i current inside the block."""

        def __init__(self, device):
            self.index = index(device)
            self.previous = None

        def __enter__(self):
            self.previous = OPS.current_device()
            if self.index >= 0:
                OPS.set_device(self.index)

        def __exit__(self, *exc):
            OPS.set_device(self.previous)
            return False

    class device_of(device):  # noqa: N801
        def __init__(self, obj):
            super().__init__(obj.get_device() if obj.device.type == device_type else -1)

    class amp:  # noqa: N801 - a namespace, as torch.npu.amp is a module
        class autocast(torch.autocast):  # noqa: N801
            def __init__(self, enabled=True, dtype=torch.float16, cache_enabled=True):
                super().__init__(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

        class GradScaler(torch.amp.GradScaler):
            def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                         enabled=True):
                super().__init__(device_type, init_scale, growth_factor, backoff_factor, growth_interval, enabled)

    nothing = lambda *args, **kwargs: None  # noqa: E731
    return {
        "is_available": lambda: device_count > 0,
        "device_count": lambda: device_count,
        "current_device": lambda: OPS.current_device(),
        "set_device": set_device,
        "synchronize": synchronize,
        "manual_seed": manual_seed,
        "manual_seed_all": manual_seed_all,
        "seed": seed,
        "seed_all": seed_all,
        "initial_seed": initial_seed,
        "get_rng_state": get_rng_state,
        "set_rng_state": set_rng_state,
        "get_rng_state_all": get_rng_state_all,
        "set_rng_state_all": set_rng_state_all,
        "empty_cache": nothing,
        "memory_allocated": memory_allocated,
        "max_memory_allocated": max_memory_allocated,
        "memory_reserved": memory_allocated,
        "max_memory_reserved": max_memory_allocated,
        "memory_stats": memory_stats,
        "reset_peak_memory_stats": reset_peak_memory_stats,
        "reset_max_memory_allocated": reset_peak_memory_stats,
        "mem_get_info": mem_get_info,
        "get_device_name": lambda device=None: get_device_properties(device).name,
        "get_device_properties": get_device_properties,
        "get_device_capability": get_device_capability,
        "is_bf16_supported": lambda including_emulation=True: True,
        "Event": Event,
        "Stream": Stream,
        "stream": stream,
        "current_stream": current_stream,
        "default_stream": current_stream,
        "device": device,
        "device_of": device_of,
        "amp": amp,
        # What torch.autocast and torch's RNG seeding ask a privateuse1 module for.
        "get_amp_supported_dtype": lambda: [torch.float16, torch.bfloat16],
        "is_initialized": lambda: True,
        "_lazy_init": nothing,
        "_is_in_bad_fork": lambda: False,
    }
