"""Builds a fake vendor plugin that registers with torch the way torch_npu and torch_musa do.

It has no kernels: it exists so tests can check what portlayer dispatches to. Every device-module function
records its call in `CALLS` as (name, args, kwargs). `FAKE_<DEVICE>_DEVICE_COUNT` sets how many devices
it claims (default 2). The environment at import time is kept in `ENV_AT_IMPORT`, because the real
plugins read their variables then.
"""

from __future__ import annotations

import contextlib
import os
import sys
import types

import torch
import torch.distributed as dist

WATCHED_ENV = (
    "CUDA_VISIBLE_DEVICES",
    "ASCEND_RT_VISIBLE_DEVICES",
    "MUSA_VISIBLE_DEVICES",
    "HCCL_SOCKET_IFNAME",
    "HCCL_SOCKET_FAMILY",
    "HCCL_BUFFSIZE",
    "MCCL_SOCKET_IFNAME",
)


def install(plugin: types.ModuleType, device_type: str, collective: str, device_name: str) -> None:
    calls: list = []
    state = {"device": 0}
    count = int(os.environ.get(f"FAKE_{device_type.upper()}_DEVICE_COUNT", "2"))

    def recorded(name, result=None):
        def call(*args, **kwargs):
            calls.append((name, args, kwargs))
            return result(*args, **kwargs) if callable(result) else result

        call.__name__ = name
        return call

    def set_device(device):
        state["device"] = device.index if isinstance(device, torch.device) else int(device)

    class Event:
        def __init__(self, *args, **kwargs):
            calls.append(("Event", args, kwargs))

        record = recorded("Event.record")
        synchronize = recorded("Event.synchronize")
        elapsed_time = recorded("Event.elapsed_time", 1.5)

    class Stream:
        def __init__(self, *args, **kwargs):
            calls.append(("Stream", args, kwargs))

        synchronize = recorded("Stream.synchronize")
        wait_stream = recorded("Stream.wait_stream")

    module = types.ModuleType(f"{plugin.__name__}.{device_type}")
    functions = {
        "is_available": recorded("is_available", count > 0),
        "device_count": recorded("device_count", count),
        "current_device": recorded("current_device", lambda: state["device"]),
        "set_device": recorded("set_device", set_device),
        "synchronize": recorded("synchronize"),
        "manual_seed": recorded("manual_seed"),
        "manual_seed_all": recorded("manual_seed_all"),
        "seed": recorded("seed"),
        "initial_seed": recorded("initial_seed", 7),
        "get_rng_state": recorded("get_rng_state", lambda device=None: torch.zeros(8, dtype=torch.uint8)),
        "set_rng_state": recorded("set_rng_state"),
        "empty_cache": recorded("empty_cache"),
        "memory_allocated": recorded("memory_allocated", 1024),
        "max_memory_allocated": recorded("max_memory_allocated", 2048),
        "memory_reserved": recorded("memory_reserved", 4096),
        "max_memory_reserved": recorded("max_memory_reserved", 8192),
        "reset_peak_memory_stats": recorded("reset_peak_memory_stats"),
        "mem_get_info": recorded("mem_get_info", (1 << 30, 1 << 31)),
        "get_device_name": recorded("get_device_name", lambda device=None: device_name),
        "get_device_properties": recorded("get_device_properties", types.SimpleNamespace(name=device_name)),
        "get_device_capability": recorded("get_device_capability", (9, 1)),
        "is_bf16_supported": recorded("is_bf16_supported", True),
        "stream": recorded("stream", lambda stream: contextlib.nullcontext(stream)),
        "current_stream": recorded("current_stream", lambda device=None: Stream()),
        "default_stream": recorded("default_stream", lambda device=None: Stream()),
        # What torch.autocast asks a privateuse1 module for.
        "get_amp_supported_dtype": lambda: [torch.float16, torch.bfloat16],
        "is_initialized": lambda: True,
        "_is_in_bad_fork": lambda: False,
    }
    vars(module).update(functions, Event=Event, Stream=Stream)

    plugin.CALLS = calls
    plugin.ENV_AT_IMPORT = {name: os.environ.get(name) for name in WATCHED_ENV}
    setattr(plugin, device_type, module)
    sys.modules[module.__name__] = module

    # The three registrations DESIGN.md names, as the real plugins make them.
    torch.utils.rename_privateuse1_backend(device_type)
    torch._register_device_module(device_type, module)
    dist.Backend.register_backend(
        collective,
        lambda store, rank, size, timeout: dist.ProcessGroupGloo(store, rank, size, timeout),
        devices=[device_type],
    )
    torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_storage=False)
