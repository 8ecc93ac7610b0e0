"""The reference trainer's training step (every device call through portlayer) against the same step
written against plain torch, on the cpu: same model, same data, same batch.

Both steps train one shared model, alternately, step by step, each with its own optimizer and
schedule. Measured on separate models, each rebuild moved the step time by up to ±20% (where the
allocator put the weights), far more than the few percent looked for here; step-by-step alternation
also spreads a busy machine's drift over both sides alike.

Goal: ratio <= 1.02 (portlayer's step time over plain torch's). Run: python bench/trainer_step.py
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # run alone or by `python -m bench`: find _reference
import torch  # noqa: E402
from _reference import preset_options  # noqa: E402
from transformers import get_cosine_schedule_with_warmup  # noqa: E402

import portlayer  # noqa: E402
from reference_train import data  # noqa: E402
from reference_train.presets import build_model  # noqa: E402
from reference_train.train import Options, TrainingStep, World  # noqa: E402

WARMUP = 10  # pairs of steps left out: allocations, first calls, the optimizers' state
PAIRS = 200


class PlainTorchStep:
    """`TrainingStep.__call__`, line for line, with torch's cpu calls where the trainer calls portlayer."""

    def __init__(self, options: Options, model: torch.nn.Module, blocks: data.Blocks, order: data.Order):
        self.options, self.model, self.blocks, self.order = options, model, blocks, order
        self.device = torch.device("cpu")
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=options.lr, weight_decay=options.preset.weight_decay)
        self.scheduler = get_cosine_schedule_with_warmup(self.optimizer, options.warmup_steps, options.steps)
        self.scaler = torch.amp.GradScaler("cpu", enabled=False)

    def __call__(self, step: int) -> tuple[float, int]:
        options, model, scaler = self.options, self.model, self.scaler
        micro = options.per_device_batch
        self.optimizer.zero_grad(set_to_none=True)
        first = (step - 1) * micro
        batch = {
            k: v.to(self.device) for k, v in data.train_batch(self.blocks, self.order, first, micro, options.seed).items()
        }
        with torch.autocast("cpu", enabled=False, dtype=torch.float32):
            loss = model(**batch).loss
        scaler.scale(loss / options.grad_accum).backward()
        loss_sum = loss.detach().float().item()
        tokens = int(batch["attention_mask"].sum())
        scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), options.preset.max_grad_norm)
        scaler.step(self.optimizer)
        scaler.update()
        self.scheduler.step()
        return loss_sum, tokens


def timed(step, index: int, synchronize) -> float:
    began = time.perf_counter()
    step(index)
    synchronize()
    return time.perf_counter() - began


def main() -> None:
    # One intra-op thread: on a shared machine a step with two threads waits on whichever was descheduled.
    torch.set_num_threads(1)
    options = preset_options(steps=WARMUP + PAIRS)
    preset = options.preset
    blocks = data.load_blocks(preset.task, options.seq_len, options.data)
    order = data.Order(len(blocks.train), options.seed)
    device = portlayer.device(0)
    model = build_model(preset, seed=options.seed, parity=options.parity).to(device)
    model.train()
    reference = TrainingStep.build(options, World.from_env(), device, model, blocks, order)
    plain = PlainTorchStep(options, model, blocks, order)
    # (step, how to wait for it, its times); the cpu has nothing to synchronize.
    mine = (reference, portlayer.synchronize, [])
    anchor = (plain, lambda: None, [])
    gc.collect()
    for index in range(1, WARMUP + PAIRS + 1):
        # In turns, so that neither side always runs right after the other.
        for step, synchronize, times in (mine, anchor) if index % 2 else (anchor, mine):
            seconds = timed(step, index, synchronize)
            if index > WARMUP:
                times.append(seconds)
    mine_times, anchor_times = mine[2], anchor[2]
    ratios = [ours / theirs for ours, theirs in zip(mine_times, anchor_times)]
    quartiles = statistics.quantiles(ratios, n=4)
    print(
        f"{preset.name} on 1 cpu thread, batch {options.per_device_batch} x {options.seq_len} tokens, "
        f"{PAIRS} steps per side on one shared model, alternating"
    )
    print(f"reference trainer step (portlayer) {statistics.median(mine_times) * 1e3:8.2f} ms (median)")
    print(f"same step, plain torch             {statistics.median(anchor_times) * 1e3:8.2f} ms (median)")
    print(
        f"step time ratio {statistics.median(ratios):.3f}  (median of per-pair ratios, quartiles "
        f"{quartiles[0]:.3f}-{quartiles[2]:.3f}; portlayer / plain torch; goal <= 1.02)"
    )


if __name__ == "__main__":
    main()
