"""A one-line progress counter on a terminal's stderr; nothing at all in a pipe or a log."""

from __future__ import annotations

import time
from typing import TextIO

# Runs shorter than this finish before a counter would be worth reading.
MIN_FILES = 200
_INTERVAL_S = 0.1


class Progress:
    def __init__(self, total: int, stream: TextIO, enabled: bool = True):
        self.total = total
        self.done = 0
        self.stream = stream
        self.enabled = enabled and total >= MIN_FILES and stream.isatty()
        self._shown = False
        self._last = 0.0

    def advance(self) -> None:
        self.done += 1
        now = time.monotonic()
        if self.enabled and (now - self._last >= _INTERVAL_S or self.done == self.total):
            self._last = now
            width = 30
            filled = width * self.done // self.total
            bar = "#" * filled + "." * (width - filled)
            self.stream.write(f"\r[{bar}] {self.done}/{self.total} files")
            self.stream.flush()
            self._shown = True

    def clear(self) -> None:
        """Wipe the counter so that a line can be printed; the next `advance` draws it again."""
        if self._shown:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._shown = False
            self._last = 0.0
