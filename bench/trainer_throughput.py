"""Tokens/s of whole training runs on the active device: the reference trainer, eager and with `--compile`,
against HuggingFace's `Trainer` (fused AdamW), on the same preset, data, batch, precision and schedule.

Each side is a process of its own that trains `--steps` steps from the same initial weights; its tokens/s is
taken over the steps after `--skip` (compilation, allocations and the first optimizer step left out), between
two waits for the device. MFU counts 6 x parameters FLOPs per token against the device's dense 16-bit peak
(known for a few devices below; none on the cpu).

Goal on a GPU (issue 29): reference trainer with --compile >= 2x HF Trainer's tokens/s and >= 30% MFU on gpt2,
bf16, 16 x 1024 tokens a step. On the cpu it shows what --compile buys.

    python bench/trainer_throughput.py                 # gpt2 bf16 on an accelerator, gpt2-tiny fp32 on the cpu
    python bench/trainer_throughput.py --preset gpt2 --precision bf16 --steps 40 --out figures.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# Dense bf16/fp16 peak FLOP/s by device name (the vendors' datasheets, without sparsity).
PEAK_FLOPS = {"H100 PCIe": 756e12, "H100": 989e12, "H200": 989e12, "A100": 312e12}


def peak_flops(device_name: str) -> float | None:
    return next((flops for name, flops in PEAK_FLOPS.items() if name in device_name), None)


def hf_trainer_side(preset_name: str, steps: int, skip: int, precision: str) -> dict:
    """HuggingFace's Trainer on the preset's model and the reference trainer's data; tokens/s after `skip` steps."""
    from _reference import Samples, preset_options
    from transformers import PrinterCallback, Trainer, TrainerCallback, TrainingArguments

    import portlayer
    from portlayer.train import data
    from portlayer.train.presets import build_model

    options = preset_options(preset_name, steps)
    preset = options.preset
    samples = Samples(data.load_blocks(preset.task, preset.seq_len, None), options)

    class Clock(TrainerCallback):
        marks: dict[int, float] = {}

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step in (skip, steps):
                portlayer.synchronize()
                self.marks[state.global_step] = time.perf_counter()

    model = build_model(preset, seed=0, parity=False, attention="sdpa")  # transformers' own, as Trainer users have
    with tempfile.TemporaryDirectory(prefix="bench-hf-") as output_dir:
        args = TrainingArguments(
            output_dir=output_dir, per_device_train_batch_size=preset.per_device_batch, max_steps=steps,
            learning_rate=preset.lr, warmup_steps=preset.warmup_steps, lr_scheduler_type="cosine",
            weight_decay=preset.weight_decay, max_grad_norm=preset.max_grad_norm, optim="adamw_torch_fused",
            bf16=precision == "bf16", fp16=precision == "fp16", use_cpu=not portlayer.backend().is_accelerator,
            seed=0, report_to="none", save_strategy="no", logging_strategy="no", disable_tqdm=True,
            dataloader_num_workers=0,
        )  # fmt: skip
        trainer = Trainer(model=model, args=args, train_dataset=samples, callbacks=[Clock()])
        trainer.remove_callback(PrinterCallback)
        trainer.train()
    seconds = Clock.marks[steps] - Clock.marks[skip]
    return {
        "tokens_per_s": (steps - skip) * preset.per_device_batch * preset.seq_len / seconds,
        "parameters": sum(p.numel() for p in model.parameters()),  # for MFU: 6 x parameters FLOPs a token
    }


def reference_side(preset: str, steps: int, skip: int, precision: str, compile: bool) -> dict:
    """The reference trainer as a user runs it; tokens/s from its run file over the steps after `skip`."""
    with tempfile.TemporaryDirectory(prefix="bench-ref-") as folder:
        out = Path(folder) / "run.json"
        command = [sys.executable, "-m", "portlayer.train", "--preset", preset, "--precision", precision,
                   "--steps", str(steps), "--log-every", str(skip), "--quiet", "--out", str(out)]  # fmt: skip
        subprocess.run(command + (["--compile"] if compile else []), check=True)
        run = json.loads(out.read_text())
    timed = [s for s in run["steps"] if s["step"] > skip]
    # Steps are read in windows of `skip` (the trainer's --log-every), each step its window's share of the time.
    seconds = sum(1 / s["tokens_per_s"] for s in timed)
    return {
        "tokens_per_s": len(timed) / seconds,
        "optimizer": run["metadata"]["optimizer"],
        "peak_memory_bytes": run["summary"]["peak_memory_bytes"],
        "device_name": run["metadata"]["device_name"],
    }


def main() -> None:
    import portlayer

    accelerator = portlayer.backend().is_accelerator
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="gpt2" if accelerator else "gpt2-tiny")
    parser.add_argument("--precision", default="bf16" if accelerator else "fp32")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--skip", type=int, default=10, help="steps left out of each side's tokens/s")
    parser.add_argument("--out", type=Path, help="write the figures here (JSON)")
    parser.add_argument("--hf-side", action="store_true", help=argparse.SUPPRESS)  # the child that runs Trainer
    args = parser.parse_args()
    if args.hf_side:
        print(json.dumps(hf_trainer_side(args.preset, args.steps, args.skip, args.precision)))
        return
    child = [sys.executable, __file__, "--hf-side", "--preset", args.preset, "--precision", args.precision,
             "--steps", str(args.steps), "--skip", str(args.skip)]  # fmt: skip
    hf = json.loads(subprocess.run(child, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
    eager = reference_side(args.preset, args.steps, args.skip, args.precision, compile=False)
    compiled = reference_side(args.preset, args.steps, args.skip, args.precision, compile=True)
    report(args, hf, eager, compiled)


def report(args, hf: dict, eager: dict, compiled: dict) -> None:
    parameters = hf["parameters"]
    peak = peak_flops(eager["device_name"])
    figures = {"preset": args.preset, "precision": args.precision, "steps": args.steps, "skip": args.skip,
               "device_name": eager["device_name"], "parameters": parameters, "peak_flops": peak,
               "hf_trainer": hf, "reference": eager, "reference_compiled": compiled}  # fmt: skip
    print(f"{args.preset}, {args.precision}, {args.steps} steps (tokens/s after step {args.skip}), "
          f"{eager['device_name']}")  # fmt: skip
    for name, side in (("HF Trainer (adamw_torch_fused)", hf), (f"reference trainer, {eager['optimizer']}", eager),
                       ("reference trainer --compile", compiled)):  # fmt: skip
        mfu = f"  MFU {6 * parameters * side['tokens_per_s'] / peak:.1%}" if peak else ""
        print(f"  {name:<40} {side['tokens_per_s']:>12,.0f} tok/s  {side['tokens_per_s'] / hf['tokens_per_s']:.2f}x{mfu}")
    print(f"--compile / eager {compiled['tokens_per_s'] / eager['tokens_per_s']:.2f}; "
          f"goal on a GPU: --compile >= 2.0x HF Trainer and >= 30% MFU")  # fmt: skip
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
