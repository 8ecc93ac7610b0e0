"""Running `convert` over many files: in this process for small runs, in a process pool for large ones.

A pool costs a fork per worker and a pickle per file; it pays off only when there is enough text to
parse. Results come back in submission order whatever the number of workers, so the output of
`--jobs 8` is the output of `--jobs 1`.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

# Below this much source in total, starting workers costs more than it saves: a fork costs about what
# reading and prefiltering a megabyte does, or parsing 20 kB that mention CUDA.
POOL_MIN_BYTES = 1_000_000


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def run_all(
    function: Callable[[Item], Result], items: Sequence[Item], jobs: int, work: int
) -> Iterator[Result]:
    """`map(function, items)`, spread over `jobs` processes when `work` (bytes of input) is worth it."""
    jobs = min(jobs, len(items))
    if jobs <= 1 or work < POOL_MIN_BYTES:
        yield from map(function, items)
        return
    # fork: workers inherit the imported codemod instead of importing it again (not safe on macOS).
    context = multiprocessing.get_context("fork" if sys.platform == "linux" else None)
    # Small chunks: the few files that mention CUDA cost a hundred times what the others do.
    chunksize = max(1, min(16, len(items) // (jobs * 16)))
    with context.Pool(jobs) as pool:
        yield from pool.imap(function, items, chunksize)
