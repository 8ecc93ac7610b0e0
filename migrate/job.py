"""One file, end to end: read, skip it cheaply if nothing in it is CUDA-specific, migrate, diff or write.

`process_file` runs in the driver's process or in a worker, one call per file; nothing crosses processes
but a path in and a `FileResult` out. It never imports or runs the code it reads. A file that cannot be
read, decoded, parsed or written is a failed `FileResult`, never an exception: the run goes on.
"""

from __future__ import annotations

import contextlib
import difflib
import gc
import re
from dataclasses import dataclass
from pathlib import Path

from portlayer.atomic import write_atomic
from portlayer.migrate import accelerate_config, engine, shell
from portlayer.migrate.engine import parse_python
from portlayer.migrate.files import DecodeError, SourceText, decode_python, decode_shell
from portlayer.migrate.results import Change, Diagnostic, Settled, SourceError
from portlayer.migrate.targets import target_named
from portlayer.migrate.walk import Found


@dataclass(frozen=True)
class Options:
    target: str = "neutral"
    write: bool = True
    diff: bool = False
    annotate: bool = False
    emit: bool = False  # hand the migrated bytes back in `FileResult.output` (stdin in, stdout out)


@dataclass(frozen=True)
class FileResult:
    path: str
    kind: str  # "python" | "shell" | "config"
    status: str  # "unchanged" | "changed" (or would change, when not writing) | "failed"
    changes: tuple[Change, ...] = ()
    diagnostics: tuple[Diagnostic, ...] = ()
    diff: str = ""
    # Why a failed file without a position in it failed: an I/O error, an internal error.
    error: str = ""
    output: bytes | None = None  # the migrated file, with `Options.emit`, when it changed
    settled: Settled = Settled()  # import lines and fallback lines rewritten besides the sites


@dataclass(frozen=True)
class Loaded:
    path: str
    kind: str
    source: SourceText


def process_file(found: Found, options: Options) -> FileResult:
    path = str(found.path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        return FileResult(path, found.kind, "failed", error=exc.strerror or str(exc))
    return process_bytes(path, found.kind, data, options)


def process_bytes(path: str, kind: str, data: bytes, options: Options) -> FileResult:
    """One file's bytes (read from disk, or stdin under the name `path`), migrated."""
    loaded = load(path, kind, data, options.target)
    if not isinstance(loaded, Loaded):
        return loaded
    with _cycle_collection_paused():
        return convert(loaded, options)


@contextlib.contextmanager
def _cycle_collection_paused():
    """CPython's cycle collector runs every 700 allocations and scans the young objects each time: while
    `ast.parse` and LibCST build a large module's trees, that is three quarters of the parse's time
    (measured on transformers). The trees hold no reference cycles, so reference counting frees them;
    the little that does form cycles is collected after the file."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def load(path: str, kind: str, data: bytes, target: str) -> Loaded | FileResult:
    try:
        source = decode_python(data) if kind == "python" else decode_shell(data)
    except DecodeError as exc:
        return FileResult(path, kind, "failed", diagnostics=(_error("PL902", exc),))
    if kind == "shell":
        worth_reading = shell.has_cuda_sites(source.text)
    elif kind == "config":
        worth_reading = accelerate_config.names_cuda_devices(source.text)
    else:
        worth_reading = engine.may_change(source.text, target)
    if not worth_reading:
        return FileResult(path, kind, "unchanged")
    return Loaded(path, kind, source)


def convert(loaded: Loaded, options: Options) -> FileResult:
    path, kind, text = loaded.path, loaded.kind, loaded.source.text
    try:
        if kind == "shell":
            result = shell.migrate_shell(text, options.target)
        elif kind == "config":
            result = accelerate_config.migrate_config(text, target_named(options.target).vendor)
        else:
            result = engine.migrate_source(text, options.target, annotate=options.annotate)
            _check_parses(text, result.code)
        if not result.changed:
            return FileResult(path, kind, "unchanged", result.changes, result.diagnostics)
        data = loaded.source.encode(result.code)
        if options.write:
            write_atomic(path, data)
        output = data if options.emit else None
    except SourceError as exc:
        return FileResult(path, kind, "failed", diagnostics=(_error("PL901", exc),))
    except OSError as exc:
        return FileResult(path, kind, "failed", error=f"cannot write: {exc.strerror or exc}")
    except Exception as exc:  # a bug in a rule must cost one file, not the run
        message = f"internal error, file left untouched ({type(exc).__name__}: {exc}); please report it"
        return FileResult(path, kind, "failed", error=message.splitlines()[0])
    diff = unified_diff(path, text, result.code) if options.diff else ""
    return FileResult(path, kind, "changed", result.changes, result.diagnostics, diff, output=output,
                      settled=result.settled)


class BrokenOutput(Exception):
    """The codemod turned parseable code into code that does not parse."""


def _check_parses(before: str, after: str) -> None:
    """Refuse to write code that no longer parses. The input parsed: the engine parses it with the same
    parser before any rule runs, and raises SourceError when it cannot."""
    if after == before:
        return
    try:
        parse_python(after)
    except SyntaxError as exc:
        raise BrokenOutput(f"the migrated code does not parse: line {exc.lineno}: {exc.msg}") from None


def _error(code: str, exc: SourceError) -> Diagnostic:
    return Diagnostic.of(code, exc.line, exc.col, f"{exc.message}; file left untouched")


def unified_diff(path: str, before: str, after: str) -> str:
    lines = []
    path = path.lstrip("/")  # `/abs/x.py` -> `a/abs/x.py`, which `patch -p1 -d /` applies
    for line in difflib.unified_diff(_lines(before), _lines(after), f"a/{path}", f"b/{path}"):
        lines.append(line)
        if not line.endswith("\n"):
            lines.append("\n\\ No newline at end of file\n")
    return "".join(lines)


def _lines(text: str) -> list[str]:
    # Not str.splitlines: it also breaks at form feeds and other characters Python code may contain.
    return re.findall(r"[^\n]*\n|[^\n]+", text)
