"""Preflight against the published ms-swift memory table: LoRA on Qwen1.5-7B-Chat, 8 x Ascend 910B3 64 GB.

    python bench/preflight_published.py [--seq-len 2048] [--batch-size 1] [--no-gradient-checkpointing]

Both sides from one command: the published per-card figure (issue #21, from ms-swift's documentation) and
preflight's per-rank prediction for the same cards and DeepSpeed setting, on npu's kernels and allocator: the
tensors, the caching allocator's reserved memory, and what npu-smi would show (reserved plus HCCL's buffers,
2 x HCCL_BUFFSIZE for the job's one communicator; CANN's context has no citable size and is not counted).
ms-swift logs no memory figure on npu (swift/trainers/callback.py), so the table is npu-smi's. The run
conditions were not published; the defaults here are ms-swift's own of that time (sft: max_length 2048,
batch_size 1, gradient_checkpointing on, lora_rank 8, the model loaded in bf16 and trained under bf16
autocast) with LoRA on q, k, v and o. Figures in GiB (the published GB taken as GiB: npu-smi reports MiB).
Prints each row's ratio of the npu-smi prediction to the published figure; differences are reported, not
tuned away (docs/preflight.md discusses them row by row).
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
from portlayer.preflight.per_rank import On, predict  # noqa: E402
from portlayer.preflight.targets import get_target  # noqa: E402

GiB = 1 << 30
CONFIG = REPO / "examples" / "configs" / "qwen1.5-7b" / "config.json"
# (cards, DeepSpeed as published, portlayer's strategy, published peak per card in GB)
PUBLISHED = [(1, "none", "ddp", 28), (4, "none (DDP)", "ddp", 22), (4, "ZeRO-2", "zero2", 28),
             (4, "ZeRO-3", "zero3", 22), (8, "none (DDP)", "ddp", 22)]
COMMUNICATORS = 1  # transformers' Trainer (ms-swift) and DeepSpeed reduce over the default process group


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--no-gradient-checkpointing", dest="checkpointing", action="store_false")
    args = parser.parse_args()
    source = from_config_file(CONFIG, batch_size=args.batch_size, seq_len=args.seq_len, overrides={})
    print(f"Qwen1.5-7B-Chat, LoRA r=8 (q, k, v, o), bf16 weights and autocast, batch {args.batch_size} x "
          f"{args.seq_len}, gradient checkpointing {'on' if args.checkpointing else 'off'}, npu's kernels")
    print("| cards | DeepSpeed | published | tensors (weights + gradients and Adam + activations + buffers) "
          "| allocated | reserved | + HCCL | npu-smi, predicted | predicted / published |")
    print("| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    start = time.perf_counter()
    for cards, label, strategy, published_gb in PUBLISHED:
        training = Training(strategy=strategy, nproc=cards, lora_r=8, gradient_checkpointing=args.checkpointing,
                            weights="bf16")
        prediction = predict(source, training, on=On(get_target("npu")), communicators=COMMUNICATORS)
        memory, device = prediction.memory, prediction.device
        parts = " + ".join(f"{size / GiB:.1f}" for size in (
            memory.parameters, memory.gradients + memory.optimizer_state, memory.activations,
            memory.communication + memory.buffers))
        hccl = device.outside["collective buffers"].bytes
        print(f"| {cards} | {label} | {published_gb} GB | {memory.total / GiB:.1f} GiB ({parts}) "
              f"| {device.allocated / GiB:.1f} | {device.reserved / GiB:.1f} | {hccl / GiB:.2f} "
              f"| {device.shown / GiB:.1f} GiB | {device.shown / GiB / published_gb:.2f} |", flush=True)
    print(f"({time.perf_counter() - start:.1f} s for the 5 predictions; not counted: CANN's context and "
          f"workspaces, {get_target('npu').context.source})")


if __name__ == "__main__":
    main()
