"""`portlayer parity band`: measure how far a correct port may drift from its baseline, step by step.

    portlayer parity band --preset gpt2-tiny --precision bf16 --out band.json      # trains perturbed runs
    portlayer parity band --runs ref1/trainer_state.json ref2/trainer_state.json --out band.json

With `--preset` it trains `--repeats` parity runs of that experiment (any trainer option passes through, as
to `parity run`), each from the same initial weights moved by one float32 ulp at random (`--perturb-init`):
the rounding a correct port introduces, which training then amplifies (docs/parity.md "The noise band" has the
measurements that chose it). With `--runs` the arguments are a program's own reference runs, two or more, in
any log format `parity compare` reads. Either way the band is written to `--out` for `parity compare --band`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from portlayer.cli import UnusableInput
from portlayer.train.band import FACTOR, Band, BandError, measure_band, write_band
from portlayer.train.cli import format_option
from portlayer.train.logs import LogError, read_log
from portlayer.train.logs.series import LABELS
from portlayer.train.parity_run import check_writable
from portlayer.train.parity_run import run as parity_run
from portlayer.train.presets import PRESETS

DEFAULT_REPEATS = 3


@click.command(
    "band", context_settings={"ignore_unknown_options": True, "help_option_names": ["-h", "--help"]}
)
@click.option("--preset", type=click.Choice(list(PRESETS)), help="Train perturbed runs of this preset.")
@click.option("--runs", "from_runs", is_flag=True, help="The arguments are reference runs (two or more), not trainer options.")
@click.option(
    "--repeats", default=DEFAULT_REPEATS, show_default=True, type=click.IntRange(min=2), help="Perturbed runs to train."
)
@click.option("--nproc", default=1, show_default=True, type=click.IntRange(min=1), help="Processes per run.")
@click.option("--steps", type=click.IntRange(min=1), help="Optimizer steps [preset's default].")
@click.option("--keep", type=click.Path(file_okay=False, path_type=Path), help="Keep the perturbed runs' files here.")
@click.option("--factor", default=FACTOR, show_default=True, type=click.FloatRange(min=1), help="The band's width over the references' spread.")
@format_option
@click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path), help="Band file to write.")
@click.argument("arguments", nargs=-1, type=click.UNPROCESSED)
def band(preset, from_runs, repeats, nproc, steps, keep, factor, log_format, out, arguments) -> None:
    """Measure the noise band of PRESET's training (or of the reference runs given with --runs)."""
    check_writable(out)
    if from_runs == (preset is not None):
        raise UnusableInput("give --preset P (trains perturbed runs) or --runs FILE FILE … (your own), not both")
    if from_runs:
        paths = [Path(argument) for argument in arguments]
    else:
        paths = _train_references(preset, repeats, nproc, steps, keep, arguments)
    try:
        measured = measure_band([read_log(path, log_format) for path in paths], factor, tuple(map(str, paths)))
    except (LogError, BandError) as exc:
        raise UnusableInput(str(exc)) from None
    write_band(out, measured)
    for line in summary(measured):
        click.echo(line)
    click.echo(f"wrote {out}")


def _train_references(preset, repeats, nproc, steps, keep, options) -> list[Path]:
    folder = keep or Path(tempfile.mkdtemp(prefix=f"portlayer-band-{preset}-"))
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for seed in range(1, repeats + 1):
        path = folder / f"{preset}.perturbed-{seed}.json"
        click.echo(f"reference run {seed} of {repeats}: {path}")
        click.get_current_context().invoke(
            parity_run, preset=preset, nproc=nproc, steps=steps, out=path,
            trainer_options=(*options, "--perturb-init", str(seed)),
        )  # fmt: skip
        paths.append(path)
    return paths


def summary(measured: Band) -> list[str]:
    """One line per quantity: the band's width at its first and last step."""
    steps = sorted(measured.widths)
    lines = [f"band of {len(measured.references)} runs over {len(steps)} steps (x{measured.factor:g} their spread):"]
    for quantity, label in LABELS.items():
        widths = [(step, measured.widths[step][quantity]) for step in steps if quantity in measured.widths[step]]
        if widths:
            (first, low), (last, high) = widths[0], widths[-1]
            lines.append(f"  {label:<14} ±{low:.2e} at step {first} .. ±{high:.2e} at step {last}")
    return lines
