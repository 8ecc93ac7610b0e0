"""Which backend this process uses: `PORTLAYER_BACKEND` if set, else the first in the probe order that
sees a device. Probing imports only plugins that are installed and never initialises a device. The backend
table (with the out-of-tree records) is read here, on first selection."""

from __future__ import annotations

import importlib
import importlib.util
import os
from dataclasses import dataclass
from types import ModuleType

from portlayer import backends, environment
from portlayer.backends import Backend
from portlayer.errors import PortlayerError, first_line

ENV_VAR = "PORTLAYER_BACKEND"


@dataclass(frozen=True)
class Probe:
    backend: str
    available: bool
    detail: str


@dataclass(frozen=True)
class Selection:
    backend: Backend
    module: ModuleType
    reason: str
    probes: tuple[Probe, ...]
    env_applied: tuple[environment.AppliedVariable, ...]


def _registered(backend: Backend) -> bool:
    import torch

    return isinstance(getattr(torch, backend.name, None), ModuleType)


def module_installed(name: str) -> bool:
    """Whether `name` (dotted or not) can be imported, without importing it (only its parent packages)."""
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package of a dotted name is missing
        return False


def plugin_installed(backend: Backend) -> bool:
    if backend.vendor_module is None or _registered(backend):
        return True
    return module_installed(backend.vendor_module)


def device_module(backend: Backend) -> ModuleType:
    """The backend's `torch.cuda`-like module (`torch.npu`, …), importing its plugin when needed."""
    import torch

    if backend.vendor_module is not None and not _registered(backend):
        importlib.import_module(backend.vendor_module)
    if backend.collective_module is not None:
        importlib.import_module(backend.collective_module)
    return torch.get_device_module(backend.device_type)


def _probe(backend: Backend) -> tuple[Probe, ModuleType | None, tuple]:
    if not plugin_installed(backend):
        return Probe(backend.name, False, f"{backend.vendor_module} is not installed"), None, ()
    applied = environment.translate(backend)
    try:
        module = device_module(backend)
        count = backend.count_devices(module)
    except Exception as exc:  # a broken vendor install must not take the whole probe down
        environment.undo(applied)
        what = backend.vendor_module or f"torch.{backend.name}"
        return Probe(backend.name, False, f"{what} failed to load ({first_line(exc)})"), None, ()
    if count < 1:
        environment.undo(applied)
        return Probe(backend.name, False, "no device visible"), None, ()
    return Probe(backend.name, True, f"{count} device{'s' if count > 1 else ''}"), module, applied


def select(name: str | None = None) -> Selection:
    requested = (name or os.environ.get(ENV_VAR, "")).strip().lower()
    if requested:
        return _forced(requested, via=name is None)
    probes = []
    for backend in backends.PROBE_ORDER:
        probe, module, applied = _probe(backend)
        probes.append(probe)
        if probe.available:
            reason = "first backend in the probe order that sees a device"
            if not backend.is_accelerator:
                reason = "no accelerator found"
            return Selection(backend, module, reason, tuple(probes), applied)
    raise AssertionError("the cpu backend always probes available")  # pragma: no cover


def _forced(name: str, via: bool) -> Selection:
    origin = f"{ENV_VAR}={name}" if via else f"backend {name!r}"
    backend = backends.BY_NAME.get(name)
    if backend is None:
        choices = ", ".join(b.name for b in backends.PROBE_ORDER)
        raise PortlayerError(f"{origin} is not a backend portlayer knows; choose one of {choices}")
    probe, module, applied = _probe(backend)
    if not probe.available:
        if not plugin_installed(backend):
            raise PortlayerError(
                f"{origin} needs the {backend.vendor_module} package, which is not installed ({backend.install_hint})"
            )
        raise PortlayerError(f"{origin} cannot be used: {probe.detail}")
    return Selection(backend, module, f"forced by {origin}", (probe,), applied)
