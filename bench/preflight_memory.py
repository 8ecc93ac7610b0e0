"""Predicted against measured: the peak memory of a training step per rank, fake step against a real one.

    python bench/preflight_memory.py [--quick]

For each configuration, the prediction (`portlayer preflight`'s fake step: DDP, AdamW, clipping) is set
against the same step run for real on this machine's cpu — DDP over a one-rank gloo group, the third step
measured (the first creates AdamW's state, the second rebuilds DDP's buckets) by the cpu allocator's own events (torch's profiler) on top of
the parameters, buffers and optimizer state held between steps. Sizes are those that fit this machine's
memory; the published sizes are compared with the published table in docs/preflight.md.
"""

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from portlayer.preflight import model_source, plan  # noqa: E402
from portlayer.preflight.measure import cpu_peak, resident  # noqa: E402
from portlayer.train import presets  # noqa: E402

CONFIGS = [  # (preset, batch, seq, overrides)
    ("gpt2-tiny", 8, 64, {}),
    ("bert-base-uncased-tiny", 8, 64, {}),
    ("mixtral-8x7b-tiny", 4, 64, {}),
    ("bert-base-uncased", 8, 128, {}),
    ("gpt2", 1, 1024, {}),
    ("mixtral-8x7b", 1, 256, {"num_hidden_layers": 1, "hidden_size": 1024, "intermediate_size": 3584}),
]


def measured(shape: plan.Shape) -> int:
    """The real step's peak on the cpu: DDP over one gloo rank, the third step, as the trainer runs it."""
    preset = model_source.get_preset(shape.preset)
    config, _ = presets.build_config(preset, parity=False, config_overrides=dict(shape.overrides))
    model = presets.build_model(preset, parity=False, config=config)
    batch = presets.example_batch(preset, batch_size=shape.batch_size, seq_len=shape.seq_len)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=preset.lr, weight_decay=preset.weight_decay, foreach=True)

    def step():
        ddp(**batch).loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), preset.max_grad_norm, foreach=True)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step()  # creates AdamW's state
    step()  # DDP rebuilds its buckets in the order gradients came, once, at this step's start
    # DDP's buckets are allocated once, in the constructor: held between steps like the parameters.
    buckets = sum(p.numel() * p.element_size() for p in model.parameters())
    return resident(model, optimizer) + buckets + cpu_peak(step)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the tiny presets only")
    args = parser.parse_args()
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29571", rank=0, world_size=1)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'configuration':<58} {'predicted':>12} {'measured':>12} {'error':>8}  fake s / real s")
    for name, batch, seq, overrides in CONFIGS[:3] if args.quick else CONFIGS:
        shape = plan.Shape(name, batch, seq, overrides)
        dist.barrier()
        start = time.perf_counter()
        predicted = plan.fake_preset_step(shape)[0].memory.total
        fake_s = time.perf_counter() - start
        start = time.perf_counter()
        real = measured(shape)
        real_s = time.perf_counter() - start
        label = f"{name} {batch}x{seq}" + "".join(f" {k}={v}" for k, v in overrides.items())
        print(f"{label:<58} {predicted / 2**20:>9.1f} MiB {real / 2**20:>9.1f} MiB {predicted / real - 1:>+8.2%}"
              f"  {fake_s:.1f} / {real_s:.1f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
