"""The record that describes one backend. Adding a backend is adding one of these (see `__init__.py`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class EnvAlias:
    """A CUDA/NCCL environment variable and the backend's own variable that means the same thing."""

    source: str
    target: str
    # Turns the source's value into the target's, where the units differ.
    convert: Callable[[str], str] | None = None


def _device_count(module: ModuleType) -> int:
    return int(module.device_count())


@dataclass(frozen=True)
class Backend:
    """One accelerator family. `name` is also its torch device type ("npu" in `torch.device("npu", 0)`)."""

    name: str
    dist_backend: str
    visible_devices_env: str
    # The out-of-tree plugin that registers the device with torch, if any ("torch_npu").
    vendor_module: str | None = None
    install_hint: str = field(default="", repr=False)
    is_accelerator: bool = True
    env_aliases: tuple[EnvAlias, ...] = field(default=(), repr=False)
    # Set (when unset) by `set_deterministic(True)`; read by the runtime or the collective at start-up.
    deterministic_env: Mapping[str, str] = field(default_factory=dict, repr=False)
    # Extra switches for `set_deterministic`, given the flag (cudnn's, for instance).
    deterministic_hook: Callable[[bool], None] | None = field(default=None, repr=False)
    # How many devices the backend sees, without initialising one.
    count_devices: Callable[[ModuleType], int] = field(default=_device_count, repr=False)
    # API names whose device-module attribute is missing or wrong here: name -> builder(device_module).
    overrides: Mapping[str, Callable[[ModuleType], Any]] = field(default_factory=dict, repr=False)

    @property
    def device_type(self) -> str:
        return self.name

    def visible_devices(self) -> str | None:
        return os.environ.get(self.visible_devices_env)

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "device_type": self.device_type,
            "dist_backend": self.dist_backend,
            "visible_devices_env": self.visible_devices_env,
            "vendor_module": self.vendor_module,
        }
