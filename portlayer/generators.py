"""`portlayer.default_generators`, `portlayer.init` and `portlayer.lazy_call`: torch.cuda's generator plumbing
(`default_generators`, `init`, `_lazy_call`) for the active backend.

Code that saves and restores the device's random state itself (Megatron-LM's RNG tracker) reads the device's
generator objects and defers work until the device has started. torch.cuda, torch_npu and torch_musa replace
their `default_generators` tuple when the device initialises, so a tuple taken when portlayer binds its API
would stay empty: `DeviceGenerators` reads the module's tuple at each use. The cpu has one generator, torch's
own, and nothing to start: `init` does nothing and `lazy_call` runs its callable at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from portlayer.backends import Backend


class DeviceGenerators(Sequence):
    """The device module's `default_generators`, read when indexed (it is filled at device start-up)."""

    def __init__(self, module: ModuleType):
        self._module = module

    def __getitem__(self, index):
        return self._module.default_generators[index]

    def __len__(self) -> int:
        return len(self._module.default_generators)

    def __repr__(self) -> str:
        return repr(tuple(self._module.default_generators))


def _nothing(*args, **kwargs) -> None:
    return None


def _run_after(init: Callable[[], Any]) -> Callable[..., None]:
    """`_lazy_call` for a module without one: start the device (a no-op where it has started), then run."""

    def lazy_call(callable: Callable[[], Any], **kwargs) -> None:
        init()
        callable()

    return lazy_call


def build(backend: Backend, module: ModuleType) -> dict[str, Any]:
    import torch

    if hasattr(module, "default_generators"):
        generators: Sequence = DeviceGenerators(module)
    elif not backend.is_accelerator:
        generators = (torch.default_generator,)
    else:
        # An accelerator module without the tuple (mps, the test stand-in): torch.cuda's answer before start-up.
        generators = ()
    init = getattr(module, "init", None) or getattr(module, "_lazy_init", None) or _nothing
    lazy_call = getattr(module, "_lazy_call", None) or _run_after(init)
    return {"default_generators": generators, "init": init, "lazy_call": lazy_call}
