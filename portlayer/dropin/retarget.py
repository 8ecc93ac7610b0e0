"""CUDA device and collective names, retargeted to the active backend.

The drop-in (`portlayer.torch`) and its process-wide patches run every device a CUDA script names through
one `Retarget`: `"cuda:1"` becomes `"npu:1"` on Ascend and `"cpu"` on the host (which has no device index),
`torch.device("cuda", 1)` becomes `torch.device("npu", 1)`, and `"nccl"` becomes `"hccl"`. A bare index
(`.to(local_rank)`) already means "the accelerator" to torch, so it is rewritten only on the host, where
torch has no accelerator to give it. Anything that names no CUDA device passes through untouched, so
retargeting twice changes nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from portlayer.backends import Backend

CUDA = "cuda"


def names_cuda(value: Any) -> bool:
    """Whether `value` is a device string or `torch.device` of type cuda (`"cuda"`, `"cuda:0"`)."""
    if value.__class__ is str:
        return value == CUDA or value.startswith("cuda:")
    return value.__class__ is torch.device and value.type == CUDA


class Retarget:
    """Rewrites CUDA names for `backend`. On the cuda backend there is nothing to rewrite (`identity`)."""

    def __init__(self, backend: Backend):
        self.backend = backend
        self.device_type = backend.device_type
        self.identity = backend.device_type == CUDA
        self.host = not backend.is_accelerator
        self._whole_backend = torch.device(backend.device_type)

    def wants(self, value: Any) -> bool:
        """Whether `value`, given where torch takes a device, must be rewritten here."""
        if self.identity:
            return False
        return names_cuda(value) or (self.host and value.__class__ is int)

    def device(self, device: torch.device) -> torch.device:
        if device.type != CUDA or self.identity:
            return device
        if self.host or device.index is None:
            return self._whole_backend
        return torch.device(self.device_type, device.index)

    def string(self, name: str) -> str:
        if self.identity or not names_cuda(name):
            return name
        if self.host:
            return self.device_type
        return self.device_type + name[len(CUDA) :]

    def any(self, value: Any) -> Any:
        """A device string, `torch.device` or (on the host) index naming cuda, retargeted; else unchanged."""
        if value.__class__ is str:
            return self.string(value)
        if value.__class__ is torch.device:
            return self.device(value)
        if self.host and value.__class__ is int:
            return self._whole_backend
        return value

    def destination(self, device: Any) -> torch.device:
        """Where `tensor.cuda(device)` moves to: an index, a device, a string, or None for the current one."""
        if device is None:
            return self.device(torch.device(CUDA))
        if isinstance(device, int):
            return self.device(torch.device(CUDA, device))
        return torch.device(self.any(device))

    def ddp_devices(self, devices: Any) -> Any:
        """`DistributedDataParallel`'s `device_ids` or `output_device`: the host takes none at all."""
        if devices is None or self.identity:
            return devices
        if self.host:
            return None
        if isinstance(devices, (list, tuple)):
            return [self.any(each) for each in devices]
        return self.any(devices)

    def dist_device(self, device_id: Any) -> Any:
        """`init_process_group(device_id=…)`: binds a process to an accelerator, so the host takes none."""
        if not self.wants(device_id):
            return device_id
        return None if self.host else self.any(device_id)

    def dist_backend(self, spec: Any) -> Any:
        """`"nccl"` -> the backend's collective; `"cpu:gloo,cuda:nccl"` -> each CUDA entry retargeted.

        Only the NCCL forms are rewritten: other collectives and None pass through, so a script that asks
        for `"gloo"` or `"hccl"` gets exactly that.
        """
        if self.identity or not isinstance(spec, str):
            return spec
        collective = self.backend.dist_backend
        if spec.lower() == "nccl":
            return collective
        if ":" not in spec:
            return spec
        pairs: dict[str, str] = {}
        for entry in spec.split(","):
            device_type, _, name = entry.strip().partition(":")
            if device_type == CUDA or name.lower() == "nccl":
                device_type, name = self.device_type, collective
            pairs.setdefault(device_type, name)
        return ",".join(f"{device_type}:{name}" for device_type, name in pairs.items())


def leading_device(function: Callable, retarget: Retarget, method: bool = False) -> Callable:
    """`function` with the device it takes first (after `self` for a `method`) or as `device=` retargeted.

    Wraps `Tensor.to` and `Module.to`, which run on every step: the check for a CUDA name is inlined and cheap.
    """
    wants, rewrite = retarget.wants, retarget.any
    first = 1 if method else 0

    @functools.wraps(function)
    def retargeted(*args, **kwargs):
        if len(args) > first and wants(args[first]):
            args = (*args[:first], rewrite(args[first]), *args[first + 1 :])
        if kwargs and "device" in kwargs and wants(kwargs["device"]):
            kwargs["device"] = rewrite(kwargs["device"])
        return function(*args, **kwargs)

    return retargeted
