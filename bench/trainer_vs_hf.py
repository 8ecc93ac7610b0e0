"""Tokens/s of the reference trainer against HuggingFace's `Trainer` on the same tiny preset and hardware:
same model and initial weights, same data, batch, AdamW, warm-up + cosine schedule and gradient clipping,
one cpu process, nothing logged or saved.

Goal: ratio >= 1.0 (reference trainer's tokens/s over HF Trainer's). Run: python bench/trainer_vs_hf.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # run alone or by `python -m bench`: find _reference
import torch  # noqa: E402
from _reference import compare_rates, preset_options, reference_rates  # noqa: E402
from transformers import PrinterCallback, Trainer, TrainerCallback, TrainingArguments  # noqa: E402

from reference_train import data  # noqa: E402
from reference_train.presets import build_model  # noqa: E402
from reference_train.train import Options  # noqa: E402


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


class StepClock(TrainerCallback):
    """The time at the end of every optimizer step: step-to-step intervals cover all of Trainer's loop."""

    def __init__(self):
        self.ends: list[float] = []

    def on_step_end(self, args, state, control, **kwargs):
        self.ends.append(time.perf_counter())


def hf_trainer_rates(options: Options, blocks: data.Blocks, output_dir: str) -> list[float]:
    preset = options.preset
    args = TrainingArguments(
        output_dir=output_dir,
        per_device_train_batch_size=options.per_device_batch,
        max_steps=options.steps,
        learning_rate=options.lr,
        warmup_steps=options.warmup_steps,
        lr_scheduler_type="cosine",
        weight_decay=preset.weight_decay,
        max_grad_norm=preset.max_grad_norm,
        optim="adamw_torch",  # torch.optim.AdamW, as the reference trainer uses (HF's default is the fused one)
        seed=options.seed,
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    model = build_model(preset, seed=options.seed, parity=options.parity)
    clock = StepClock()
    trainer = Trainer(model=model, args=args, train_dataset=Samples(blocks, options), callbacks=[clock])
    trainer.remove_callback(PrinterCallback)  # it prints the final metrics even with logging off
    trainer.train()
    tokens = options.per_device_batch * options.seq_len  # causal LM: every position is a token
    return [tokens / (end - start) for start, end in zip(clock.ends, clock.ends[1:])]


def main() -> None:
    options = preset_options()
    if options.preset.task != "causal-lm":
        raise SystemExit(f"{options.preset.name}: this bench counts tokens as a causal LM does")
    blocks = data.load_blocks(options.preset.task, options.seq_len, options.data)
    with tempfile.TemporaryDirectory(prefix="bench-hf-") as output_dir:
        mine, anchor = compare_rates(
            options, lambda: reference_rates(options), lambda: hf_trainer_rates(options, blocks, output_dir)
        )
    print(f"reference trainer     {mine:>10,.0f} tokens/s")
    print(f"HuggingFace Trainer   {anchor:>10,.0f} tokens/s")
    print(f"ratio {mine / anchor:.3f}  (reference / HF Trainer; goal >= 1.0)")


if __name__ == "__main__":
    main()
