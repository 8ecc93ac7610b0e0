"""`portlayer parity`: train the reference model, compare a run with a baseline, locate where two runs part."""

from __future__ import annotations

import json
from pathlib import Path

import click

from portlayer.cli import LazyGroup, UnusableInput
from portlayer.train.compare import DEFAULT_RTOL, IncomparableRuns, compare_runs

# name -> (module, attribute, extra); the training and locating commands pull in transformers, so they
# load only when run.
PARITY_SUBCOMMANDS = {
    "run": ("portlayer.train.parity_run", "run", "train"),
    "locate": ("portlayer.train.locate.cli", "locate", "train"),
    "dump": ("portlayer.train.locate.cli", "dump", "train"),
    "diff": ("portlayer.train.locate.cli", "diff", "train"),
}

EXIT_DIVERGED = 1


@click.group(cls=LazyGroup, lazy_subcommands=PARITY_SUBCOMMANDS)
def parity() -> None:
    """Train the reference model and check that its loss matches a baseline recorded on another device."""


@parity.command()
@click.argument("baseline", metavar="BASELINE.json")
@click.argument("run", metavar="RUN.json")
@click.option(
    "--rtol",
    type=click.FloatRange(min=0),
    default=DEFAULT_RTOL,
    show_default=True,
    help="Largest relative loss error per step still counted as the same training.",
)
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
    plot_path: str | None,
    all_steps: bool,
    steps: int | None,
    as_json: bool,
) -> None:
    """Compare RUN.json with BASELINE.json step by step.

    Exit 0 when every step is within rtol, 1 when the run diverged, 2 when the files are unusable or
    record different experiments (preset, model config, data, initial weights, global batch, sequence
    length). Runs of
    different lengths are compared over the steps both have, and say so. Runs that differ only in
    settings (lr, precision, dropout, ...) are compared, and the differences named.
    """
    from portlayer.train.report import comparison_json, run_table, setting_notes, step_table, verdict_line
    from portlayer.train.runfile import RunFileError, read_run

    try:
        comparison = compare_runs(read_run(baseline), read_run(run), rtol, steps)
    except (RunFileError, IncomparableRuns) as exc:
        raise UnusableInput(str(exc)) from None

    if as_json:
        plot = None if plot_path is None else str(_plot(comparison, plot_path, baseline, run))
        click.echo(json.dumps(comparison_json(comparison, baseline, run, plot), indent=1))
        if not comparison.within_tolerance:
            click.get_current_context().exit(EXIT_DIVERGED)
        return
    click.echo(step_table(comparison, all_steps=all_steps))
    click.echo()
    click.echo(run_table(comparison))
    click.echo()
    if plot_path is not None:
        click.echo(f"plot: {_plot(comparison, plot_path, baseline, run)}")
    for note in setting_notes(comparison):
        click.echo(note)
    click.echo(verdict_line(comparison))
    if not comparison.within_tolerance:
        click.get_current_context().exit(EXIT_DIVERGED)


def _plot(comparison, plot_path: str, baseline: str, run: str):
    from portlayer.train.plot import write_plot

    try:
        return write_plot(comparison, plot_path, (Path(baseline).name, Path(run).name))
    except OSError as exc:
        raise UnusableInput(f"cannot write the plot {plot_path}: {exc.strerror or exc}") from None
