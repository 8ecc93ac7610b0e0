"""DeepSpeed's accelerator follows portlayer's active backend.

DeepSpeed chooses an accelerator for itself (`DS_ACCELERATOR`, else probing installed plugins) from its own
list. `use_active_backend()` makes that choice portlayer's, from the backend record:
- a backend whose record names DeepSpeed's own accelerator (`deepspeed_accelerator`) gets it, named through
  `DS_ACCELERATOR` before DeepSpeed is imported (its cpu accelerator talks gloo when oneCCL is absent);
- any other backend (musa) gets `PortlayerAccelerator` (portlayer_accelerator.py), DeepSpeed's accelerator
  interface answered by portlayer's runtime API and the record, installed through DeepSpeed's `set_accelerator`.

Importing this module imports no DeepSpeed; `use_active_backend()` does.
"""

from __future__ import annotations

import contextlib
import os

import portlayer
from portlayer.backends import Backend
from portlayer.errors import PortlayerError

# DeepSpeed must be told its accelerator before it is imported, since importing it chooses one.
_DS_ENV = "DS_ACCELERATOR"


def use_active_backend():
    """Import DeepSpeed with its accelerator set to portlayer's active backend; returns that accelerator."""
    backend = portlayer.backend()
    if backend.deepspeed_accelerator is not None:
        return _deepspeeds_own(backend, backend.deepspeed_accelerator)
    with _importing_deepspeed_as("cpu"):
        from deepspeed.accelerator import set_accelerator

        from portlayer.strategies.portlayer_accelerator import PortlayerAccelerator
    accelerator = PortlayerAccelerator(backend)
    set_accelerator(accelerator)
    return accelerator


def _deepspeeds_own(backend: Backend, name: str):
    _check_required_env(backend, name)
    os.environ.setdefault(_DS_ENV, name)
    from deepspeed.accelerator import get_accelerator

    chosen = get_accelerator()
    if chosen._name != name:
        raise PortlayerError(
            f"DeepSpeed chose its {chosen._name} accelerator, but portlayer's backend is {backend.name}: "
            f"unset {_DS_ENV} or set it to {name}"
        )
    return chosen


def _check_required_env(backend: Backend, name: str) -> None:
    for variable, source in backend.required_env.items():
        if variable not in os.environ:
            raise PortlayerError(f"DeepSpeed's {name} accelerator needs {variable} ({source}), which is unset")


@contextlib.contextmanager
def _importing_deepspeed_as(name: str):
    """Importing DeepSpeed chooses an accelerator; for a backend it has none for, let it choose `name` (cpu:
    nothing to probe, nothing to load) rather than probe for vendor plugins, until ours replaces it."""
    saved = os.environ.get(_DS_ENV)
    os.environ[_DS_ENV] = name
    try:
        yield
    finally:
        if saved is None:
            del os.environ[_DS_ENV]
        else:
            os.environ[_DS_ENV] = saved
