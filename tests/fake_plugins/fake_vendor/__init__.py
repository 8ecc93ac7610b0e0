"""A stand-in vendor plugin: registers with torch the way torch_npu and torch_musa do, and computes.

Tensors really live on `npu:N` / `musa:N` (torch's PrivateUse1 slot, renamed); their memory and kernels
come from the cpu (`device.cpp`, compiled on first use by `build.py`). The device module carries the
vendor's names (`device_module.py`); the collective (`hccl`, `mccl`) runs gloo underneath
(`collective.py`).

The "host" has `FAKE_<DEVICE>_DEVICE_COUNT` devices (default 2); the vendor's visible-devices variable
picks among them as on the real hardware (`ASCEND_RT_VISIBLE_DEVICES=1`: one device, and it is npu:0).
Every call to a device-module function is recorded in the plugin's `CALLS` as (name, args, kwargs), so
tests can tell what portlayer dispatched to; `ENV_AT_IMPORT` keeps the environment at import time,
because the real plugins read their variables then. With FAKE_DEVICE_MEMORY_LOG set, each process writes
what it allocated on the device at exit (`memory_log.py`), so a test can tell a port that trained on the
device from one that fell back to the cpu.
"""

from __future__ import annotations

import atexit
import os
import sys
import types

import torch

from fake_vendor import build

WATCHED_ENV = (
    "CUDA_VISIBLE_DEVICES",
    "ASCEND_RT_VISIBLE_DEVICES",
    "MUSA_VISIBLE_DEVICES",
    "HCCL_SOCKET_IFNAME",
    "HCCL_SOCKET_FAMILY",
    "HCCL_BUFFSIZE",
    "MCCL_SOCKET_IFNAME",
)


def visible_count(physical: int, visible: str | None) -> int:
    """How many devices a process sees: the visible-devices list up to its first invalid entry."""
    if visible is None:
        return physical
    seen: list[int] = []
    for entry in visible.split(","):
        entry = entry.strip()
        if not entry.isdigit() or int(entry) >= physical or int(entry) in seen:
            break
        seen.append(int(entry))
    return len(seen)


def install(
    plugin: types.ModuleType,
    vendor,
    collective: str,
    visible_env: str,
    module: types.ModuleType | None = None,
) -> None:
    """Register the stand-in device under `vendor.device_type`; `module` is the device module to fill (the
    plugin itself for torch_musa, whose package is `torch.musa`; a new `<plugin>.<type>` otherwise)."""
    from fake_vendor import collective as collectives
    from fake_vendor import device_module, kernels, memory_log

    plugin.ENV_AT_IMPORT = {name: os.environ.get(name) for name in WATCHED_ENV}
    torch.ops.load_library(str(build.library()))
    physical = int(os.environ.get(f"FAKE_{vendor.device_type.upper()}_DEVICE_COUNT", "2"))
    count = visible_count(physical, os.environ.get(visible_env))
    torch.ops.fake_device.set_device_count(count)
    memory_log.record_at_exit(vendor.device_type, count)

    calls: list = []

    def recorded(name, function):
        def call(*args, **kwargs):
            calls.append((name, args, kwargs))
            return function(*args, **kwargs)

        call.__name__ = name
        return call

    if module is None:
        module = types.ModuleType(f"{plugin.__name__}.{vendor.device_type}")
        setattr(plugin, vendor.device_type, module)
        sys.modules[module.__name__] = module
    for name, value in device_module.build(vendor, count).items():
        is_function = callable(value) and not isinstance(value, type)
        setattr(module, name, recorded(name, value) if is_function and not name.startswith("_") else value)
    for name in ("Event", "Stream"):
        setattr(module, name, _recording_class(getattr(module, name), name, calls))
    plugin.CALLS = calls

    # The three registrations a vendor plugin makes (README.md "Tests"), as the real plugins make them.
    torch.utils.rename_privateuse1_backend(vendor.device_type)
    torch._register_device_module(vendor.device_type, module)
    collectives.register(collective, vendor.device_type)
    torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_storage=True)
    kernels.register()
    atexit.register(_release_the_last_backward, vendor.device_type, count)


def _release_the_last_backward(device_type: str, count: int) -> None:
    """Let each autograd device thread drop the last backward it ran, before the interpreter finalises.

    Without this, a process that exits right after a backward on the device aborts now and then with
    "terminate called without an active exception" (exit 134). The cause is torch's, not the device's:
    in recent torch (2.13 here) every `backward()` stashes a `contextvars.Context` in the thread-local state that the
    backward's GraphTask copies (torch/autograd/graph.py `_engine_run_backward`, pytorch/pytorch#173568).
    On a device, the backward runs on the device's autograd thread, which can hold the GraphTask's last
    reference after `backward()` has returned (the race pytorch/pytorch#180700 describes); freeing it
    there needs the GIL, and once the main thread is finalising, Python ends a thread that asks for the GIL
    with pthread_exit, whose unwinding through a noexcept destructor calls std::terminate. The cpu runs
    its backward on the caller's thread and never meets it.

    atexit handlers run before finalisation, and a device thread takes its tasks one at a time, freeing
    the previous GraphTask before it takes the next: one tiny backward per device, run through the engine
    directly (no Context stashed, so freeing it needs no GIL), returns only after each thread has let go.
    """
    engine = torch.autograd.Variable._execution_engine
    with torch.enable_grad():
        for index in range(count):
            # A device that never allocated never ran a backward; leave it untouched, so that what the
            # process allocated there (memory_log.py) stays what the program allocated.
            if torch.ops.fake_device.memory_stats(index)[2] == 0:
                continue
            leaf = torch.ones(1, device=torch.device(device_type, index), requires_grad=True)
            out = leaf * 1
            engine.run_backward((out,), (torch.ones_like(out),), False, False, (), True, True)


def _recording_class(cls: type, name: str, calls: list) -> type:
    def __new__(subclass, *args, **kwargs):
        calls.append((name, args, kwargs))
        if cls.__new__ is object.__new__:
            return object.__new__(subclass)
        return cls.__new__(subclass, *args, **kwargs)

    return type(cls.__name__, (cls,), {"__new__": __new__, "__module__": cls.__module__})
