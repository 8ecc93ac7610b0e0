"""A training step of the reference trainer (every device call through portlayer) against the same loop
written against plain torch, on the cpu, same model, data and batch.

Goal: ratio <= 1.02 (portlayer's step time over plain torch's). Run: python bench/trainer_step.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # run alone or by `python -m bench`: find _reference
import torch  # noqa: E402
from _reference import compare_rates, preset_options, reference_rates  # noqa: E402
from transformers import get_cosine_schedule_with_warmup  # noqa: E402

from reference_train import data  # noqa: E402
from reference_train.presets import build_model  # noqa: E402
from reference_train.train import Options  # noqa: E402


def plain_torch_rates(options: Options, blocks: data.Blocks) -> list[float]:
    """The trainer's step, line for line, with torch's cpu calls where the trainer calls portlayer."""
    preset = options.preset
    device = torch.device("cpu")
    model = build_model(preset, seed=options.seed, parity=options.parity).to(device)
    order = data.Order(len(blocks.train), options.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=options.lr, weight_decay=preset.weight_decay)
    scheduler = get_cosine_schedule_with_warmup(optimizer, options.warmup_steps, options.steps)
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    micro = options.per_device_batch
    model.train()
    rates = []
    for step in range(1, options.steps + 1):
        began = time.perf_counter()
        scheduler.get_last_lr()
        optimizer.zero_grad(set_to_none=True)
        first = (step - 1) * micro
        batch = {
            k: v.to(device) for k, v in data.train_batch(blocks, order, first, micro, options.seed).items()
        }
        with torch.autocast("cpu", enabled=False, dtype=torch.float32):
            loss = model(**batch).loss
        scaler.scale(loss / options.grad_accum).backward()
        loss.detach().float().item()
        tokens = int(batch["attention_mask"].sum())
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), preset.max_grad_norm)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        rates.append(tokens / (time.perf_counter() - began))  # the cpu has nothing to synchronize
    return rates[1:]


def main() -> None:
    options = preset_options()
    blocks = data.load_blocks(options.preset.task, options.seq_len, options.data)
    mine, anchor = compare_rates(
        options, lambda: reference_rates(options), lambda: plain_torch_rates(options, blocks)
    )
    print(f"reference trainer (portlayer) {mine:>10,.0f} tokens/s")
    print(f"same loop, plain torch        {anchor:>10,.0f} tokens/s")
    print(f"step time ratio {anchor / mine:.3f}  (portlayer / plain torch; goal <= 1.02)")


if __name__ == "__main__":
    main()
