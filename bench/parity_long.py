"""1,000 steps, as Ascend's migration standard asks: does the noise band still tell correct ports from wrong
ones over a long run, and what do the fixed criteria say there?

gpt2-tiny in parity mode on the cpu, one thread, trained in this process with the trainer's own step
(`TrainingStep`; no evaluation, nothing written): three runs from initial weights moved by one ulp make the
band (as `portlayer parity band` does), the baseline is the unperturbed run, a correct port takes the same
global batch in one micro-batch instead of two (another reduction order), and the wrong ports are the subtle
ones of tests/parity/wrong_ports.py, whose effect grows with the run. Smaller batches than the preset's keep
it to minutes (--per-device-batch, --seq-len).

Prints per run the band's verdict (the first step out and the quantity; and on the loss alone, for logs that
have nothing else) beside the fixed criteria, then the figure: how far the closest wrong port went past the
band over how much of it the correct port used (the anchor). Goal: the band calls every wrong port and no
correct one (ratio > 1). Run: python bench/parity_long.py [--precision bf16] [--steps 1000]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run alone: find tests.parity.wrong_ports
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

import portlayer  # noqa: E402
from portlayer.train import data  # noqa: E402
from portlayer.train.band import judge, measure_band  # noqa: E402
from portlayer.train.compare import compare_logs  # noqa: E402
from portlayer.train.criteria import industry_criteria  # noqa: E402
from portlayer.train.logs.series import Collector, Series  # noqa: E402
from portlayer.train.presets import build_model, get_preset  # noqa: E402
from portlayer.train.train import Options, TrainingStep, World, perturb_by_one_ulp  # noqa: E402
from tests.parity.wrong_ports import WRONG_PORTS  # noqa: E402

SUBTLE = ("learning rate x1.01", "warm-up one step longer", "weight decay dropped", "AdamW eps 1e-6 (not 1e-8)")


def trained(options: Options, perturb: int = 0, wrong: str | None = None) -> Series:
    """The run's loss, gradient norm and learning rate per step, as the trainer's loop records them."""
    port = WRONG_PORTS[wrong] if wrong else None
    options = port.change(options) if port else options
    with port.patch() if port else contextlib.nullcontext():
        portlayer.set_deterministic(True)
        blocks = data.load_blocks(options.preset.task, options.seq_len)
        order = data.Order(len(blocks.train), options.seed)
        model = build_model(options.preset, seed=options.seed, parity=True)
        if perturb:
            perturb_by_one_ulp(model, perturb)
        step = TrainingStep.build(options, World.from_env(), torch.device("cpu"), model, blocks, order)
        collected = Collector()
        for index in range(1, options.steps + 1):
            lr = step.scheduler.get_last_lr()[0]
            losses, _, norm = step(index)  # read at once: this bench times nothing
            collected.add(index, loss=sum(losses.tolist()) / options.grad_accum, grad_norm=float(norm), lr=lr)
    return collected.series(wrong or ("baseline" if not perturb else f"perturbed {perturb}"), "bench run")


def loss_only(series: Series) -> Series:
    collected = Collector()
    for point in series.points:
        collected.add(point.step, loss=point.values["loss"])
    return collected.series(series.path, series.format)


def row(name: str, baseline: Series, run: Series, band, loss_band) -> tuple[str, float]:
    """One printed line, and the most of the band the run used (the worst quantity, worst step)."""
    verdict = judge(compare_logs(baseline, run), band)
    by_loss = judge(compare_logs(loss_only(baseline), loss_only(run)), loss_band)
    mean, first, norm, per_step = (criterion.value for criterion in industry_criteria(compare_logs(baseline, run)))
    out = verdict.first_out
    said = "within" if out is None else f"out at {out[0]} ({', '.join(e.quantity for e in out[1])})"
    alone = "within" if by_loss.first_out is None else f"out at {by_loss.first_out[0]}"
    used = max(excursion.used for excursion in verdict.excursions)
    print(
        f"{name:<34} {said:<28} {alone:<14} {mean:>9.2e} {'pass' if mean < 0.01 else 'FAIL':<5}"
        f" {first:>8.1e} {norm:>9.2e} {per_step:>9.2e} {used:>9.3g}",
        flush=True,
    )
    return name, used


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", default="bf16", choices=("fp32", "bf16"))
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--per-device-batch", type=int, default=4)
    parser.add_argument("--seq-len", type=int, default=32)
    args = parser.parse_args()
    torch.set_num_threads(1)  # on a shared machine a step with two threads waits on whichever was descheduled
    preset = get_preset("gpt2-tiny")
    options = Options(
        preset=preset, steps=args.steps, per_device_batch=args.per_device_batch, grad_accum=2, seq_len=args.seq_len,
        lr=preset.lr, warmup_steps=preset.warmup_steps, precision=args.precision, parity=True, quiet=True,
    )  # fmt: skip
    began = time.perf_counter()
    references = [trained(options, perturb=seed) for seed in (1, 2, 3)]
    band, loss_band = measure_band(references), measure_band([loss_only(series) for series in references])
    baseline = trained(options)
    print(f"gpt2-tiny {args.precision}, {args.steps} steps, {args.per_device_batch} x {args.seq_len} tokens x 2 micro-batches")
    print(f"{'run':<34} {'band':<28} {'loss alone':<14} {'mean loss':>9} {'1%':<5} {'step 1':>8} {'grad norm':>9}"
          f" {'max loss':>9} {'band used':>9}")  # fmt: skip
    correct = [row("correct port: 1 micro-batch of 8", baseline,
                   trained(dataclasses.replace(options, per_device_batch=2 * options.per_device_batch, grad_accum=1)),
                   band, loss_band)]  # fmt: skip
    correct += [row("correct port: perturbed 4", baseline, trained(options, perturb=4), band, loss_band)]
    wrong = [row(name, baseline, trained(options, wrong=name), band, loss_band) for name in SUBTLE]
    anchor, figure = max(used for _, used in correct), min(used for _, used in wrong)
    print(
        f"closest wrong port {figure:.3g} x the band, correct ports at most {anchor:.3g}: ratio {figure / anchor:.3g}"
        f" (goal > 1); {time.perf_counter() - began:.0f} s"
    )


if __name__ == "__main__":
    main()
