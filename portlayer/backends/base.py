"""The record that describes one backend. Adding a backend is adding one of these (see docs/backends.md)."""

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
    # Whether the target reads the source's value as it is (None: any value). A value it does not take is
    # not carried over: the vendor ignores it, as it ignores the CUDA variable.
    accepts: Callable[[str], bool] | None = None

    def carries(self, value: str) -> bool:
        return self.accepts is None or self.accepts(value)


# The caching allocator settings torch's own parser shares with the vendors' (torch_npu's
# NPUAllocatorConfig, torch_musa's MUSAAllocatorConfig); `backend:cudaMallocAsync` and the like are CUDA's.
_SHARED_ALLOCATOR_SETTINGS = frozenset(
    {"max_split_size_mb", "garbage_collection_threshold", "roundup_power2_divisions", "expandable_segments"}
)


def shared_allocator_settings(value: str) -> bool:
    """`PYTORCH_CUDA_ALLOC_CONF`'s value names only settings the vendors' allocators read too."""
    keys = {entry.split(":", 1)[0].strip() for entry in value.split(",") if entry.strip()}
    return keys <= _SHARED_ALLOCATOR_SETTINGS


@dataclass(frozen=True)
class VendorApi:
    """The plugin spells torch.cuda's API as its own: `torch.<name>.X` for `torch.cuda.X`, `torch.<name>.amp.X`
    for `torch.cuda.amp.X`. A backend with one is a target of `portlayer migrate --target <name>`."""

    # torch.backends.cudnn flags the vendor has under another name: flag -> expression (`{torch}` is torch).
    cudnn_flags: Mapping[str, str] = field(default_factory=dict)


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
    # A module to import after the plugin so that `init_process_group(dist_backend)` finds the collective.
    collective_module: str | None = field(default=None, repr=False)
    is_accelerator: bool = True
    # The dispatch key the plugin registers its kernels under (preflight asks the dispatcher about it):
    # PrivateUse1, the key torch reserves for out-of-tree devices, unless torch has a key of the device's own.
    dispatch_key: str = field(default="PrivateUse1", repr=False)
    # dtype (as torch prints it, without "torch.") -> why the device lacks or emulates it.
    dtype_risks: Mapping[str, str] = field(default_factory=dict, repr=False)
    # The vendor's counterpart of nvidia-smi, as a user would type it.
    smi_command: str | None = field(default=None, repr=False)
    # How the plugin spells torch.cuda's API; None: not a target of `portlayer migrate` (neutral code runs).
    vendor_api: VendorApi | None = field(default=None, repr=False)
    env_aliases: tuple[EnvAlias, ...] = field(default=(), repr=False)
    # Set (when unset) by `set_deterministic(True)`; read by the runtime or the collective at start-up.
    deterministic_env: Mapping[str, str] = field(default_factory=dict, repr=False)
    # Extra switches for `set_deterministic`, given the flag (cudnn's, for instance).
    deterministic_hook: Callable[[bool], None] | None = field(default=None, repr=False)
    # How many devices the backend sees, without initialising one.
    count_devices: Callable[[ModuleType], int] = field(default=_device_count, repr=False)
    # API names whose device-module attribute is missing or wrong here: name -> builder(device_module).
    overrides: Mapping[str, Callable[[ModuleType], Any]] = field(default_factory=dict, repr=False)
    # API names the device module has but answers unlike torch.cuda: portlayer's fallback (stand_ins.py) instead.
    host_fallbacks: frozenset[str] = field(default=frozenset(), repr=False)
    # DeepSpeed's name for its own accelerator for this device (a `DS_ACCELERATOR` value, in its
    # SUPPORTED_ACCELERATOR_LIST). None: DeepSpeed has none, so neither its `get_accelerator()` nor its launcher
    # finds the device; portlayer's adapter (strategies/portlayer_accelerator.py) answers from this record.
    deepspeed_accelerator: str | None = field(default=None, repr=False)
    # Variables the vendor's software stack reads from a configured host: name -> what sets it there. Checked
    # before that stack starts, so that a missing one is one clear line rather than the stack's KeyError.
    required_env: Mapping[str, str] = field(default_factory=dict, repr=False)
    # Whether torch.optim's fused kernels (`AdamW(fused=True)`) run on the device: torch has them for cuda, xpu,
    # mps, hpu and the cpu; a plugin registers its own or not (the trainer then uses foreach, which runs anywhere).
    fused_optimizers: bool = field(default=False, repr=False)
    # Prefixes of the variables a multi-node launcher forwards to the other nodes (DeepSpeed's `export_envs`):
    # the collective's settings and the vendor runtime's. Read where DeepSpeed has no accelerator of its own.
    launcher_env_prefixes: tuple[str, ...] = field(default=(), repr=False)

    @property
    def device_type(self) -> str:
        return self.name

    @property
    def is_plugin(self) -> bool:
        """Whether an out-of-tree plugin registers the device (its kernels are the plugin's, not torch's)."""
        return self.vendor_module is not None

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
