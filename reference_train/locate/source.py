"""Where the model and batch under test come from: a preset, or a user's `module:function`."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from torch import nn

from portlayer import PortlayerError


class ModelUnavailable(ValueError):
    """The model or batch could not be obtained; the message says why in one line."""


def from_preset(
    name: str, *, batch_size: int | None, seq_len: int | None, seed: int
) -> tuple[nn.Module, Any]:
    """A preset's model (cpu, parity settings, weights from `seed`) and its example batch."""
    try:
        from portlayer.train import presets
    except ImportError as exc:
        raise ModelUnavailable(f"presets are unavailable ({exc})") from None
    try:
        preset = presets.get_preset(name)
        model = presets.build_model(preset, seed=seed, parity=True)
        batch = presets.example_batch(preset, batch_size=batch_size, seq_len=seq_len, seed=seed)
    except PortlayerError as exc:
        raise ModelUnavailable(str(exc)) from None
    return model, batch


def from_factory(spec: str) -> tuple[nn.Module, Any]:
    """`pkg.module:function` or `path/to/file.py:function`; the function returns `(model, batch)`."""
    target, _, attribute = spec.rpartition(":")
    if not target or not attribute:
        raise ModelUnavailable(f"--model expects MODULE:FUNCTION or FILE.py:FUNCTION, got {spec!r}")
    try:
        if target.endswith(".py"):
            path = Path(target)
            if not path.is_file():
                raise ModelUnavailable(f"{target}: no such file")
            module_spec = importlib.util.spec_from_file_location(f"_portlayer_model_{path.stem}", path)
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[module_spec.name] = module
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
        factory = getattr(module, attribute)
    except ImportError as exc:
        raise ModelUnavailable(f"cannot import {target} ({exc})") from None
    except AttributeError:
        raise ModelUnavailable(f"{target} has no {attribute!r}") from None
    made = factory()
    if not (isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], nn.Module)):
        raise ModelUnavailable(f"{spec} must return (model, batch), got {type(made).__name__}")
    return made
