"""The peak memory of a real step on the cpu, from the allocator's own events: the check of a prediction.

torch's profiler with `profile_memory=True` records every allocation and free the cpu allocator makes
(`[memory]` events with a signed byte count); their running sum's maximum is the step's peak above what
was allocated before it started.
"""

from __future__ import annotations

from collections.abc import Callable


def cpu_peak(run: Callable[[], None]) -> int:
    """Bytes allocated at the peak of `run()` on the cpu, above what was allocated when it started."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run()
    # The raw events: the summarised ones fold an op's allocations into the op.
    events = sorted((event for event in prof.profiler.kineto_results.events() if event.name() == "[memory]"),
                    key=lambda event: event.start_ns())
    current = peak = 0
    for event in events:
        current += event.nbytes()
        peak = max(peak, current)
    return peak


def resident(model, optimizer) -> int:
    """Bytes held between steps: parameters, buffers and optimizer state (what a peak from `cpu_peak`,
    measured over a later step, sits on top of)."""
    import torch

    tensors = [*model.parameters(), *model.buffers()]
    tensors += [value for state in optimizer.state.values() for value in state.values()
                if isinstance(value, torch.Tensor)]
    return sum(tensor.untyped_storage().nbytes() for tensor in {id(t): t for t in tensors}.values())
