"""Preflight of full gpt2 at its published size (16 x 1024 tokens): fake step against today's recorded step.

    python bench/preflight_gpt2.py [--batch-size 16] [--seq-len 1024]

The anchor is the approach preflight used before: one real training step on the cpu, recorded
(`preflight.check`). At 16 x 1024 that step needs about 55 GiB (preflight's own figure, checked against the
cpu allocator at 1 x 1024 in bench/preflight_memory.py), more than this machine has, so the anchor runs at
1 x 1024 in the same process and its time is scaled by the batch: a real step's work grows linearly with it,
so 16 times the 1-sample time is what the anchor would take at 16 if memory allowed (a lower bound: it
ignores swapping). The ratio against the unscaled 1-sample time is printed too: the fake step at 16 x 1024
against the real one at 1 x 1024. Both sides warm up first (imports, first-call initialisation) on gpt2-tiny.
"""

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from portlayer import preflight  # noqa: E402
from portlayer.preflight import model_source, plan  # noqa: E402
from portlayer.train import presets  # noqa: E402


def recorded_step(name: str, batch_size: int, seq_len: int) -> float:
    """Seconds for today's approach: build the model, record one real step on the cpu, check it."""
    start = time.perf_counter()
    preset = model_source.get_preset(name)
    model = presets.build_model(preset, parity=False)
    batch = presets.example_batch(preset, batch_size=batch_size, seq_len=seq_len)
    optimizer = torch.optim.AdamW(model.parameters(), lr=preset.lr, weight_decay=preset.weight_decay)
    preflight.check(model, batch, optimizer, "npu", clip_grad_norm=preset.max_grad_norm)
    return time.perf_counter() - start


def fake_step(name: str, batch_size: int, seq_len: int) -> tuple[float, object]:
    """Seconds for the fake step (ops and memory per rank), with its answer."""
    start = time.perf_counter()
    step, _ = plan.fake_preset_step(plan.Shape(name, batch_size, seq_len))
    preflight.Report.build(step.recording, preflight.resolve("npu"))
    return time.perf_counter() - start, step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=1024)
    args = parser.parse_args()

    fake_step("gpt2-tiny", 8, 64)  # warm-up: imports, torch's fake-tensor machinery
    recorded_step("gpt2-tiny", 8, 64)
    fake_s, step = fake_step("gpt2", args.batch_size, args.seq_len)
    anchor_1 = recorded_step("gpt2", 1, args.seq_len)
    anchor = anchor_1 * args.batch_size
    print(f"gpt2 (124M), torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"  fake step {args.batch_size} x {args.seq_len}: {len(step.recording.ops)} ops, "
          f"peak {step.memory.total / 2**30:.1f} GiB per rank ({step.memory.phase})")
    print(f"recorded real step, 1 x {args.seq_len} (anchor):   {anchor_1:8.1f} s")
    print(f"  scaled to {args.batch_size} x {args.seq_len}:               {anchor:8.1f} s")
    print(f"preflight, fake step {args.batch_size} x {args.seq_len}:        {fake_s:8.1f} s")
    print(f"ratio: {anchor / fake_s:.1f}x faster than the anchor at {args.batch_size} x {args.seq_len} "
          f"({anchor_1 / fake_s:.1f}x faster than the anchor at 1 x {args.seq_len} alone)")


if __name__ == "__main__":
    main()
