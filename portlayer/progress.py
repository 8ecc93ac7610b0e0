"""The one way portlayer shows progress: a tqdm bar on a terminal, nothing in a pipe or a log.

tqdm is imported only when a bar is shown: its import costs start-up time that a piped run never needs.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO


def terminal_bar(stream: TextIO | None = None, enabled: bool = True, **tqdm_options: Any):
    """A tqdm bar on `stream` (stderr by default) when it is a terminal and `enabled`, else None."""
    stream = stream or sys.stderr
    if not (enabled and stream.isatty()):
        return None
    from tqdm import tqdm

    return tqdm(file=stream, **tqdm_options)
