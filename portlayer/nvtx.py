"""`portlayer.nvtx`: torch.cuda.nvtx's ranges and marks on every backend, name for name.

On cuda they are NVTX's own (Nsight Systems shows them). Elsewhere they are torch profiler ranges
(`torch.profiler.record_function`), which torch.profiler and the vendors' profilers built on it (torch_npu's)
show. There torch.cuda.nvtx would raise: the vendors' plugins run on a CPU build of torch, which has no NVTX
("NVTX functions not installed"), so a CUDA program's markers (Megatron-LM has 58 in megatron.core) stop its
port at the first one. Outside a profiler a range costs next to nothing.

    portlayer.nvtx.range_push("forward"); ...; portlayer.nvtx.range_pop()
    with portlayer.nvtx.range("step {}", step): ...
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from types import ModuleType

import torch

import portlayer


def _native() -> ModuleType | None:
    """torch.cuda.nvtx where the active backend is cuda, else None (the profiler's ranges instead). Asked at each
    call, as `portlayer.activate` may switch backends: one attribute read of the bound record."""
    return torch.cuda.nvtx if portlayer.backend().name == "cuda" else None


# Pushed ranges nest per thread, as NVTX's do; started ones (range_start / range_end) may end anywhere.
_pushed = threading.local()
_started: dict[int, torch.profiler.record_function] = {}
_ids = itertools.count(1)


def _stack() -> list:
    if not hasattr(_pushed, "ranges"):
        _pushed.ranges = []
    return _pushed.ranges


def _entered(message: str) -> torch.profiler.record_function:
    marker = torch.profiler.record_function(message)
    marker.__enter__()
    return marker


def range_push(msg: str) -> int:
    """Start a nested range; the zero-based depth of the range started."""
    if (native := _native()) is not None:
        return native.range_push(msg)
    ranges = _stack()
    ranges.append(_entered(msg))
    return len(ranges) - 1


def range_pop() -> int:
    """End the innermost range this thread pushed; the zero-based depth of the range ended (-1: none was open)."""
    if (native := _native()) is not None:
        return native.range_pop()
    ranges = _stack()
    if not ranges:
        return -1
    ranges.pop().__exit__(None, None, None)
    return len(ranges)


def range_start(msg: str) -> int:
    """Start a range that need not nest (it may end on another thread; torch 2.6's profiler then drops it); its
    id, for `range_end`."""
    if (native := _native()) is not None:
        return native.range_start(msg)
    range_id = next(_ids)
    _started[range_id] = _entered(msg)
    return range_id


def range_end(range_id: int) -> None:
    if (native := _native()) is not None:
        return native.range_end(range_id)
    marker = _started.pop(range_id, None)
    if marker is not None:
        marker.__exit__(None, None, None)
    return None


def mark(msg: str) -> None:
    """An instant: a range of no length where NVTX is not."""
    if (native := _native()) is not None:
        return native.mark(msg)
    with torch.profiler.record_function(msg):
        return None


@contextlib.contextmanager
def range(msg: str, *args, **kwargs):  # noqa: A001 (torch.cuda.nvtx's name)
    """A nested range around the block, its message `msg.format(*args, **kwargs)` as torch.cuda.nvtx.range's."""
    range_push(msg.format(*args, **kwargs))
    try:
        yield
    finally:
        range_pop()
