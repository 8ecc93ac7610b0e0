"""`portlayer.torch.cuda`: a module with `torch.cuda`'s names that answers for the active backend.

Name by name: portlayer's runtime API where it has the name (`synchronize` *is* `portlayer.synchronize`,
already bound to `torch.npu.synchronize` or its host stand-in), then the vendor's device module
(`torch.npu.memory_summary`), then the real `torch.cuda`'s object — which answers truthfully about CUDA,
as it does for every other library in the process. `torch.cuda` itself is never modified.
"""

from __future__ import annotations

import functools
from types import ModuleType

import torch

from portlayer import nvtx
from portlayer.api import AMP, MIRRORED
from portlayer.dropin.retarget import Retarget, leading_device


class _SelectedDevice:
    """`torch.cuda.device(i)` for device modules without one: selects device `i` inside the block."""

    def __init__(self, device, current_device, set_device):
        if device is not None and not isinstance(device, int):
            device = torch.device(device).index
        self._index = device
        self._current_device, self._set_device = current_device, set_device
        self._previous = None

    def __enter__(self):
        if self._index is not None and self._index >= 0:
            self._previous = self._current_device()
            self._set_device(self._index)
        return self

    def __exit__(self, *exc_info) -> bool:
        if self._previous is not None:
            self._set_device(self._previous)
        return False


def _cuda_amp(api: dict, device_type: str) -> ModuleType:
    """`torch.cuda.amp`: the autocast pair on the active backend, and the custom_fwd/bwd decorators."""
    amp = ModuleType("portlayer.torch.cuda.amp", torch.cuda.amp.__doc__)
    vars(amp).update({name: api[name] for name in AMP})
    for name in ("custom_fwd", "custom_bwd"):  # torch.amp has them from 2.4
        decorator = getattr(torch.amp, name, None)
        if decorator is not None:
            setattr(amp, name, functools.partial(decorator, device_type=device_type))
    return amp


# torch.cuda functions whose device comes first (or as `device=`): a script passes them its CUDA names
# (`torch.cuda.set_device(f"cuda:{local_rank}")`), which the vendor's module would refuse.
DEVICE_FIRST = (
    "set_device", "synchronize", "get_device_name", "get_device_properties", "get_device_capability",
    "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
    "reset_peak_memory_stats", "mem_get_info", "current_stream", "default_stream",
)  # fmt: skip


def build(api: dict, device_module: ModuleType, retarget: Retarget) -> ModuleType:
    """The look-alike for the backend whose bound API is `api` and device module `device_module`."""
    device_type = retarget.device_type
    cuda = ModuleType("portlayer.torch.cuda", __doc__)
    vars(cuda).update({name: api[name] for name in MIRRORED})
    for name in DEVICE_FIRST:
        setattr(cuda, name, leading_device(api[name], retarget))
    cuda.amp = _cuda_amp(api, device_type)
    # The generator plumbing RNG trackers reach into (portlayer/generators.py), under torch.cuda's names,
    # private ones included: the real torch.cuda's `_lazy_call` queues its callable until CUDA starts, never
    # on a host without it, so a tracker's `set_state` would silently not happen.
    cuda.default_generators, cuda.init = api["default_generators"], api["init"]
    cuda._lazy_init, cuda._lazy_call = api["init"], api["lazy_call"]
    cuda.nvtx = nvtx  # a CPU build of torch (the vendors') has no NVTX: its torch.cuda.nvtx raises
    device = getattr(device_module, "device", None)
    if not isinstance(device, type):
        device = functools.partial(
            _SelectedDevice, current_device=api["current_device"], set_device=api["set_device"]
        )
    cuda.device = device

    # The rest of torch.cuda's names, copied once: a module `__getattr__` would make CPython skip its fast
    # path for every attribute read on this module, the hot ones included.
    for name, value in vars(torch.cuda).items():
        if not name.startswith("__") and name not in vars(cuda):
            setattr(cuda, name, vars(device_module).get(name, value))
    return cuda
