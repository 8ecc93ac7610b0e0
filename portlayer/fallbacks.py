"""What each mirrored name does on a backend whose device module lacks it.

RNG names fall back to torch's global generator (which seeds every device); memory statistics report 0
(the backend keeps none); streams and events become their synchronous host stand-ins.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType, SimpleNamespace
from typing import Any

from portlayer import host
from portlayer.api import RNG
from portlayer.backends.base import Backend


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
    "mem_get_info": lambda backend, module: host.memory_info,
    "get_device_name": lambda backend, module: lambda device=None: backend.name,
    "get_device_properties": _properties,
    "get_device_capability": lambda backend, module: lambda device=None: (0, 0),
    "is_bf16_supported": lambda backend, module: _bf16_probe(backend),
    "Event": lambda backend, module: host.WallClockEvent,
    "Stream": lambda backend, module: host.HostStream,
    "stream": lambda backend, module: host.stream,
    "current_stream": lambda backend, module: host.current_stream,
    "default_stream": lambda backend, module: host.current_stream,
}
