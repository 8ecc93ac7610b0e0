"""`portlayer migrate PATH...`: the driver around the codemod.

Output follows ruff: diagnostics (and `--diff`'s patch) on stdout, one per line with its hint below;
the summary line, the progress counter and errors about the run itself on stderr. With `--diff`, stdout
carries the patch alone (`| git apply` works) and diagnostics move to stderr.
Exit status: 0 done, 1 `--check`/`--diff --check` found files to change, 2 some input could not be
processed (named on stderr or as a PL9xx diagnostic; left untouched; every other file still processed).
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import click
from portlayer.migrate import job
from portlayer.migrate.engine import TARGETS
from portlayer.migrate.parallel import default_jobs, run_all
from portlayer.migrate.progress import Progress
from portlayer.migrate.report import Tally, write_report
from portlayer.migrate.walk import discover

from portlayer.errors import error_line


class BadUsage(click.ClickException):
    """Bad arguments: one line (`Error: …`) and exit status 2, without click's usage block."""

    exit_code = 2


class OneLineErrors(click.Command):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            raise BadUsage(exc.format_message()) from None


@click.command(cls=OneLineErrors)
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--target",
    type=click.Choice(TARGETS),
    default="neutral",
    show_default=True,
    help="neutral: portlayer's API; torch: upstream device-generic torch; npu/musa: the vendor's own API.",
)
@click.option("--diff", "show_diff", is_flag=True, help="Print a unified diff; write nothing.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if any file would change.")
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE.json",
    help="Write every change and diagnostic, per file, with counts by category.",
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Worker processes for large trees.  [default: the number of cores]",
)
@click.option(
    "--exclude", multiple=True, metavar="GLOB", help="Skip matching files and folders (repeatable)."
)
@click.option(
    "--annotate", is_flag=True, help="Add a `# portlayer: PLnnn …` comment above each reported site."
)
@click.option("-q", "--quiet", is_flag=True, help="Print warnings and errors only, without hints or summary.")
@click.option(
    "-v", "--verbose", is_flag=True, help="Also print every change made and statistics by category."
)
def migrate(
    paths: tuple[Path, ...],
    target: str,
    show_diff: bool,
    check: bool,
    report_path: Path | None,
    jobs: int | None,
    exclude: tuple[str, ...],
    annotate: bool,
    quiet: bool,
    verbose: bool,
) -> None:
    """Rewrite CUDA-specific PyTorch code and launch scripts under PATH for another accelerator.

    Writes files in place (atomically, keeping encoding, line endings and mode) unless --diff or --check.
    """
    if quiet and verbose:
        raise BadUsage("--quiet and --verbose exclude each other")
    options = job.Options(target=target, write=not (show_diff or check), diff=show_diff, annotate=annotate)
    found, input_errors = discover(paths, exclude)
    out = _Output(quiet=quiet, verbose=verbose, diagnostics_to_stderr=show_diff)
    for error in input_errors:
        out.error(f"{error.path}: {error.message}")
    unusable_input = bool(input_errors)

    tally = Tally()
    results: list[job.FileResult] = []
    progress = Progress(len(found), sys.stderr, enabled=not quiet)

    def record(result: job.FileResult) -> None:
        tally.add(result)
        results.append(result)
        if result.status == "changed" or result.diagnostics or result.error:
            progress.clear()
            out.file(result)
        progress.advance()

    process = functools.partial(job.process_file, options=options)
    for result in run_all(process, found, jobs or default_jobs(), work=sum(file.size for file in found)):
        record(result)
    progress.clear()

    if report_path is not None:
        try:
            write_report(report_path, tally, sorted(results, key=lambda r: r.path), target, options.write)
        except OSError as exc:
            out.error(f"{report_path}: cannot write the report: {exc.strerror or exc}")
            unusable_input = True
    out.summary(tally, options.write)

    if unusable_input or tally.files["failed"]:
        sys.exit(2)
    if check and tally.files["changed"]:
        sys.exit(1)


class _Output:
    def __init__(self, quiet: bool, verbose: bool, diagnostics_to_stderr: bool):
        self.quiet = quiet
        self.verbose = verbose
        self.diagnostics_to_stderr = diagnostics_to_stderr

    def error(self, line: str) -> None:
        click.echo(error_line(line), err=True)

    def file(self, result: job.FileResult) -> None:
        if result.error:
            self.error(f"{result.path}: {result.error}")
        if result.diff:
            click.echo(result.diff, nl=False)
        if self.verbose:
            for change in result.changes:
                click.echo(f"{result.path}:{change.line}:{change.col}: {change.code} {change.message}")
        for diagnostic in result.diagnostics:
            if self.quiet and diagnostic.severity == "info":
                continue
            click.echo(diagnostic.format(result.path), err=self.diagnostics_to_stderr)
            if not self.quiet:
                click.echo(f"  hint: {diagnostic.hint}", err=self.diagnostics_to_stderr)

    def summary(self, tally: Tally, writing: bool) -> None:
        if self.quiet:
            return
        if self.verbose and (tally.converted or tally.reported):
            click.echo(tally.statistics(), err=True)
        click.echo(tally.summary_line(writing), err=True)
