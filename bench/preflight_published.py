"""Preflight against the published ms-swift memory table: LoRA on Qwen1.5-7B-Chat, 8 x Ascend 910B3 64 GB.

    python bench/preflight_published.py [--seq-len 2048] [--batch-size 1] [--no-gradient-checkpointing]

Both sides from one command: the published per-card peak (issue #21, from ms-swift's documentation) and
preflight's per-rank prediction for the same cards and DeepSpeed setting. The run conditions were not
published; the defaults here are ms-swift's own of that time (sft: max_length 2048, batch_size 1,
gradient_checkpointing on, lora_rank 8, bf16) with LoRA on q, k, v and o. Predictions are in GiB (the
published GB taken as GiB: the devices report MiB). Prints each row's ratio predicted / published;
differences are reported, not tuned away (docs/preflight.md discusses them).
"""

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from portlayer.preflight.model_source import Training, from_config_file  # noqa: E402
from portlayer.preflight.per_rank import predict  # noqa: E402

GiB = 1 << 30
CONFIG = REPO / "examples" / "configs" / "qwen1.5-7b" / "config.json"
# (cards, DeepSpeed as published, portlayer's strategy, published peak per card in GB)
PUBLISHED = [(1, "none", "ddp", 28), (4, "none (DDP)", "ddp", 22), (4, "ZeRO-2", "zero2", 28),
             (4, "ZeRO-3", "zero3", 22), (8, "none (DDP)", "ddp", 22)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--no-gradient-checkpointing", dest="checkpointing", action="store_false")
    args = parser.parse_args()
    source = from_config_file(CONFIG, batch_size=args.batch_size, seq_len=args.seq_len, overrides={})
    print(f"Qwen1.5-7B-Chat, LoRA r=8 (q, k, v, o), bf16, batch {args.batch_size} x {args.seq_len}, "
          f"gradient checkpointing {'on' if args.checkpointing else 'off'}")
    print("| cards | DeepSpeed | published | predicted, GiB (parameters + gradients and optimizer + activations + buffers) "
          "| predicted / published |")
    print("| --- | --- | --- | --- | --- |")
    start = time.perf_counter()
    for cards, label, strategy, published_gb in PUBLISHED:
        training = Training("bf16", strategy, cards, lora_r=8, gradient_checkpointing=args.checkpointing)
        memory = predict(source, training).memory
        parts = " + ".join(f"{size / GiB:.1f}" for size in (
            memory.parameters, memory.gradients + memory.optimizer_state, memory.activations,
            memory.communication + memory.buffers))
        print(f"| {cards} | {label} | {published_gb} GB | {memory.total / GiB:.1f} GiB ({parts}) "
              f"| {memory.total / GiB / published_gb:.2f} |", flush=True)
    print(f"({time.perf_counter() - start:.1f} s for the 5 predictions)")


if __name__ == "__main__":
    main()
