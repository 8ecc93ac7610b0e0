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


def print_error(message: object, prog: str = "portlayer") -> None:
    print(error_line(message, prog), file=sys.stderr, flush=True)


def fail(message: object, status: int = 2) -> NoReturn:
    """Print the one-line error and exit with `status` (2: unusable input, the CLI's default)."""
    print_error(message)
    sys.exit(status)
