"""The reference trainer's training step (every device call through portlayer) against the same step
written against plain torch, on the cpu: same model, same data, same batch.

Both steps train one shared model, alternately, step by step, each with its own optimizer and schedule
(see `_reference.py` for why).

Goal: ratio <= 1.02 (portlayer's step time over plain torch's). Run: python bench/trainer_step.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # run alone or by `python -m bench`: find _reference
import torch  # noqa: E402
from _reference import WARMUP, preset_options, reference_step, report, timed_reference_step  # noqa: E402
from transformers import get_cosine_schedule_with_warmup  # noqa: E402

from portlayer.train import data  # noqa: E402
from portlayer.train.train import TrainingStep  # noqa: E402


class PlainTorchStep:
    """`TrainingStep.__call__`, line for line, with torch's cpu calls where the trainer calls portlayer."""

    def __init__(self, reference: TrainingStep):
        options = reference.options
        self.options, self.model, self.blocks, self.order = options, reference.model, reference.blocks, reference.order
        self.device = torch.device("cpu")
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=options.lr, weight_decay=options.preset.weight_decay, fused=True
        )
        self.scheduler = get_cosine_schedule_with_warmup(self.optimizer, options.warmup_steps, options.steps)
        self.scaler = torch.amp.GradScaler("cpu", enabled=False)

    def __call__(self, step: int) -> tuple[torch.Tensor, int, torch.Tensor]:
        options, model, scaler = self.options, self.model, self.scaler
        micro = options.per_device_batch
        self.optimizer.zero_grad(set_to_none=True)
        first = (step - 1) * micro
        host = data.train_batch(self.blocks, self.order, first, micro, options.seed)
        tokens = int(host["attention_mask"].sum())
        batch = {k: v.to(self.device) for k, v in host.items()}
        with torch.autocast("cpu", enabled=False, dtype=torch.float32):
            loss = model(**batch).loss
        scaler.scale(loss / options.grad_accum).backward()
        losses = torch.stack([loss.detach().float()])
        scaler.unscale_(self.optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), options.preset.max_grad_norm)
        scaler.step(self.optimizer)
        scaler.update()
        self.scheduler.step()
        return losses, tokens, grad_norm


def timed_plain_step(step: PlainTorchStep, index: int) -> float:
    began = time.perf_counter()
    step(index)  # the cpu has nothing to synchronize
    return time.perf_counter() - began


def main() -> None:
    options = preset_options()
    reference = reference_step(options)
    plain = PlainTorchStep(reference)
    mine, anchor = [], []
    for index in range(1, options.steps + 1):
        # In turns, so that neither side always runs right after the other.
        if index % 2:
            mine_seconds = timed_reference_step(reference, index)
            anchor_seconds = timed_plain_step(plain, index)
        else:
            anchor_seconds = timed_plain_step(plain, index)
            mine_seconds = timed_reference_step(reference, index)
        if index > WARMUP:
            mine.append(mine_seconds)
            anchor.append(anchor_seconds)
    report(options, mine, anchor, "same step, plain torch", goal="portlayer / plain torch; goal <= 1.02")


if __name__ == "__main__":
    main()
