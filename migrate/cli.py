"""`portlayer migrate PATH...`: the driver around the codemod.

Output follows ruff and black: diagnostics (and `--diff`'s patch) on stdout, one per line with its hint
below; `would change PATH` under `--check`, the summary line, the progress bar and errors about the run
itself on stderr. With `--diff`, stdout carries the patch alone (`| git apply` works) and diagnostics
move to stderr; with `-` (stdin), stdout carries the migrated code. `--output-format json|csv|sarif|github`
puts one document on stdout instead of the text diagnostics. `-q` prints nothing but errors.
Exit status, as ruff's: 0 done; 1 warning- or error-severity findings remain (sites left for a human;
info findings do not count; `--exit-zero` opts out), or `--check` found files to change; 2 some input
could not be processed (named on stderr or as a PL9xx diagnostic; left untouched; every other file still
processed).
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from pathlib import Path

import click

from portlayer.cli import UnusableInput
from portlayer.errors import error_line
from portlayer.findings import FORMATS, Finding, render, text_lines
from portlayer.migrate import job, project_settings
from portlayer.migrate.codes import CODES
from portlayer.migrate.engine import TARGETS
from portlayer.migrate.parallel import default_jobs, run_all
from portlayer.migrate.progress import FileProgress
from portlayer.migrate.report import Tally, write_report
from portlayer.migrate.walk import Exclusions, discover, kind_of

STDIN = Path("-")


class OneLineErrors(click.Command):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            raise UnusableInput(exc.format_message()) from None


@click.command(cls=OneLineErrors)
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path, allow_dash=True))
@click.option(
    "--target",
    type=click.Choice(TARGETS),
    default=None,
    help="neutral: portlayer's API; torch: upstream device-generic torch; npu/musa: the vendor's own API."
    "  [default: pyproject's [tool.portlayer] target, else neutral]",
)
@click.option("--diff", "show_diff", is_flag=True, help="Print a unified diff; write nothing.")
@click.option("--check", is_flag=True, help="Write nothing; name each file that would change; exit 1 if any.")
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
    "--exclude",
    multiple=True,
    metavar="GLOB",
    help="Skip matching files and folders (repeatable; replaces pyproject's exclude).",
)
@click.option(
    "--respect-gitignore/--no-respect-gitignore",
    default=None,
    help="Skip what .gitignore files ignore in directory walks.  [default: on]",
)
@click.option(
    "--stdin-filename",
    type=click.Path(path_type=Path),
    metavar="PATH",
    help="With `-`: the name of the code read from stdin (its kind, per-file-ignores, messages).",
)
@click.option(
    "--output-format",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="How diagnostics are printed on stdout.",
)
@click.option(
    "--annotate", is_flag=True, help="Add a `# portlayer: PLnnn …` comment above each reported site."
)
@click.option(
    "--exit-zero",
    is_flag=True,
    help="Exit 0 though warning or error findings remain (--check still exits 1 for files to change).",
)
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
@click.option(
    "-v", "--verbose", is_flag=True, help="Also print every change made and statistics by category."
)
def migrate(
    paths: tuple[Path, ...],
    target: str | None,
    show_diff: bool,
    check: bool,
    report_path: Path | None,
    jobs: int | None,
    exclude: tuple[str, ...],
    respect_gitignore: bool | None,
    stdin_filename: Path | None,
    output_format: str,
    annotate: bool,
    exit_zero: bool,
    quiet: bool,
    verbose: bool,
) -> None:
    """Rewrite CUDA-specific PyTorch code and launch scripts under PATH for another accelerator.

    Writes files in place (atomically, keeping encoding, line endings and mode) unless --diff or --check.
    PATH `-` reads the code from stdin and writes the migrated code to stdout.

    Exit status: 0 done; 1 warning or error findings remain (sites left for a human; not info ones;
    --exit-zero opts out), or --check found files to change; 2 some input could not be processed.
    """
    reading_stdin = STDIN in paths
    _reject_conflicting_options(paths, reading_stdin, show_diff, output_format, stdin_filename, quiet, verbose)
    config = _load_config(paths, reading_stdin, stdin_filename)
    options = job.Options(
        target=target or config.target or "neutral",
        write=not (show_diff or check or reading_stdin),
        diff=show_diff,
        annotate=annotate,
        emit=reading_stdin,
    )
    out = _Output(quiet, verbose, diagnostics_to_stderr=show_diff or reading_stdin, fmt=output_format,
                  check=check)
    run = _Run(options, config, out)
    if reading_stdin:
        run.stdin(stdin_filename, echo=not (show_diff or check))
    else:
        run.paths(paths, exclude, respect_gitignore, jobs)
    if report_path is not None:
        run.report(report_path)
    out.document()
    out.summary(run.tally, options.write or options.emit)
    status = run.exit_status(check, exit_zero)
    if status:
        sys.exit(status)


def _reject_conflicting_options(paths: tuple[Path, ...], reading_stdin: bool, show_diff: bool, output_format: str,
                                stdin_filename: Path | None, quiet: bool, verbose: bool) -> None:
    """Options that make no sense together end the run before anything is read."""
    if quiet and verbose:
        raise UnusableInput("--quiet and --verbose exclude each other")
    if show_diff and output_format != "text":
        raise UnusableInput(f"--diff prints a patch on stdout; it cannot be combined with --output-format {output_format}")
    if reading_stdin and len(paths) > 1:
        raise UnusableInput("`-` (stdin) cannot be combined with other paths")
    if stdin_filename is not None and not reading_stdin:
        raise UnusableInput("--stdin-filename needs `-` as the path")


def _load_config(paths: tuple[Path, ...], reading_stdin: bool, stdin_filename: Path | None) -> project_settings.Config:
    """pyproject's [tool.portlayer], found from the paths (from stdin's name, or the working directory)."""
    try:
        return project_settings.load(project_settings.find([stdin_filename or Path.cwd()] if reading_stdin else paths),
                                  TARGETS)
    except project_settings.ConfigError as exc:
        raise UnusableInput(str(exc)) from None


class _Run:
    """The results of one run as they come in: per-file ignores applied, counted, printed."""

    def __init__(self, options: job.Options, config: project_settings.Config, out: _Output):
        self.options = options
        self.config = config
        self.out = out
        self.tally = Tally()
        self.results: list[job.FileResult] = []
        self.unusable_input = False

    def paths(self, paths: tuple[Path, ...], exclude: tuple[str, ...], respect_gitignore: bool | None,
              jobs: int | None) -> None:
        """Walk `paths` (the command line's exclusions replace pyproject's) and process what is found."""
        globs = (exclude or self.config.exclude or ()) + self.config.extend_exclude
        respect = respect_gitignore if respect_gitignore is not None else self.config.respect_gitignore
        found, input_errors, skipped = discover(
            paths, Exclusions(globs, self.config.root, respect if respect is not None else True))
        for error in input_errors:
            self.out.error(f"{error.path}: {error.message}")
        for folder in skipped:
            self.out.notice(folder.notice)
        self.unusable_input = bool(input_errors)
        self.files(found, jobs)

    def files(self, found, jobs: int | None) -> None:
        progress = FileProgress(len(found), sys.stderr, enabled=not self.out.quiet)
        process = functools.partial(job.process_file, options=self.options)
        try:
            for result in run_all(process, found, jobs or default_jobs(), work=sum(f.size for f in found)):
                if result.status == "changed" or result.diagnostics or result.error:
                    progress.clear()
                self.record(result)
                progress.advance()
        finally:
            progress.close()

    def stdin(self, filename: Path | None, *, echo: bool) -> None:
        data = sys.stdin.buffer.read()
        path = filename or Path("-")
        result = self.record(job.process_bytes(str(path), kind_of(path, data[:256]), data, self.options))
        if echo and result.status != "failed":
            click.echo(result.output if result.output is not None else data, nl=False)

    def report(self, path: Path) -> None:
        try:
            write_report(path, self.tally, sorted(self.results, key=lambda r: r.path), self.options.target,
                         self.options.write)
        except OSError as exc:
            self.out.error(f"{path}: cannot write the report: {exc.strerror or exc}")
            self.unusable_input = True

    def exit_status(self, check: bool, exit_zero: bool) -> int:
        """2: some input could not be processed; 1: `--check` found files to change, or (unless `exit_zero`)
        warning or error findings remain; 0: done."""
        if self.unusable_input or self.tally.files["failed"]:
            return 2
        if check and self.tally.files["changed"]:
            return 1
        remaining = self.tally.severities["warning"] + self.tally.severities["error"]
        return 1 if remaining and not exit_zero else 0

    def record(self, result: job.FileResult) -> job.FileResult:
        ignored = self.config.ignored_codes(result.path)
        if ignored:
            kept = tuple(d for d in result.diagnostics if not d.code.startswith(ignored))
            result = dataclasses.replace(result, diagnostics=kept)
        self.tally.add(result)
        self.results.append(result)
        self.out.file(result)
        return result


class _Output:
    def __init__(self, quiet: bool, verbose: bool, diagnostics_to_stderr: bool, fmt: str, check: bool):
        self.quiet = quiet
        self.verbose = verbose
        self.diagnostics_to_stderr = diagnostics_to_stderr
        self.fmt = fmt
        self.check = check
        self.findings: list[Finding] = []  # for the formats written as one document at the end

    def error(self, line: str) -> None:
        click.echo(error_line(line), err=True)

    def notice(self, line: str) -> None:
        if not self.quiet:
            click.echo(f"portlayer: note: {line}", err=True)

    def file(self, result: job.FileResult) -> None:
        if result.error:
            self.error(f"{result.path}: {result.error}")
        if result.diff:
            click.echo(result.diff, nl=False)
        if self.check and result.status == "changed" and not self.quiet:
            click.echo(f"would change {result.path}", err=True)
        findings = _findings(result)
        if self.fmt != "text":
            self.findings += findings
            return
        if self.quiet:
            return
        for finding in findings:
            if finding.severity == "change":
                if self.verbose:
                    click.echo(text_lines(finding, hint=False))
            else:
                click.echo(text_lines(finding), err=self.diagnostics_to_stderr)

    def document(self) -> None:
        if self.fmt != "text":
            from importlib.metadata import PackageNotFoundError, version

            try:
                release = version("portlayer")
            except PackageNotFoundError:
                release = ""
            click.echo(render(self.fmt, self.findings, tool="portlayer migrate", version=release), nl=False)

    def summary(self, tally: Tally, writing: bool) -> None:
        if self.quiet:
            return
        if self.verbose and (tally.converted or tally.reported):
            click.echo(tally.statistics(), err=True)
        click.echo(tally.summary_line(writing), err=True)


def _findings(result: job.FileResult) -> list[Finding]:
    """A file's conversions (severity "change") and diagnostics, in the order of their positions."""
    changes = [
        Finding(result.path, c.line, c.col, c.code, "change", c.message, "", CODES[c.code].title)
        for c in result.changes
    ]
    diagnostics = [
        Finding(result.path, d.line, d.col, d.code, d.severity, d.message, d.hint, CODES[d.code].title)
        for d in result.diagnostics
    ]
    return sorted(changes + diagnostics, key=lambda f: (f.line, f.col, f.severity != "change"))
