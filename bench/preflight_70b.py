"""Preflight of a 70B-class model under ZeRO-3 at 64 ranks: how long the answer takes.

    python bench/preflight_70b.py [--seq-len 4096]

Llama-2-70B's published shape (examples/configs/llama-2-70b/config.json: hidden 8192, 80 layers, 64 heads,
8 KV heads), full fine-tuning in bf16, ZeRO-3 on 64 ranks, batch 1 per rank. The answer counts the 69B
parameters on the meta device and steps the model cut to 1 and to 2 layers with fake tensors, scaled to 80
(portlayer/preflight/per_rank.py; tests/preflight/test_sharding.py checks the scaling against a whole step).
The anchor, in the same run: one fake step of the 2-layer model, the unit of that work; stepping all 80
layers would cost about 40 of them. Goal: the whole answer in 30 s or less on this machine.
"""

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from portlayer.preflight import per_rank  # noqa: E402
from portlayer.preflight.model_source import Training, from_config_file  # noqa: E402

CONFIG = REPO / "examples" / "configs" / "llama-2-70b" / "config.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq-len", type=int, default=4096)
    args = parser.parse_args()
    training = Training(strategy="zero3", nproc=64, weights="bf16")  # bf16 weights, fp32 masters (DeepSpeed)
    start = time.perf_counter()
    source = from_config_file(CONFIG, batch_size=1, seq_len=args.seq_len, overrides={})
    prediction = per_rank.predict(source, training)
    answer_s = time.perf_counter() - start
    start = time.perf_counter()
    per_rank.fake_step(source, training, 2)
    anchor_s = time.perf_counter() - start
    memory = prediction.memory
    print(f"llama-2-70b shape, {prediction.count.total / 1e9:.2f}B parameters, bf16, ZeRO-3 on 64 ranks, "
          f"batch 1 x {args.seq_len}: {memory.total / 2**30:.1f} GiB per rank, peak in the {memory.phase}")
    for name, size in memory.parts().items():
        print(f"  {name:<18} {size / 2**30:8.2f} GiB")
    print(f"answer {answer_s:.1f} s (goal <= 30 s); anchor, one fake step of 2 layers {anchor_s:.1f} s; "
          f"ratio {answer_s / anchor_s:.2f}")


if __name__ == "__main__":
    main()
