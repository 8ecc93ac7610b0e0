"""`portlayer parity check --preset P --nproc N [--precision fp32|bf16] [TRAINER OPTIONS…]`: train the published
experiment here and hold it to the committed baseline of the same preset and precision, in one command.

The baseline (`runfile.BASELINES`: a GPU run before the cpu's; `--baseline FILE` forces another) fixes the
experiment: its steps and schedule, global batch, sequence length, learning rate and warm-up, seed, precision
and parity mode. On N ranks the global batch is made by accumulation: N x per-device batch x micro-batches. The
run is `parity run`'s and the comparison `parity compare`'s, invoked, not re-implemented: at rtol 1e-5 where fp32
rounding stays at its floor, by the committed noise band (`BANDS`) where bf16 or a spike in the baseline's loss
lets rounding grow. Exit 0 within tolerance or band, 1 diverged, 2 unusable input.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import click
from click.core import ParameterSource

from portlayer.cli import UnusableInput
from portlayer.precision import FP32, PRECISIONS
from portlayer.train.band import BANDS
from portlayer.train.cli import compare
from portlayer.train.compare import DEFAULT_RTOL
from portlayer.train.parity_run import check_trainer_arguments
from portlayer.train.parity_run import run as parity_run
from portlayer.train.presets import PRESETS
from portlayer.train.runfile import BASELINES, RunFileError, read_run

# A loss this many times the lowest before it is a spike: the H200's fp32 gpt2 run jumps 1.47x at step 19 (4.66
# to 6.87), after which its bf16 twin parts from it by up to 0.84; the committed runs' ordinary ups reach 1.07x.
SPIKE = 1.2
# The trainer options that define the experiment, which the baseline gives (--steps and --precision are
# `check`'s own): a run with another of them is no check of the baseline.
FIXED_BY_BASELINE = ("schedule_steps", "grad_accum", "seq_len", "lr", "warmup_steps", "seed", "parity", "tf32",
                     "keep_dropout", "perturb_init")  # fmt: skip
# fp32 across devices, measured (reference_train/baselines/README.md): what `expect` quotes.
FP32_ACROSS_DEVICES = "the H200 against the cpu: 1.0e-7 .. 2.1e-7"


@dataclass(frozen=True)
class Baseline:
    path: Path
    run: dict
    note: str | None = None  # why this file, where the choice needs saying

    @property
    def metadata(self) -> dict:
        return self.run["metadata"]


def committed(preset: str) -> list[Baseline]:
    """The committed baselines of `preset`, GPU runs first (any device before the cpu), by name within each."""
    found = [Baseline(path, read_run(path)) for path in sorted(BASELINES.glob(f"{preset}.*.json"))]
    found = [baseline for baseline in found if baseline.run["preset"] == preset]
    return sorted(found, key=lambda baseline: baseline.metadata["backend"] == "cpu")


def choose_baseline(preset: str, precision: str) -> Baseline:
    """The committed baseline of `preset` in `precision`; exit 2 with what is committed where there is none."""
    baselines = committed(preset)
    matching = [baseline for baseline in baselines if baseline.metadata["precision"] == precision]
    if not matching:
        listing = ", ".join(f"{b.path.name} ({b.metadata['precision']})" for b in baselines)
        raise UnusableInput(f"no committed baseline of {preset} in {precision}; committed: {listing or 'none'}")
    chosen = matching[0]
    if chosen.metadata["backend"] == "cpu":
        return Baseline(chosen.path, chosen.run, f"no GPU run of {preset} in {precision} is committed: the cpu's")
    return chosen


def given_baseline(path: Path, preset: str, precision: str | None) -> Baseline:
    try:
        run = read_run(path)
    except RunFileError as exc:
        raise UnusableInput(f"--baseline {exc}") from None
    if run["preset"] != preset:
        raise UnusableInput(f"--baseline {path} is a run of {run['preset']}, not of --preset {preset}")
    if precision not in (None, run["metadata"]["precision"]):
        raise UnusableInput(f"--precision {precision}, but --baseline {path} trained in {run['metadata']['precision']}")
    if not run["metadata"]["parity"]:
        raise UnusableInput(f"--baseline {path} was not trained in parity mode: compare it with `parity compare`")
    return Baseline(path, run, "given with --baseline")


def user_options(preset: str, options: tuple[str, ...], baseline: Baseline) -> dict:
    """The trainer options given, parsed as the ranks will parse them; exit 2 for one the baseline fixes."""
    context = check_trainer_arguments(["--preset", preset, *options], "portlayer parity check")
    for parameter in context.command.params:
        if parameter.name in FIXED_BY_BASELINE and context.get_parameter_source(parameter.name) is ParameterSource.COMMANDLINE:
            raise UnusableInput(
                f"{parameter.opts[0]} is the baseline's ({baseline.path.name}): `parity check` trains its experiment, "
                "`parity run` any other"
            )
    return context.params


def experiment_arguments(metadata: dict, nproc: int, batch: int) -> list[str]:
    """The trainer options that make the baseline's experiment on `nproc` ranks of `batch` samples."""
    global_batch = metadata["global_batch"]
    if global_batch % (nproc * batch):
        raise UnusableInput(
            f"the baseline's global batch {global_batch} is no multiple of --nproc {nproc} x per-device batch {batch} "
            f"({nproc * batch}): "
            "choose --nproc and --per-device-batch whose product divides it"
        )
    return [
        "--per-device-batch", str(batch), "--grad-accum", str(global_batch // (nproc * batch)), "--seq-len", str(metadata["seq_len"]),
        "--lr", repr(metadata["lr"]), "--warmup-steps", str(metadata["warmup_steps"]),
        "--schedule-steps", str(metadata["schedule_steps"]), "--seed", str(metadata["seed"]),
        "--precision", metadata["precision"],
    ]  # fmt: skip


def loss_spike(run: dict) -> tuple[int, float, float] | None:
    """The first step whose loss is over SPIKE times the lowest before it: (step, that lowest, the loss)."""
    lowest = None
    for step in run["steps"]:
        loss = step["loss"]
        if lowest is not None and loss > SPIKE * lowest:
            return step["step"], lowest, loss
        lowest = loss if lowest is None else min(lowest, loss)
    return None


def judgement(baseline: Baseline, band: Path | None) -> tuple[Path | None, str]:
    """How the run is judged, the band's file or None for rtol, and the line that says what to expect."""
    preset, precision, spike = baseline.run["preset"], baseline.metadata["precision"], loss_spike(baseline.run)
    if band is not None:
        return band, f"expect: every step within the band {band} (given with --band)"
    if precision == FP32.name and spike is None:
        return None, f"expect: fp32 rounding, every step within rtol {DEFAULT_RTOL:g} ({FP32_ACROSS_DEVICES})"
    why = f"{precision} rounding grows over the steps" if precision != FP32.name else "rounding grows after it"
    if spike is not None:
        why = f"the baseline's loss spikes at step {spike[0]} ({spike[1]:.2f} to {spike[2]:.2f}): {why}"
    committed_band = BANDS / f"{preset}.{precision}.json"
    if committed_band.is_file():
        return committed_band, f"expect: {why}; judged by the committed band {committed_band.name} (`parity compare --band`)"
    return None, (
        f"expect: {why}, and no band of {preset} in {precision} is committed: judged at rtol {DEFAULT_RTOL:g}, which a "
        f"correct run may exceed; `portlayer parity band --preset {preset} --precision {precision} --out band.json` "
        "measures one for --band"
    )


def describe(baseline: Baseline, nproc: int, steps: int, arguments: list[str]) -> str:
    """Which baseline and what experiment, in one line each."""
    metadata = baseline.metadata
    source = f" ({baseline.note})" if baseline.note else ""
    options = dict(zip(arguments[::2], arguments[1::2]))
    return (
        f"baseline: {baseline.path}{source}: {metadata['backend']}, {metadata['device_name']}, torch {metadata['torch']}\n"
        f"experiment: {steps} of its {metadata['steps']} steps, global batch {metadata['global_batch']} = {nproc} rank(s) "
        f"x {options['--per-device-batch']} x {options['--grad-accum']} micro-batch(es), seq len {metadata['seq_len']}, lr {metadata['lr']:g}, "
        f"{metadata['precision']}, parity mode"
    )


@click.command("check", context_settings={"ignore_unknown_options": True, "help_option_names": ["-h", "--help"]})
@click.option("--preset", required=True, type=click.Choice(list(PRESETS)), help="Model preset.")
@click.option("--nproc", default=1, show_default=True, type=click.IntRange(min=1), help="Processes (ranks).")
@click.option("--precision", type=click.Choice(list(PRECISIONS)), help="The baseline's precision [fp32].")
@click.option("--steps", type=click.IntRange(min=1), help="Train and compare the first N steps [the baseline's].")
@click.option("--baseline", "baseline_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Compare with this run file instead of the committed baseline.")  # fmt: skip
@click.option("--band", "band_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Judge by this noise band (`portlayer parity band`) [the committed one where needed].")  # fmt: skip
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Keep the run file here.")
@click.argument("trainer_options", nargs=-1, type=click.UNPROCESSED)
def check(preset, nproc, precision, steps, baseline_path, band_path, out, trainer_options) -> None:
    """Train PRESET as its committed baseline was trained (steps, global batch, lr, seed, precision) and compare.

    Other options go to the trainer (`python -m portlayer.train --help`), e.g. `--strategy fsdp2`.
    """
    if baseline_path is None:
        baseline = choose_baseline(preset, precision or FP32.name)
    else:
        baseline = given_baseline(baseline_path, preset, precision)
    given = user_options(preset, trainer_options, baseline)
    batch = given["per_device_batch"] or baseline.metadata["per_device_batch"]
    arguments = experiment_arguments(baseline.metadata, nproc, batch)
    if steps is not None and steps > baseline.metadata["steps"]:
        raise UnusableInput(f"--steps {steps}: the baseline has {baseline.metadata['steps']}")
    steps = steps or baseline.metadata["steps"]
    band, expectation = judgement(baseline, band_path)
    click.echo(describe(baseline, nproc, steps, arguments))
    click.echo(expectation)
    context = click.get_current_context()
    with tempfile.TemporaryDirectory(prefix="portlayer-check-") as folder:
        run_file = out or Path(folder) / f"{preset}.json"
        context.invoke(parity_run, preset=preset, nproc=nproc, steps=steps, out=run_file,
                       trainer_options=(*arguments, *trainer_options))  # fmt: skip
        if out is not None:
            click.echo(f"run file: {out}")
        context.invoke(compare, baseline=str(baseline.path), run=str(run_file), band_path=None if band is None else str(band))
