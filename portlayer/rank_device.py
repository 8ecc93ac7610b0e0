"""A rank's device that this process cannot see, named in one line instead of the runtime's error.

torchrun starting more ranks on a node than it has devices gives rank 1 of a one-GPU host `set_device(1)`, and
CUDA answers "invalid device ordinal" (other runtimes in their own words), from deep inside the first call that
touches the device. `set_device` is where a rank says which device is its own, so the check sits there: one
comparison, once per process.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from portlayer.backends.base import Backend
from portlayer.errors import PortlayerError


def checked(backend: Backend, set_device: Callable, device_count: Callable, index_of: Callable) -> Callable:
    """`set_device` that raises a one-line PortlayerError for an index this process does not see (a negative
    one is torch's "leave it", passed on as it is)."""

    def checked_set_device(device) -> None:
        index = index_of(device)
        if index >= 0:
            count = device_count()
            if index >= count:
                raise PortlayerError(not_visible(backend, index, count))
        set_device(device)

    checked_set_device.__name__ = checked_set_device.__qualname__ = "set_device"
    checked_set_device.__doc__ = set_device.__doc__
    return checked_set_device


def not_visible(backend: Backend, index: int, count: int) -> str:
    """`local rank 1 asked for cuda:1, but this process sees 1 device (cuda:0; CUDA_VISIBLE_DEVICES=3): …`."""
    # The local rank is the device index a launcher hands out; portlayer's trainer puts the global one before it.
    local_rank = os.environ.get("LOCAL_RANK")
    who = "this process" if local_rank is None else f"local rank {local_rank}"
    kind = backend.device_type
    seen = f"{count} device{'s' if count != 1 else ''}"
    details = [] if count == 0 else [f"{kind}:0" if count == 1 else f"{kind}:0 to {kind}:{count - 1}"]
    visible = os.environ.get(backend.visible_devices_env)
    if visible is not None:
        details.append(f"{backend.visible_devices_env}={visible}")
    detail = f" ({'; '.join(details)})" if details else ""
    return (
        f"{who} asked for {kind}:{index}, but this process sees {seen}{detail}: "
        f"start at most {count} rank{'s' if count != 1 else ''} per node, or make more devices visible"
    )
