"""A small training step through `import portlayer.torch as torch` against plain torch, on the cpu
(goal: ratio <= 1.02).

    python bench/dropin_step.py

The same MLP step (batch moved with `.to(device)`, forward, backward, AdamW, `synchronize`) written the
CUDA way through the drop-in (device "cuda", patches applied) and the plain way with torch (device "cpu",
patches removed), interleaved; prints the median time per step and the ratio drop-in / torch.
"""

import contextlib

import torch

import portlayer
import portlayer.torch as dropin

STEPS, REPEATS = 100, 21


def training_step(t, device: str, synchronize):
    """One training step written against the module `t` (torch or the drop-in), on `device`."""
    t.manual_seed(0)
    model = t.nn.Sequential(t.nn.Linear(128, 256), t.nn.GELU(), t.nn.Linear(256, 128)).to(device)
    optimizer = t.optim.AdamW(model.parameters(), lr=1e-3)
    inputs, targets = t.randn(32, 128), t.randn(32, 128, device=device)

    def step():
        batch = inputs.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        loss = t.nn.functional.mse_loss(model(batch), targets)
        loss.backward()
        optimizer.step()
        synchronize()

    return step


def main() -> None:
    from interleaved import medians

    torch.set_num_threads(1)
    with portlayer.patched():
        through_dropin = training_step(dropin, "cuda", dropin.cuda.synchronize)
    portlayer.unpatch()
    seconds = medians(
        {
            "torch (cpu)": (training_step(torch, "cpu", torch.cpu.synchronize), contextlib.nullcontext),
            "portlayer.torch (cuda)": (through_dropin, portlayer.patched),
        },
        STEPS,
        REPEATS,
    )
    for label, value in seconds.items():
        print(f"{label:24s} {value * 1e6:8.1f} us per step")
    ratio = seconds["portlayer.torch (cuda)"] / seconds["torch (cpu)"]
    print(f"ratio portlayer.torch / torch: {ratio:.3f} (goal <= 1.02)")


if __name__ == "__main__":
    main()
