"""Attribute access through `portlayer.torch` against plain torch (goal: ratio <= 1.05).

    python bench/dropin_attribute.py

Looks up what a training script reads on every step (`torch.randn`, `torch.cuda.synchronize`, `torch.nn`,
`torch.float32`, `torch.no_grad`) from each module, interleaved, and prints the median time per lookup
round and the ratio drop-in / torch.
"""

import contextlib
import timeit

import torch

import portlayer.torch as dropin

LOOKUPS = "t.randn; t.cuda.synchronize; t.nn.Linear; t.float32; t.no_grad"
NUMBER, REPEATS = 200_000, 15


def main() -> None:
    from interleaved import medians

    variants = {
        label: (timeit.Timer(LOOKUPS, globals={"t": module}).timeit, contextlib.nullcontext)
        for label, module in (("torch", torch), ("portlayer.torch", dropin))
    }
    # One "call" is a timeit batch of NUMBER lookup rounds.
    seconds = medians(
        {label: (lambda run=run: run(NUMBER), ctx) for label, (run, ctx) in variants.items()}, 1, REPEATS
    )
    for label, value in seconds.items():
        print(f"{label:16s} {value / NUMBER * 1e9:7.1f} ns per round ({LOOKUPS})")
    print(
        f"ratio portlayer.torch / torch: {seconds['portlayer.torch'] / seconds['torch']:.3f} (goal <= 1.05)"
    )


if __name__ == "__main__":
    main()
