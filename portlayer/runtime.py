"""Resolve the backend once, then bind every API name to the backend's own function.

After binding, `portlayer.synchronize` *is* `torch.npu.synchronize` (or a host stand-in), stored in the
`portlayer` module's namespace: a call through portlayer costs what the direct call costs.
"""

from __future__ import annotations

import sys
from typing import Any

from portlayer import amp, determinism
from portlayer.api import MIRRORED
from portlayer.backends import Backend
from portlayer.fallbacks import FALLBACKS
from portlayer.selection import Selection, select

_selection: Selection | None = None


def _mirrored(backend: Backend, module) -> dict[str, Any]:
    api = {}
    for name in MIRRORED:
        override = backend.overrides.get(name)
        if override is not None:
            api[name] = override(module)
        elif hasattr(module, name):
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


def _devices(backend: Backend, current_device) -> dict[str, Any]:
    import torch

    if not backend.is_accelerator:
        cpu = torch.device("cpu")

        def device(index=None) -> torch.device:
            return cpu

        def ddp_device_ids(device_or_index) -> None:
            return None

        return {"device": device, "ddp_device_ids": ddp_device_ids}

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

    return {"device": device, "ddp_device_ids": ddp_device_ids}


def build(selection: Selection) -> dict[str, Any]:
    backend, module = selection.backend, selection.module
    api = _mirrored(backend, module)
    api.update(amp.build(backend, module))
    api.update(_devices(backend, api["current_device"]))

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
    selection = select(name)
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
    """Bind the remaining lazy names and remove the package's `__getattr__`.

    CPython specialises attribute lookups only on modules without `__getattr__`: with it gone,
    `portlayer.synchronize` costs what `torch.cuda.synchronize` costs.
    """
    from portlayer.dropin import patches as patching

    namespace.update({name: getattr(patching, name) for name in namespace["_PATCHING"]})
    namespace.pop("__getattr__", None)


def selection() -> Selection:
    if _selection is None:
        activate()
    assert _selection is not None
    return _selection
