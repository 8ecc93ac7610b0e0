"""What the trainer benches share: the reference trainer on a preset's defaults, its per-step tokens/s.

Not a bench itself (`python -m bench` skips names starting with "_"); the benches import it by path.
"""

from __future__ import annotations

import gc
import os
import statistics

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from reference_train.presets import get_preset  # noqa: E402
from reference_train.train import Options, train  # noqa: E402

PRESET = "gpt2-tiny"
STEPS = 15  # per round; the first step of each round (allocations, first calls) is left out
ROUNDS = 4


def preset_options(name: str = PRESET, steps: int = STEPS) -> Options:
    """The reference trainer's options for one quiet process on the preset's defaults, nothing written."""
    preset = get_preset(name)
    return Options(
        preset=preset,
        steps=steps,
        per_device_batch=preset.per_device_batch,
        seq_len=preset.seq_len,
        lr=preset.lr,
        warmup_steps=preset.warmup_steps,
        quiet=True,
    )


def reference_rates(options: Options) -> list[float]:
    """Tokens/s of each step but the first of the reference trainer's own loop (one process, no DDP)."""
    run = train(options)
    return [step["tokens_per_s"] for step in run["steps"][1:]]


def compare_rates(options: Options, reference, anchor) -> tuple[float, float]:
    """Median per-step tokens/s of `reference()` and `anchor()` (each returns one round's step rates), over
    ROUNDS rounds run alternately after one warm-up round each (caches, first-call costs, thread pools)."""
    import torch

    # One intra-op thread: on a shared machine a step with two threads waits on whichever was descheduled,
    # and that noise would swamp the few percent measured here. Both sides run alike.
    torch.set_num_threads(1)
    rates = {reference: [], anchor: []}
    for round_index in range(ROUNDS + 1):
        # Interleaved, so drift on a noisy machine hits both sides alike, and in turns, so neither always
        # runs right after the other (measured: whichever ran second in a fixed pair was ~8% faster).
        for side in (reference, anchor) if round_index % 2 else (anchor, reference):
            gc.collect()  # the previous run's model is garbage: collect it now, not during a timed step
            step_rates = side()
            if round_index:  # round 0 is the warm-up
                rates[side] += step_rates
    print(
        f"{options.preset.name} on 1 cpu thread, batch {options.per_device_batch} x {options.seq_len} tokens, "
        f"median of {len(rates[reference])} steps per side over {ROUNDS} interleaved rounds"
    )
    return statistics.median(rates[reference]), statistics.median(rates[anchor])
