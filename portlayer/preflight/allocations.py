"""Every storage a fake step allocates and frees, in order: what a device's caching allocator would be asked
for (`allocator.replay` turns it into the allocator's peaks).

    log = AllocationLog()
    with fake_mode, log:
        model = build(); …
        log.start()                 # the step proper begins: what is alive now is its starting point
        …step…
    peaks = allocator.replay(log.events())

A storage is seen at the first op that returns a tensor on it (a view shares its base's) and freed when the
last tensor on it goes (a weak-reference callback), as torch's allocator frees a block when its storage dies.
"""

from __future__ import annotations

import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.weak import WeakIdKeyDictionary


class AllocationLog(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self._alive: dict[int, int] = {}  # key -> bytes, in allocation order
        self._events: list[tuple[int, int, int]] = []  # (+1 | -1, key, bytes) since `start`
        self._next_key = 0
        self._started = False
        self._seen = WeakIdKeyDictionary()  # storage -> key

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.track(out)
        return out

    def track(self, value) -> None:
        """Allocate the storages of the tensors in `value` not seen yet (the batch, made outside any op)."""
        for tensor in tree_flatten(value)[0]:
            if isinstance(tensor, torch.Tensor):
                self._allocate(tensor.untyped_storage())

    def _allocate(self, storage) -> None:
        nbytes = storage.nbytes()
        if nbytes == 0 or storage in self._seen:
            return
        key = self._next_key
        self._next_key += 1
        self._seen[storage] = key
        self._alive[key] = nbytes
        if self._started:
            self._events.append((1, key, nbytes))
        weakref.finalize(storage, self._free, key)

    def leave_out(self, tensors) -> None:
        """Tensors that live on the host, not the device (their storages are forgotten, never freed here)."""
        for tensor in tensors:
            key = self._seen.get(tensor.untyped_storage())
            if key is not None:
                self._alive.pop(key, None)

    def _free(self, key: int) -> None:
        nbytes = self._alive.pop(key, None)
        if nbytes is not None and self._started:
            self._events.append((-1, key, nbytes))

    def start(self) -> None:
        """From here on the step proper: the storages alive now are its first allocations, in their order."""
        self._events = [(1, key, nbytes) for key, nbytes in self._alive.items()]
        self._started = True

    def events(self) -> list[tuple[int, int, int]]:
        return list(self._events)
