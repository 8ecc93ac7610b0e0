"""The names `portlayer.torch` changes: torch's own callables that take a device, retargeted.

Each is a thin stand-in that rewrites a CUDA device (`retarget.Retarget`) and calls torch's original.
Types stay torch's types: `portlayer.torch.device("cuda", 0)` returns a real `torch.device` (of the active
type) and `isinstance(x, portlayer.torch.device)` asks `torch.device`. Each stand-in is registered with
TorchScript as the builtin its original is, so `torch.jit.script` compiles code written against the
drop-in exactly as it compiles code written against torch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch
import torch.jit._builtins as jit_builtins
import torch.serialization

from portlayer.dropin.retarget import Retarget, leading_device

# torch functions whose `device` is keyword-only: the factories. tests/dropin checks that this covers every
# public torch callable documenting a `device` argument.
KEYWORD_DEVICE = (
    "arange", "as_tensor", "asarray", "bartlett_window", "blackman_window", "empty", "empty_like",
    "empty_permuted", "empty_strided", "eye", "from_dlpack", "from_file", "full", "full_like",
    "hamming_window", "hann_window", "kaiser_window", "linspace", "logspace", "normal", "ones", "ones_like",
    "rand", "rand_like", "randint", "randint_like", "randn", "randn_like", "randperm", "range",
    "scalar_tensor", "sparse_bsc_tensor", "sparse_bsr_tensor", "sparse_compressed_tensor",
    "sparse_coo_tensor", "sparse_csc_tensor", "sparse_csr_tensor", "tensor", "tril_indices",
    "triu_indices", "zeros", "zeros_like",
)  # fmt: skip

# torch callables whose device may also come first, positionally.
LEADING_DEVICE = ("set_default_device", "get_device_module")

# torch types constructed from a device (first or `device=`); they stay the real types.
DEVICE_TYPES = ("Generator", "Event", "Stream")


def _scripts_as(stand_in: Any, original: Any) -> Any:
    """Let TorchScript compile `stand_in` as the builtin `original` is (it cannot script *args wrappers)."""
    name = jit_builtins._find_builtin(original)
    register = getattr(jit_builtins, "_register_builtin", None)
    if name is not None and register is not None:
        register(stand_in, name)
    return stand_in


def _keyword_device(function: Callable, retarget: Retarget) -> Callable:
    wants = retarget.wants

    @functools.wraps(function)
    def retargeted(*args, **kwargs):
        if kwargs and "device" in kwargs and wants(kwargs["device"]):
            kwargs["device"] = retarget.any(kwargs["device"])
        return function(*args, **kwargs)

    return retargeted


class _StandInType(type):
    """A stand-in for one of torch's types: calling it builds the real type; isinstance asks the real type."""

    _real: type
    _construct: Callable[..., Any]

    def __call__(cls, *args, **kwargs):
        return cls._construct(*args, **kwargs)

    def __instancecheck__(cls, instance) -> bool:
        return isinstance(instance, cls._real)

    def __subclasscheck__(cls, subclass) -> bool:
        return issubclass(subclass, cls._real)


def _stand_in_type(real: type, construct: Callable[..., Any]) -> type:
    stand_in = _StandInType(
        real.__name__,
        (),
        {
            "__doc__": real.__doc__,
            "__module__": __name__,
            "_real": real,
            "_construct": staticmethod(construct),
        },
    )
    return _scripts_as(stand_in, real)


def _device(retarget: Retarget) -> type:
    def construct(*args, **kwargs) -> torch.device:
        if len(args) == 1 and not kwargs and isinstance(args[0], int):
            # A bare index means "the accelerator" to torch; on the host there is none to ask for.
            return retarget.destination(args[0])
        return retarget.device(torch.device(*args, **kwargs))

    return _stand_in_type(torch.device, construct)


def _autocast(retarget: Retarget) -> type:
    class autocast(torch.autocast):
        __doc__ = torch.autocast.__doc__

        def __init__(self, device_type: str, dtype=None, enabled: bool = True, cache_enabled=None):
            super().__init__(
                retarget.string(device_type), dtype=dtype, enabled=enabled, cache_enabled=cache_enabled
            )

    return autocast


def _grad_scaler(retarget: Retarget) -> type:
    """`torch.amp.GradScaler`, whose device defaults to "cuda" too."""

    class GradScaler(torch.amp.GradScaler):
        __doc__ = torch.amp.GradScaler.__doc__

        def __init__(self, device: str = "cuda", *args, **kwargs):
            super().__init__(retarget.string(device), *args, **kwargs)

    return GradScaler


def _load(retarget: Retarget) -> Callable:
    """`torch.load` that maps CUDA storages to the active backend, as the checkpoint's owner meant."""
    load = torch.load
    restore = torch.serialization.default_restore_location

    def map_location_for(requested: Any) -> Any:
        if isinstance(requested, (str, torch.device)):
            return retarget.any(requested)
        if requested is None:
            return lambda storage, location: restore(storage, retarget.string(location))
        if isinstance(requested, dict):
            return lambda storage, location: restore(
                storage, retarget.string(str(requested.get(location, location)))
            )

        def mapped(storage, location):
            result = requested(storage, location)
            return result if result is not None else restore(storage, retarget.string(location))

        return mapped

    @functools.wraps(load)
    def retargeted(f, map_location=None, *args, **kwargs):
        return load(f, map_location_for(map_location), *args, **kwargs)

    return retargeted


def _torch_amp(autocast: type, grad_scaler: type) -> ModuleType:
    """`torch.amp` with its device-taking pair retargeted."""
    amp = ModuleType("portlayer.torch.amp", torch.amp.__doc__)
    vars(amp).update({name: value for name, value in vars(torch.amp).items() if not name.startswith("__")})
    amp.autocast = autocast
    amp.GradScaler = grad_scaler
    return amp


def names(retarget: Retarget) -> dict[str, Any]:
    """Every name `portlayer.torch` holds instead of torch's, for the active backend (none on cuda)."""
    if retarget.identity:
        return {}
    present = lambda wanted: [name for name in wanted if hasattr(torch, name)]  # noqa: E731 (torch 2.11 lacks a few)
    stand_ins: dict[str, Any] = {}
    for name in present(KEYWORD_DEVICE):
        stand_ins[name] = _scripts_as(_keyword_device(getattr(torch, name), retarget), getattr(torch, name))
    for name in present(LEADING_DEVICE):
        stand_ins[name] = leading_device(getattr(torch, name), retarget)
    for name in present(DEVICE_TYPES):
        real = getattr(torch, name)
        stand_ins[name] = _stand_in_type(real, leading_device(real, retarget))
    autocast = _autocast(retarget)
    grad_scaler = _grad_scaler(retarget)
    stand_ins.update(device=_device(retarget), autocast=autocast, load=_load(retarget), GradScaler=grad_scaler)
    stand_ins["amp"] = _torch_amp(autocast, grad_scaler)
    return stand_ins
