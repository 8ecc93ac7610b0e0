"""`portlayer parity`: train the reference model, compare a run with a baseline, locate where two runs part."""

from __future__ import annotations

import json
from pathlib import Path

import click

from portlayer.cli import LazyGroup, UnusableInput
from portlayer.train.compare import DEFAULT_RTOL

# What --format takes (logs.FORMATS, written out here: the command line loads no reader until it runs).
LOG_FORMATS = ("tensorboard", "portlayer", "trainer_state", "ms-swift", "jsonl", "megatron", "deepspeed", "csv")

# name -> (module, attribute, extra); the training and locating commands pull in transformers, so they
# load only when run.
PARITY_SUBCOMMANDS = {
    "run": ("portlayer.train.parity_run", "run", "train"),
    "locate": ("portlayer.train.locate.cli", "locate", "train"),
    "dump": ("portlayer.train.locate.cli", "dump", "train"),
    "diff": ("portlayer.train.locate.cli", "diff", "train"),
    "band": ("portlayer.train.band_cli", "band", "train"),
    "check": ("portlayer.train.parity_check", "check", "train"),
}

EXIT_DIVERGED = 1


@click.group(cls=LazyGroup, lazy_subcommands=PARITY_SUBCOMMANDS)
def parity() -> None:
    """Train the reference model and check that its loss matches a baseline recorded on another device."""


def format_option(function):
    return click.option(
        "--format",
        "log_format",
        type=click.Choice(LOG_FORMATS),
        help="Read the files as this format [detected from each file's content].",
    )(function)


@parity.command()
@click.argument("baseline", metavar="BASELINE")
@click.argument("run", metavar="RUN")
@click.option(
    "--rtol",
    type=click.FloatRange(min=0),
    default=DEFAULT_RTOL,
    show_default=True,
    help="Largest relative loss error per step still counted as the same training (without --band).",
)
@click.option(
    "--band",
    "band_path",
    metavar="BAND.json",
    help="Judge by this noise band (`portlayer parity band`) instead of --rtol: loss, grad norm and lr.",
)
@format_option
@click.option(
    "--plot",
    "plot_path",
    metavar="OUT.png",
    default=None,
    help="Write both loss curves and the relative error per step to this image.",
)
@click.option("--all-steps", is_flag=True, help="Show every step in the table, not a sample.")
@click.option(
    "--steps",
    type=click.IntRange(min=1),
    help="Compare exactly the first N steps; both runs must have them [the steps both runs have].",
)
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as one JSON document.")
def compare(
    baseline: str,
    run: str,
    rtol: float,
    band_path: str | None,
    log_format: str | None,
    plot_path: str | None,
    all_steps: bool,
    steps: int | None,
    as_json: bool,
) -> None:
    """Compare RUN with BASELINE step by step: portlayer run files, or the logs of any trainer
    (trainer_state.json, ms-swift, Megatron/MindSpeed, DeepSpeed, TensorBoard, CSV, JSONL).

    Exit 0 when every step is within rtol (or the band), 1 when the run diverged, 2 when the files are unusable
    or record different experiments (preset, model config, data, initial weights, global batch, sequence
    length). Runs of different lengths or logging intervals are compared over the steps both have, and say
    so. Runs that differ only in settings (lr, precision, dropout, ...) are compared, and the differences
    named. Beside the verdict: the industry's fixed criteria (Ascend, MindSpeed-LLM).
    """
    from portlayer.train import report
    from portlayer.train.band import BandError, judge, read_band
    from portlayer.train.compare import IncomparableRuns, compare_logs
    from portlayer.train.logs import LogError, read_log

    try:
        comparison = compare_logs(read_log(baseline, log_format), read_log(run, log_format), rtol, steps)
        verdict = None if band_path is None else judge(comparison, read_band(band_path))
    except (LogError, IncomparableRuns, BandError) as exc:
        raise UnusableInput(str(exc)) from None
    same = comparison.within_tolerance if verdict is None else verdict.within

    if as_json:
        plot = None if plot_path is None else str(_plot(comparison, plot_path, baseline, run))
        click.echo(json.dumps(report.comparison_json(comparison, baseline, run, plot, verdict), indent=1))
        if not same:
            click.get_current_context().exit(EXIT_DIVERGED)
        return
    click.echo(report.step_table(comparison, all_steps=all_steps, band=verdict))
    click.echo()
    click.echo(report.run_table(comparison))
    click.echo()
    if plot_path is not None:
        click.echo(f"plot: {_plot(comparison, plot_path, baseline, run)}")
    for line in report.criteria_lines(comparison):
        click.echo(line)
    for note in report.setting_notes(comparison) + ([] if verdict is None else report.band_notes(verdict)):
        click.echo(note)
    click.echo(report.verdict_line(comparison) if verdict is None else report.band_verdict_line(comparison, verdict))
    if not same:
        click.get_current_context().exit(EXIT_DIVERGED)


def _plot(comparison, plot_path: str, baseline: str, run: str):
    from portlayer.train.plot import write_plot

    try:
        return write_plot(comparison, plot_path, (Path(baseline).name, Path(run).name))
    except OSError as exc:
        raise UnusableInput(f"cannot write the plot {plot_path}: {exc.strerror or exc}") from None
