"""The user-fixable error type, and the one spelling of a command-line error: `portlayer: error: <one line>`.

Every command (the `portlayer` CLI, its subcommands, the trainer's ranks, migrate's per-file errors) reports
through `error_line`, so scripts and people see one format. No click or torch here: `import portlayer` stays cheap.
"""

from __future__ import annotations

import sys
from typing import NoReturn


class PortlayerError(RuntimeError):
    """A problem a user can fix, described in one line (an unknown backend, a missing plugin, …)."""


def first_line(exc: BaseException) -> str:
    """`Type: first line of the message`, for errors that come from code portlayer does not own."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def error_line(message: object, prog: str = "portlayer") -> str:
    """`<prog>: error: <message>`, with the message's whitespace and newlines folded into one line."""
    return f"{prog}: error: {' '.join(str(message).split())}"


def write_line(text: str, stream=None) -> None:
    """`text` and its newline in one write: a rank's lines share a pipe with the other ranks', and `print` writes
    the text and the newline apart (unbuffered, as under PYTHONUNBUFFERED), where another rank's line can fall."""
    stream = sys.stdout if stream is None else stream
    stream.write(f"{text}\n")
    stream.flush()


def print_error(message: object, prog: str = "portlayer") -> None:
    write_line(error_line(message, prog), sys.stderr)


def fail(message: object, status: int = 2) -> NoReturn:
    """Print the one-line error and exit with `status` (2: unusable input, the CLI's default)."""
    print_error(message)
    sys.exit(status)
