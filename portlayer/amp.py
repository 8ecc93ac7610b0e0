"""`autocast` and `GradScaler` with `torch.cuda.amp`'s signatures, bound to the active device type."""

from __future__ import annotations

from portlayer.backends.base import Backend


def build(backend: Backend) -> dict:
    import torch

    device_type = backend.device_type

    torch_autocast_init = torch.autocast.__init__

    class autocast(torch.autocast):
        """`torch.autocast` on the active backend; `dtype=None` takes the backend's default."""

        def __init__(self, enabled: bool = True, dtype=None, cache_enabled=None):
            # A direct positional call: this sits on the hot path of every autocast region.
            torch_autocast_init(self, device_type, dtype, enabled, cache_enabled)

    class GradScaler(torch.amp.GradScaler):
        """`torch.amp.GradScaler` on the active backend."""

        def __init__(
            self,
            init_scale: float = 2.0**16,
            growth_factor: float = 2.0,
            backoff_factor: float = 0.5,
            growth_interval: int = 2000,
            enabled: bool = True,
        ):
            super().__init__(
                device_type,
                init_scale=init_scale,
                growth_factor=growth_factor,
                backoff_factor=backoff_factor,
                growth_interval=growth_interval,
                enabled=enabled,
            )

    return {"autocast": autocast, "GradScaler": GradScaler}
