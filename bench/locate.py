"""What `portlayer parity locate` and `dump` cost, against one plain forward and backward of the same model.

    python bench/locate.py            # gpt2-tiny locate; full-size gpt2 dump (batch 1 x 128 tokens)

Goals: locate on a tiny preset in seconds; a full-size gpt2 dump under 5 MB.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from portlayer.train.locate import collect, locate, write_dump  # noqa: E402
from portlayer.train.locate.capture import loss_of, run_model  # noqa: E402
from portlayer.train.locate.source import from_preset  # noqa: E402

ROUNDS = 3


def seconds(fn, rounds: int = ROUNDS) -> float:
    """Median wall time of `rounds` calls (after one warm-up call)."""
    fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def forward_backward(model, batch):
    model.zero_grad(set_to_none=True)
    loss_of(run_model(model, batch)).backward()


def main() -> None:
    model, batch = from_preset("gpt2-tiny", batch_size=8, seq_len=64, seed=0)
    anchor = seconds(lambda: forward_backward(model, batch))
    took = seconds(lambda: locate(model, batch))
    print("gpt2-tiny, batch 8 x 64 tokens, cpu")
    print(f"  plain forward+backward (anchor) {anchor * 1000:9.1f} ms")
    print(f"  locate (device + oracle + re-runs) {took * 1000:6.1f} ms   ratio {took / anchor:.1f}")

    # Full size: one timed round each, the anchor warmed up first (a 124M-parameter model on a cpu).
    model, batch = from_preset("gpt2", batch_size=1, seq_len=128, seed=0)
    anchor = seconds(lambda: forward_backward(model, batch), rounds=1)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gpt2.json"
        start = time.perf_counter()
        dump = collect(model, batch, model_name="gpt2")
        write_dump(dump, path)
        took = time.perf_counter() - start
        size = path.stat().st_size
        calls = len(dump.calls)
    print("gpt2 (124M parameters), batch 1 x 128 tokens, cpu")
    print(f"  plain forward+backward (anchor) {anchor * 1000:9.1f} ms")
    print(f"  dump (statistics + write)       {took * 1000:9.1f} ms   ratio {took / anchor:.1f}")
    print(f"  dump size {size / 1e6:.2f} MB for {calls} module calls (goal: under 5 MB)")


if __name__ == "__main__":
    main()
