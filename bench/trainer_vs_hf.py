"""Tokens/s of the reference trainer against HuggingFace's `Trainer` on the same tiny preset and hardware:
same model and initial weights, same data, batch, AdamW, warm-up + cosine schedule and gradient clipping,
one cpu process, nothing logged or saved.

Lockstep on one shared model (see `_reference.py` for why): after each of Trainer's optimizer steps, a
callback runs one step of the reference trainer's own `TrainingStep`. Trainer's time for a step is the
whole of its loop from the end of the previous reference step (data loading, forward, backward,
clipping, optimizer, schedule, callbacks); the reference trainer's is the part its loop times and
reports as tokens/s. Both sides process the same number of tokens per step.

Goal: ratio >= 1.0 (reference trainer's tokens/s over HF Trainer's). Run: python bench/trainer_vs_hf.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # run alone or by `python -m bench`: find _reference
from _reference import WARMUP, Samples, preset_options, reference_step, report, timed_reference_step  # noqa: E402
from transformers import PrinterCallback, Trainer, TrainerCallback, TrainingArguments  # noqa: E402

from portlayer.train.train import TrainingStep  # noqa: E402


class Lockstep(TrainerCallback):
    """One reference-trainer step after each of Trainer's steps; the seconds of each side's steps."""

    def __init__(self, reference: TrainingStep):
        self.reference = reference
        self.trainer_seconds: list[float] = []
        self.reference_seconds: list[float] = []
        self._resumed: float | None = None  # when Trainer's loop got control back

    def on_step_end(self, args, state, control, **kwargs):
        if self._resumed is not None:
            self.trainer_seconds.append(time.perf_counter() - self._resumed)
        self.reference_seconds.append(timed_reference_step(self.reference, state.global_step))
        self._resumed = time.perf_counter()


def main() -> None:
    options = preset_options()
    preset = options.preset
    if preset.task != "causal-lm":
        raise SystemExit(f"{preset.name}: this bench counts tokens as a causal LM does")
    reference = reference_step(options)
    lockstep = Lockstep(reference)
    with tempfile.TemporaryDirectory(prefix="bench-hf-") as output_dir:
        args = TrainingArguments(
            output_dir=output_dir,
            per_device_train_batch_size=options.per_device_batch,
            max_steps=options.steps,
            learning_rate=options.lr,
            warmup_steps=options.warmup_steps,
            lr_scheduler_type="cosine",
            weight_decay=preset.weight_decay,
            max_grad_norm=preset.max_grad_norm,
            optim="adamw_torch_fused",  # torch's fused AdamW, as the reference trainer uses outside parity mode
            seed=options.seed,
            use_cpu=True,
            report_to="none",
            save_strategy="no",
            logging_strategy="no",
            disable_tqdm=True,
            dataloader_num_workers=0,
        )
        trainer = Trainer(
            model=reference.model, args=args, train_dataset=Samples(reference.blocks, options), callbacks=[lockstep]
        )
        trainer.remove_callback(PrinterCallback)  # it prints the final metrics even with logging off
        trainer.train()
    # Trainer's first interval ends at its second step; pair each with the reference step that follows.
    mine, anchor = lockstep.reference_seconds[1:], lockstep.trainer_seconds
    report(
        options, mine[WARMUP:], anchor[WARMUP:], "HuggingFace Trainer step",
        goal="reference trainer / HF Trainer; goal >= 1.0", throughput=True,
    )


if __name__ == "__main__":
    main()
