"""`portlayer parity locate | dump | diff`: find the module that breaks parity.

Exit codes: 0 no divergence, 1 a module diverges (named on the last line), 2 unusable input.
"""

from __future__ import annotations

from pathlib import Path

import click

from portlayer.cli import UnusableInput
from portlayer.train.locate.capture import NoLossError
from portlayer.train.locate.dump import DumpError
from portlayer.train.locate.sides import parse_dtype
from portlayer.train.locate.source import ModelUnavailable, from_factory, from_preset


def _dtype(ctx, param, value):
    if value is None:
        return None
    try:
        return parse_dtype(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def model_options(command):
    """The options that say which model and batch to run."""
    options = [
        click.option("--preset", help="A reference-trainer preset (gpt2-tiny, bert-base-uncased, …)."),
        click.option(
            "--model",
            "factory",
            metavar="MODULE:FUNCTION",
            help="Your own model: a function (in a module or a .py file) returning (model, batch).",
        ),
        click.option("--batch-size", type=click.IntRange(min=1), help="Preset batch size."),
        click.option("--seq-len", type=click.IntRange(min=1), help="Preset sequence length."),
        click.option("--seed", type=int, default=0, show_default=True, help="Seed of the weights and batch."),
        click.option(
            "--dtype",
            callback=_dtype,
            help="Dtype the device side runs in (float32, bfloat16, float16); default: the model's.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _load(preset, factory, batch_size, seq_len, seed):
    if (preset is None) == (factory is None):
        raise UnusableInput("give exactly one of --preset and --model")
    try:
        if preset is not None:
            model, batch = from_preset(preset, batch_size=batch_size, seq_len=seq_len, seed=seed)
            return model, batch, preset
        model, batch = from_factory(factory)
        # The model's class names a user model in the dump: the factory's path may differ per machine.
        return model, batch, type(model).__name__
    except ModelUnavailable as exc:
        raise UnusableInput(str(exc)) from None


def _finish(report, quiet: bool) -> None:
    click.echo(report.summary() if quiet else report.render())
    raise SystemExit(1 if report.diverged else 0)


@click.command()
@model_options
@click.option("--tol", type=click.FloatRange(min=0, min_open=True), help="Tolerance on a module's own error.")
@click.option("-q", "--quiet", is_flag=True, help="Print the verdict only, not the table.")
def locate(preset, factory, batch_size, seq_len, seed, dtype, tol, quiet):
    """Run one forward and backward on the device and on the cpu in float64; name the first module
    whose own error is beyond tolerance."""
    from portlayer.train.locate.oracle import locate as run_locate

    model, batch, _ = _load(preset, factory, batch_size, seq_len, seed)
    try:
        comparison = run_locate(model, batch, dtype=dtype, tolerance=tol)
    except NoLossError as exc:
        raise UnusableInput(str(exc)) from None
    _finish(comparison, quiet)


@click.command()
@model_options
@click.option(
    "-o",
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The dump file (JSON).",
)
@click.option("--full", is_flag=True, help="Also save the full tensors, to OUT.pt beside it.")
def dump(preset, factory, batch_size, seq_len, seed, dtype, out, full):
    """Write per-module statistics of one forward and backward on the active device, for `diff`."""
    from portlayer.train.locate import dump as dumps

    model, batch, name = _load(preset, factory, batch_size, seq_len, seed)
    if not out.parent.is_dir():
        raise UnusableInput(f"{out.parent}: no such directory")
    try:
        collected = dumps.collect(model, batch, dtype=dtype, full=full, model_name=name)
    except NoLossError as exc:
        raise UnusableInput(str(exc)) from None
    files = dumps.write(collected, out)
    size = sum(f.stat().st_size for f in files)
    click.echo(
        f"wrote {', '.join(map(str, files))}: {len(collected.calls)} module calls, {size / 1e6:.2f} MB, "
        f"on {collected.side.describe()}"
    )


@click.command()
@click.argument("a", type=click.Path(path_type=Path))
@click.argument("b", type=click.Path(path_type=Path))
@click.option(
    "--tol", type=click.FloatRange(min=0, min_open=True), help="Tolerance on a module's divergence."
)
@click.option("-q", "--quiet", is_flag=True, help="Print the verdict only, not the table.")
def diff(a, b, tol, quiet):
    """Align dump B with the reference dump A and name the first module that diverges on its own."""
    from portlayer.train.locate import dump as dumps
    from portlayer.train.locate.diff import diff as run_diff

    try:
        comparison = run_diff(dumps.read(a), dumps.read(b), tolerance=tol)
    except DumpError as exc:
        raise UnusableInput(str(exc)) from None
    _finish(comparison, quiet)
