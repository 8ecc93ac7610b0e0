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


class Devices:
    """The devices a process sees (`count` of `device_type`): which one a call's argument names."""

    def __init__(self, device_type: str, count: int):
        self.type = device_type
        self.count = count

    def index(self, device=None) -> int:
        """A device index from an int, a "npu:1" / "npu" string, a torch.device or None (the current one)."""
        if device is None or (isinstance(device, str) and device == self.type):
            return OPS.current_device()
        if isinstance(device, str):
            device = torch.device(device)
        if isinstance(device, torch.device):
            if device.type != self.type:
                raise ValueError(f"Expected a {self.type} device, but got: {device}")
            return OPS.current_device() if device.index is None else device.index
        if isinstance(device, int) and not isinstance(device, bool):
            return device
        raise TypeError(f"invalid device {device!r}: expected an int, a string or a torch.device")

    def checked(self, device=None) -> int:
        """`index(device)`, which must be a device this process sees."""
        i = self.index(device)
        if not 0 <= i < self.count:
            raise RuntimeError(f"invalid device ordinal {i}: this process sees {self.count} {self.type} device(s)")
        return i


def build(vendor: Vendor, device_count: int) -> dict:
    """The device-module functions, as a name -> object dict (the caller may wrap them)."""
    devices = Devices(vendor.device_type, device_count)
    return {
        **_placement(devices),
        **_random(devices),
        **_memory(devices, vendor.total_memory),
        **_properties(devices, vendor),
        **_events(devices),
        **_streams(devices),
        **_amp(devices.type),
        # Both vendors export it (their graph capture is not stood in: nothing is ever capturing here).
        "is_current_stream_capturing": lambda: False,
        # What torch's RNG seeding asks a privateuse1 module for.
        "is_initialized": lambda: True,
        "_lazy_init": _nothing,
        "_is_in_bad_fork": lambda: False,
    }


def _nothing(*args, **kwargs) -> None:
    return None


def _placement(devices: Devices) -> dict:
    """Which devices there are and which is current: `set_device`, `with torch.npu.device(i)`, …"""

    def set_device(device) -> None:
        OPS.set_device(devices.checked(device))

    def synchronize(device=None) -> None:
        devices.checked(device)

    class device:  # noqa: N801 - torch.npu.device is a class named in lower case
        """`torch.npu.device(i)`: makes device i current inside the block."""

        def __init__(self, device):
            self.index = devices.index(device)
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
            super().__init__(obj.get_device() if obj.device.type == devices.type else -1)

    return {
        "is_available": lambda: devices.count > 0,
        "device_count": lambda: devices.count,
        "current_device": lambda: OPS.current_device(),
        "set_device": set_device,
        "synchronize": synchronize,
        "device": device,
        "device_of": device_of,
    }


def _random(devices: Devices) -> dict:
    """RNG: one default generator per device, in C++; random kernels on a device draw from it. Seeds are 64-bit
    unsigned, carried through torch's signed int."""

    def manual_seed(seed) -> None:
        OPS.manual_seed(OPS.current_device(), _signed(seed))

    def manual_seed_all(seed) -> None:
        for i in range(devices.count):
            OPS.manual_seed(i, _signed(seed))

    def set_rng_state(new_state, device=devices.type) -> None:
        OPS.set_rng_state(devices.checked(device), new_state)

    def set_rng_state_all(new_states) -> None:
        for i, state in enumerate(new_states):
            OPS.set_rng_state(i, state)

    return {
        "manual_seed": manual_seed,
        "manual_seed_all": manual_seed_all,
        "seed": lambda: manual_seed(int.from_bytes(os.urandom(8), "little")),
        "seed_all": lambda: manual_seed_all(int.from_bytes(os.urandom(8), "little")),
        "initial_seed": lambda: OPS.initial_seed(OPS.current_device()) % 2**64,
        "get_rng_state": lambda device=devices.type: OPS.get_rng_state(devices.checked(device)),
        "set_rng_state": set_rng_state,
        "get_rng_state_all": lambda: [OPS.get_rng_state(i) for i in range(devices.count)],
        "set_rng_state_all": set_rng_state_all,
    }


def _memory(devices: Devices, total_memory: int) -> dict:
    """The bytes a device holds now and at its peak (no cache: reserved is allocated)."""

    def memory_allocated(device=None) -> int:
        return OPS.memory_stats(devices.checked(device))[0]

    def max_memory_allocated(device=None) -> int:
        return OPS.memory_stats(devices.checked(device))[1]

    def memory_stats(device=None) -> dict:
        current, peak, allocations, frees = OPS.memory_stats(devices.checked(device))
        return {
            "allocated_bytes.all.current": current,
            "allocated_bytes.all.peak": peak,
            "reserved_bytes.all.current": current,
            "reserved_bytes.all.peak": peak,
            "allocation.all.allocated": allocations,
            "allocation.all.freed": frees,
        }

    def reset_peak_memory_stats(device=None) -> None:
        OPS.reset_peak(devices.checked(device))

    return {
        "empty_cache": _nothing,
        "memory_allocated": memory_allocated,
        "max_memory_allocated": max_memory_allocated,
        "memory_reserved": memory_allocated,
        "max_memory_reserved": max_memory_allocated,
        "memory_stats": memory_stats,
        "reset_peak_memory_stats": reset_peak_memory_stats,
        "reset_max_memory_allocated": reset_peak_memory_stats,
        "mem_get_info": lambda device=None: (total_memory - memory_allocated(device), total_memory),
    }


def _properties(devices: Devices, vendor: Vendor) -> dict:
    """What the device is: its name, memory and capability, as the vendor reports them."""

    def get_device_capability(device=None):
        devices.checked(device)
        if vendor.capability is None:  # torch_npu's answer, warning included
            warnings.warn(f"torch.{devices.type}.get_device_capability isn't implemented!", stacklevel=2)
        return vendor.capability

    def get_device_properties(device=None):
        devices.checked(device)
        return types.SimpleNamespace(
            name=vendor.device_name,
            total_memory=vendor.total_memory,
            major=(vendor.capability or (0, 0))[0],
            minor=(vendor.capability or (0, 0))[1],
            multi_processor_count=1,
        )

    return {
        "get_device_name": lambda device=None: get_device_properties(device).name,
        "get_device_properties": get_device_properties,
        "get_device_capability": get_device_capability,
        "is_bf16_supported": lambda including_emulation=True: True,
    }


def _events(devices: Devices) -> dict:
    """Events, which time with the host clock (in C++): work on this device is synchronous."""

    class Event:
        """`torch.npu.Event` over a torch.Event of this device type (timing from the device guard, in ms).

        Composed, not derived: torch.Event.elapsed_time accepts only torch.Event itself."""

        def __init__(self, enable_timing=False, blocking=False, interprocess=False):
            self._event = torch.Event(
                device=devices.type, enable_timing=enable_timing, blocking=blocking, interprocess=interprocess
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

    return {"Event": Event}


def _streams(devices: Devices) -> dict:
    """Streams: work on this device is synchronous, so every stream is always done."""

    class Stream(torch.Stream):
        """`torch.npu.Stream`."""

        def __new__(cls, device=None, priority=0, **kwargs):
            if kwargs:
                return super().__new__(cls, **kwargs)
            return super().__new__(cls, device=torch.device(devices.type, devices.index(device)), priority=priority)

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
        return Stream(devices.checked(device))

    def stream(s):
        return contextlib.nullcontext(s)

    return {
        "Stream": Stream,
        "stream": stream,
        "current_stream": current_stream,
        "default_stream": current_stream,
    }


def _amp(device_type: str) -> dict:
    """`torch.npu.amp`, and what torch.autocast asks a privateuse1 module for."""

    class amp:  # noqa: N801 - a namespace, as torch.npu.amp is a module
        class autocast(torch.autocast):  # noqa: N801
            def __init__(self, enabled=True, dtype=torch.float16, cache_enabled=True):
                super().__init__(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

        class GradScaler(torch.amp.GradScaler):
            def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                         enabled=True):
                super().__init__(device_type, init_scale, growth_factor, backoff_factor, growth_interval, enabled)

    return {"amp": amp, "get_amp_supported_dtype": lambda: [torch.float16, torch.bfloat16]}
