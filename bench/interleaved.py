"""Timing that survives a noisy machine: variants measured in alternation, compared by their medians."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager


def medians(
    variants: dict[str, tuple[Callable[[], None], Callable[[], AbstractContextManager]]],
    number: int,
    repeats: int,
):
    """Seconds per call of each variant: `repeats` rounds, each timing `number` calls of every variant in
    turn (inside its context), the median round kept. Interleaving spreads the machine's drift evenly."""
    rounds: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, (call, context) in variants.items():
            with context():
                start = time.perf_counter()
                for _ in range(number):
                    call()
                rounds[name].append((time.perf_counter() - start) / number)
    return {name: statistics.median(times) for name, times in rounds.items()}
