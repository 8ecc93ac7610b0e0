"""Walking the nested structures modules take and return (tuples, lists, dicts, HF ModelOutputs)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch


def tree_map(fn: Callable[[torch.Tensor], Any], obj: Any) -> Any:
    """`obj` with every tensor replaced by `fn(tensor)`; other leaves (ints, None, objects) are kept as is."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
        return type(obj)(*(tree_map(fn, item) for item in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(tree_map(fn, item) for item in obj)
    if isinstance(obj, Mapping):
        return {key: tree_map(fn, value) for key, value in obj.items()}
    return obj


def leaves(obj: Any, kind: type = torch.Tensor) -> list:
    """Every leaf of type `kind` in `obj`, depth first, in a stable order (dict insertion order)."""
    if isinstance(obj, kind):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [leaf for item in obj for leaf in leaves(item, kind)]
    if isinstance(obj, Mapping):
        return [leaf for value in obj.values() for leaf in leaves(value, kind)]
    return []


def float_leaves(obj: Any) -> list[torch.Tensor]:
    """The floating-point tensors in `obj`: the values whose numerics a port can get wrong."""
    return [leaf for leaf in leaves(obj) if leaf.is_floating_point()]
