"""A device's caching allocator, replayed over a step's allocations: what `max_memory_allocated` and
`memory_reserved` would show, where the tensors alone sum to less.

    rules = CACHING_ALLOCATOR
    peaks = replay([(+1, key, nbytes), (-1, key, nbytes), …], rules)
    peaks.allocated, peaks.reserved, peaks.requested

torch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp, constants in c10/core/AllocatorConfig.h),
with the default `PYTORCH_CUDA_ALLOC_CONF` (no expandable segments, no size cap on splitting, no power-of-2
rounding), one stream:
- a request is rounded up to a multiple of 512 B (`kMinBlockSize`); up to 1 MiB (`kSmallSize`) it comes
  from the small pool, above from the large one;
- it takes the smallest cached free block of its pool that holds it; failing that a new segment is reserved
  from the driver: 2 MiB (`kSmallBuffer`) for a small request, 20 MiB (`kLargeBuffer`) for one under 10 MiB
  (`kMinLargeAlloc`), else the request rounded up to 2 MiB (`kRoundLarge`);
- the block is split only if what is left is at least 512 B (small pool) or more than 1 MiB (large pool):
  otherwise it is handed out whole, and counted whole in the allocated bytes;
- a freed block merges with its free neighbours in the segment and stays cached (reserved).
`allocated` is the peak of the handed-out blocks' sum (`max_memory_allocated`), `reserved` the peak of the
segments' sum (`max_memory_reserved`), `requested` the peak of the requests' own sizes (the tensors).
torch_npu's NPUCachingAllocator.cpp declares the same six constants.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

MiB = 1 << 20


@dataclass(frozen=True)
class AllocatorRules:
    min_block: int = 512  # kMinBlockSize: every request is a multiple of it
    small_size: int = MiB  # kSmallSize: the largest request served from the small pool
    small_buffer: int = 2 * MiB  # kSmallBuffer: a small pool's segment
    large_buffer: int = 20 * MiB  # kLargeBuffer: the segment of a request under min_large_alloc
    min_large_alloc: int = 10 * MiB  # kMinLargeAlloc
    round_large: int = 2 * MiB  # kRoundLarge: larger requests reserve a segment of their size rounded to it

    def block_size(self, nbytes: int) -> int:
        return max(self.min_block, -(-nbytes // self.min_block) * self.min_block)

    def segment_size(self, size: int) -> int:
        if size <= self.small_size:
            return self.small_buffer
        if size < self.min_large_alloc:
            return self.large_buffer
        return -(-size // self.round_large) * self.round_large

    def splits(self, small: bool, remaining: int) -> bool:
        return remaining >= self.min_block if small else remaining > self.small_size


CACHING_ALLOCATOR = AllocatorRules()


@dataclass(frozen=True)
class Peaks:
    allocated: int  # the blocks handed out, at their peak
    reserved: int  # the segments reserved from the driver, at their peak
    requested: int  # the requests themselves (the tensors' bytes), at their peak


class _Block:
    __slots__ = ("address", "size", "small", "free", "before", "after")

    def __init__(self, address: int, size: int, small: bool) -> None:
        self.address, self.size, self.small = address, size, small
        self.free = True
        self.before: _Block | None = None
        self.after: _Block | None = None


class CachingAllocator:
    """The allocator's block bookkeeping (no memory behind it)."""

    def __init__(self, rules: AllocatorRules = CACHING_ALLOCATOR) -> None:
        self.rules = rules
        self.pools: dict[bool, list] = {True: [], False: []}  # free blocks as (size, address, block), sorted
        self.blocks: dict = {}  # key -> (block, requested bytes)
        self.next_address = 0
        self.allocated = self.reserved = self.requested = 0
        self.peaks = Peaks(0, 0, 0)

    def malloc(self, key, nbytes: int) -> None:
        size = self.rules.block_size(nbytes)
        small = size <= self.rules.small_size
        pool = self.pools[small]
        index = bisect.bisect_left(pool, (size, -1))
        if index < len(pool):
            block = pool.pop(index)[2]
        else:
            segment = self.rules.segment_size(size)
            block = _Block(self.next_address, segment, small)
            self.next_address += segment + MiB  # segments are never contiguous: no merging across them
            self.reserved += segment
        remaining = block.size - size
        if self.rules.splits(small, remaining):
            rest = _Block(block.address + size, remaining, small)
            rest.before, rest.after = block, block.after
            if block.after is not None:
                block.after.before = rest
            block.after, block.size = rest, size
            self._cache(rest)
        block.free = False
        self.blocks[key] = (block, nbytes)
        self.allocated += block.size
        self.requested += nbytes
        self.peaks = Peaks(max(self.peaks.allocated, self.allocated), max(self.peaks.reserved, self.reserved),
                           max(self.peaks.requested, self.requested))

    def free(self, key) -> None:
        block, nbytes = self.blocks.pop(key)
        self.allocated -= block.size
        self.requested -= nbytes
        block.free = True
        for neighbour in (block.before, block.after):
            if neighbour is not None and neighbour.free:
                self._uncache(neighbour)
                first, second = (neighbour, block) if neighbour is block.before else (block, neighbour)
                first.size += second.size
                first.after = second.after
                if second.after is not None:
                    second.after.before = first
                block = first
        self._cache(block)

    def _cache(self, block: _Block) -> None:
        bisect.insort(self.pools[block.small], (block.size, block.address, block))

    def _uncache(self, block: _Block) -> None:
        pool = self.pools[block.small]
        pool.pop(bisect.bisect_left(pool, (block.size, block.address)))


def replay(events: Iterable[tuple[int, object, int]], rules: AllocatorRules = CACHING_ALLOCATOR) -> Peaks:
    """The peaks of a sequence of (+1, key, bytes) allocations and (-1, key, bytes) frees, in order."""
    allocator = CachingAllocator(rules)
    for sign, key, nbytes in events:
        if sign > 0:
            allocator.malloc(key, nbytes)
        else:
            allocator.free(key)
    return allocator.peaks
