"""`portlayer parity`: train the reference model, compare a run with a baseline, locate where two runs part."""

from __future__ import annotations

import click
from portlayer.train.compare import DEFAULT_RTOL, IncomparableRuns, compare_runs

from portlayer.cli import LazyGroup

# name -> (module, attribute, extra); the training and locating commands pull in transformers, so they
# load only when run.
PARITY_SUBCOMMANDS = {
    "run": ("portlayer.train.parity_run", "run", "train"),
    "locate": ("portlayer.train.locate.cli", "locate", "train"),
    "dump": ("portlayer.train.locate.cli", "dump", "train"),
    "diff": ("portlayer.train.locate.cli", "diff", "train"),
}

EXIT_DIVERGED = 1


class UnusableInput(click.ClickException):
    """A run file that cannot be compared (missing, corrupt, another experiment): exit 2, one line."""

    exit_code = 2


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
def compare(baseline: str, run: str, rtol: float, plot_path: str | None, all_steps: bool) -> None:
    """Compare RUN.json with BASELINE.json step by step.

    Exit 0 when every step is within rtol, 1 when the run diverged, 2 when the files are unusable or
    record different experiments (preset, model config, data, initial weights, global batch, sequence
    length, step count). Runs that differ only in settings (lr, precision, dropout, ...) are compared, and the
    differences named.
    """
    from portlayer.train.report import run_table, setting_notes, step_table, verdict_line
    from portlayer.train.runfile import RunFileError, read_run

    try:
        comparison = compare_runs(read_run(baseline), read_run(run), rtol)
    except (RunFileError, IncomparableRuns) as exc:
        raise UnusableInput(str(exc)) from None

    click.echo(step_table(comparison, all_steps=all_steps))
    click.echo()
    click.echo(run_table(comparison))
    click.echo()
    if plot_path is not None:
        from portlayer.train.plot import write_plot

        try:
            click.echo(f"plot: {write_plot(comparison, plot_path)}")
        except OSError as exc:
            raise UnusableInput(f"cannot write the plot {plot_path}: {exc.strerror or exc}") from None
    for note in setting_notes(comparison):
        click.echo(note)
    click.echo(verdict_line(comparison))
    if not comparison.within_tolerance:
        click.get_current_context().exit(EXIT_DIVERGED)
