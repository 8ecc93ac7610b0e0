"""What each side of a comparison ran on: backend, device, dtype, torch. Printed above every table."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch


@dataclass(frozen=True)
class Side:
    backend: str
    device: str
    device_name: str
    dtype: str
    torch: str

    @classmethod
    def active(cls, device: torch.device, dtype: torch.dtype) -> Side:
        """The active portlayer backend's device, or the host cpu when that is what `device` is."""
        import portlayer

        if device.type == "cpu":
            backend, name = "cpu", "cpu"
            if portlayer.device_type() == "cpu":
                name = portlayer.get_device_name()
        else:
            backend, name = portlayer.backend().name, portlayer.get_device_name(device)
        return cls(backend, str(device), name, dtype_name(dtype), torch.__version__)

    @classmethod
    def from_dict(cls, data: dict) -> Side:
        return cls(**{key: str(data[key]) for key in cls.__dataclass_fields__})

    def as_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        return f"{self.backend} {self.device} ({self.device_name}) {self.dtype}, torch {self.torch}"


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def parse_dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"not a floating-point dtype: {name!r}")
    return dtype
