"""What the trainer benches share: the reference trainer's own step on a fresh model of a preset, and the
statistics of two sides timed step by step on that one model.

Not a bench itself (`python -m bench` skips names starting with "_"); the benches import it by path.

Why one shared model, stepped alternately: rebuilding the same model moved a step's time by up to ±20%
(where the allocator put the weights), and a busy machine drifts by as much within seconds; both swamp
the few percent these benches look for, while step-by-step alternation on one model sees neither.
"""

from __future__ import annotations

import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

import portlayer  # noqa: E402
from portlayer.train import data  # noqa: E402
from portlayer.train.presets import build_model, get_preset  # noqa: E402
from portlayer.train.train import Options, TrainingStep, World, compile_in_place  # noqa: E402

PRESET = "gpt2-tiny"
WARMUP = 10  # steps per side left out: allocations, first calls, the optimizers' state
PAIRS = 150


def preset_options(name: str = PRESET, steps: int = WARMUP + PAIRS) -> Options:
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


class Samples(torch.utils.data.Dataset):
    """The training samples in the reference trainer's order, one dict of tensors each."""

    def __init__(self, blocks: data.Blocks, options: Options):
        self.blocks, self.order, self.seed = blocks, data.Order(len(blocks.train), options.seed), options.seed
        self.length = options.steps * options.per_device_batch

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        batch = data.train_batch(self.blocks, self.order, index, 1, self.seed)
        return {name: tensor[0] for name, tensor in batch.items()}


def reference_step(options: Options) -> TrainingStep:
    """The reference trainer's step (its optimizer, schedule, data order) on a fresh model, one cpu thread:
    on a shared machine a step with two threads waits on whichever was descheduled."""
    torch.set_num_threads(1)
    preset = options.preset
    blocks = data.load_blocks(preset.task, options.seq_len, options.data)
    order = data.Order(len(blocks.train), options.seed)
    device = portlayer.device(0)
    model = build_model(preset, seed=options.seed, parity=options.parity).to(device)
    if options.compile:
        compile_in_place(model)
    model.train()
    return TrainingStep.build(options, World.from_env(), device, model, blocks, order)


def timed_reference_step(step: TrainingStep, index: int) -> float:
    """Seconds for step `index`, timed as the trainer's loop times it (until the device is done)."""
    began = time.perf_counter()
    step(index)
    portlayer.synchronize()
    return time.perf_counter() - began


def report(options: Options, mine: list[float], anchor: list[float], anchor_name: str, *, goal: str,
           throughput: bool = False) -> None:
    """Medians of both sides' step times and of the per-pair ratios: portlayer's step time over the
    anchor's, or with `throughput` the anchor's over portlayer's (tokens/s, the same tokens each side)."""
    ratios = [theirs / ours if throughput else ours / theirs for ours, theirs in zip(mine, anchor)]
    quartiles = statistics.quantiles(ratios, n=4)
    what = "tokens/s ratio" if throughput else "step time ratio"
    print(
        f"{options.preset.name} on 1 cpu thread, batch {options.per_device_batch} x {options.seq_len} tokens, "
        f"{len(ratios)} steps per side on one shared model, alternating"
    )
    print(f"reference trainer step (portlayer) {statistics.median(mine) * 1e3:8.2f} ms (median)")
    print(f"{anchor_name:<34} {statistics.median(anchor) * 1e3:8.2f} ms (median)")
    print(
        f"{what} {statistics.median(ratios):.3f}  (median of per-pair ratios, quartiles "
        f"{quartiles[0]:.3f}-{quartiles[2]:.3f}; {goal})"
    )
