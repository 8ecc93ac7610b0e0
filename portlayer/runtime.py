"""Resolve the backend once, then bind every API name to the backend's own function.

After binding, `portlayer.synchronize` *is* `torch.npu.synchronize` (or a host stand-in), stored in the
`portlayer` module's namespace: a call through portlayer costs what the direct call costs.
"""

from __future__ import annotations

import atexit
import functools
import sys
from typing import Any

from portlayer import amp, determinism, generators, rank_device, reducers
from portlayer.api import MIRRORED
from portlayer.backends import Backend
from portlayer.selection import Selection, select
from portlayer.stand_ins import FALLBACKS

_selection: Selection | None = None


def _mirrored(backend: Backend, module) -> dict[str, Any]:
    api = {}
    for name in MIRRORED:
        override = backend.overrides.get(name)
        if override is not None:
            api[name] = override(module)
        elif name not in backend.host_fallbacks and hasattr(module, name):
            api[name] = getattr(module, name)
        else:
            api[name] = FALLBACKS[name](backend, module)
    return api


def _index(device, current_device) -> int:
    import torch

    if isinstance(device, int):
        return device
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        return current_device() if device.index is None else device.index
    raise TypeError(f"expected a device index, a torch.device or a device string, got {device!r}")


def _type_of(value) -> str | None:
    """The device type `value` names: a tensor's or module's device, a torch.device, "npu:1"; None
    when it names none."""
    import torch

    if isinstance(value, torch.device):
        return value.type
    if isinstance(value, str):
        return value.split(":", 1)[0]
    device = getattr(value, "device", None)  # a tensor (a module has no single device)
    return device.type if isinstance(device, torch.device) else None


def _is_accelerator(backend: Backend):
    """`is_accelerator(x)`: the codemod's "is this the accelerator?" (`x.is_cuda`, `device_type ==
    "cuda"`, `"cuda" in device`). False on the cpu backend, as torch.cuda answers without CUDA; on an
    accelerator, True for its own type, for "cuda" (a CUDA script's own word for it) and for an index."""
    if not backend.is_accelerator:
        return lambda value: False
    own = frozenset({backend.device_type, "cuda"})

    def is_accelerator(value) -> bool:
        if isinstance(value, int) and not isinstance(value, bool):
            return value >= 0
        return _type_of(value) in own

    return is_accelerator


def _devices(backend: Backend, current_device) -> dict[str, Any]:
    import torch

    if not backend.is_accelerator:
        cpu = torch.device("cpu")

        def device(index=None) -> torch.device:
            return cpu

        def ddp_device_ids(device_or_index) -> None:
            return None

        return {"device": device, "ddp_device_ids": ddp_device_ids, "is_accelerator": _is_accelerator(backend)}

    device_type = backend.device_type
    by_index: dict[Any, torch.device] = {}

    def device(index=None) -> torch.device:
        if index is None:
            index = current_device()
        try:
            return by_index[index]
        except KeyError:
            by_index[index] = made = torch.device(device_type, _index(index, current_device))
            return made

    def ddp_device_ids(device_or_index) -> list[int]:
        if isinstance(device_or_index, (list, tuple)):
            return [_index(each, current_device) for each in device_or_index]
        return [_index(device_or_index, current_device)]

    return {"device": device, "ddp_device_ids": ddp_device_ids, "is_accelerator": _is_accelerator(backend)}


def build(selection: Selection) -> dict[str, Any]:
    backend, module = selection.backend, selection.module
    api = _mirrored(backend, module)
    api.update(amp.build(backend))
    api.update(generators.build(backend, module))
    api.update(_devices(backend, api["current_device"]))
    if backend.is_accelerator:
        index_of = functools.partial(_index, current_device=api["current_device"])
        api["set_device"] = rank_device.checked(backend, api["set_device"], api["device_count"], index_of)

    def set_deterministic(on: bool = True, warn_only: bool = False) -> None:
        determinism.set_deterministic(backend, on, warn_only)

    api.update(
        backend=lambda: backend,
        device_type=lambda: backend.device_type,
        device_module=lambda: module,
        dist_backend=lambda: backend.dist_backend,
        visible_devices_env=lambda: backend.visible_devices_env,
        set_deterministic=set_deterministic,
    )
    return api


def activate(name: str | None = None) -> Backend:
    """Select a backend (`name`, else `PORTLAYER_BACKEND`, else probing) and bind portlayer's API to it."""
    global _selection
    selection = select(name)  # imports torch
    if _selection is None:
        # DDP models a script never freed: their reducers (and process groups) go before the interpreter
        # finalises. Registered after torch's own exit hook (which its C++ registers on import), so it runs
        # first: a reducer freed after that hook aborts a gloo rank now and then (1 run in 5 of pytorch/
        # examples' ddp/example.py, tests/run_after_migrate/torch_target_exit).
        atexit.register(reducers.release)
    namespace = vars(sys.modules["portlayer"])
    # Re-activating the backend already bound keeps its functions: `portlayer.torch.cuda` and names taken
    # with `from portlayer import x` stay the very objects `portlayer.*` holds.
    if not _binds(_selection, selection):
        namespace.update(build(selection))
    _drop_lazy_lookup(namespace)
    _selection = selection
    return selection.backend


def _binds(bound: Selection | None, selection: Selection) -> bool:
    return bound is not None and bound.backend is selection.backend and bound.module is selection.module


def _drop_lazy_lookup(namespace: dict) -> None:
    """Remove the package's `__getattr__`, now that every API name is bound.

    CPython specialises attribute lookups only on modules without `__getattr__`: with it gone,
    `portlayer.synchronize` costs what `torch.cuda.synchronize` costs.
    """
    namespace.pop("__getattr__", None)


def selection() -> Selection:
    if _selection is None:
        activate()
    assert _selection is not None
    return _selection
