"""The targets as data: how each spells a device, a device type, a collective backend, a torch.cuda
name, and which import it needs. `neutral` and `torch` are portlayer's and upstream torch's API; every
backend whose record has a `vendor_api` (npu, musa) is a target too, its facts taken from that record.

Templates are Python expressions; `{torch}` is the name the module imports torch under and `{index}`
the device index expression.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from portlayer.migrate import cuda_api

from portlayer.backends import PROBE_ORDER, Backend
from portlayer.environment import aliases

_ACCELERATOR = "{torch}.accelerator.current_accelerator()"


@dataclass(frozen=True)
class Target:
    name: str
    # The module the rewritten code needs ("portlayer", "torch_npu"), or None.
    runtime_import: str | None
    # Expressions for a device type string, a device (optionally indexed) and the collective backend.
    # None: the target spells them as string literals (`vendor` below).
    device_type: str | None
    device: str | None
    indexed_device: str | None
    dist_backend: str | None
    # Where a torch.cuda name the target mirrors lives: "{name}" is filled with the name.
    mirrored: str
    device_module: str
    amp: str = "portlayer.{name}"
    # For vendor targets: the device type ("npu"), collective ("hccl") and its name for env vars.
    vendor: str | None = None
    vendor_dist_backend: str | None = None
    # CUDA/NCCL variable -> (vendor variable, whether the value's units differ).
    env: Mapping[str, tuple[str, bool]] = field(default_factory=dict)
    # torch.backends.cudnn flag -> the vendor's equivalent expression.
    cudnn_flags: Mapping[str, str] = field(default_factory=dict)
    float64_native: bool = True

    @property
    def is_vendor(self) -> bool:
        return self.vendor is not None

    def api(self, name: str) -> str | None:
        """The expression template for `torch.cuda.<name>` on this target, or None when it has none."""
        if name in cuda_api.TORCH_GENERIC:
            return "{torch}." + cuda_api.TORCH_GENERIC[name]
        if name in cuda_api.AMP_NAMES:
            # torch: the Amp rule rewrites calls (the device type becomes an argument); nothing else.
            return None if self.name == "torch" else self.amp.replace("{name}", name[len("amp."):])
        if self.name == "torch":
            if name in cuda_api.ACCELERATOR:
                return "{torch}.accelerator." + cuda_api.ACCELERATOR[name]
            if name in cuda_api.PORTLAYER or name in cuda_api.DEVICE_MODULE:
                return self.device_module + "." + name
            return None
        if name in cuda_api.PORTLAYER:
            return self.mirrored.format(name=name, torch="{torch}")
        if name in cuda_api.DEVICE_MODULE:
            return self.device_module + "." + name
        return None


def _vendor(backend: Backend) -> Target:
    name = backend.name
    env = {alias.source: (alias.target, alias.convert is not None) for alias in aliases(backend)}
    return Target(
        name=name,
        runtime_import=backend.vendor_module,
        device_type=None,
        device=None,
        indexed_device=None,
        dist_backend=None,
        mirrored="{torch}." + name + ".{name}",
        device_module="{torch}." + name,
        amp="{torch}." + name + ".amp.{name}",
        vendor=name,
        vendor_dist_backend=backend.dist_backend,
        env=env,
        cudnn_flags=backend.vendor_api.cudnn_flags,
        float64_native="float64" not in backend.dtype_risks,
    )


_TABLE = {
    "neutral": Target(
        name="neutral",
        runtime_import="portlayer",
        device_type="portlayer.device_type()",
        device="portlayer.device()",
        indexed_device="portlayer.device({index})",
        dist_backend="portlayer.dist_backend()",
        mirrored="portlayer.{name}",
        device_module="portlayer.device_module()",
    ),
    "torch": Target(
        name="torch",
        runtime_import=None,
        device_type=_ACCELERATOR + ".type",
        device=_ACCELERATOR,
        indexed_device="{torch}.device(" + _ACCELERATOR + ".type, {index})",
        dist_backend="{torch}.distributed.get_default_backend_for_device(" + _ACCELERATOR + ")",
        mirrored="{torch}.get_device_module().{name}",
        device_module="{torch}.get_device_module()",
    ),
    **{backend.name: _vendor(backend) for backend in PROBE_ORDER if backend.vendor_api is not None},
}
TARGETS = tuple(_TABLE)


def target_named(name: str) -> Target:
    try:
        return _TABLE[name]
    except KeyError:
        raise ValueError(f"unknown target {name!r}: choose one of {', '.join(TARGETS)}") from None
