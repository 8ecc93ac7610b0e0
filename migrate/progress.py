"""A progress bar (tqdm) on a terminal's stderr for large runs; nothing at all in a pipe or a log."""

from __future__ import annotations

from typing import TextIO

# Runs shorter than this finish before a bar would be worth reading.
MIN_FILES = 200


class Progress:
    def __init__(self, total: int, stream: TextIO, enabled: bool = True):
        self.bar = None
        if enabled and total >= MIN_FILES and stream.isatty():
            from tqdm import tqdm  # only on a terminal: the import costs start-up time

            self.bar = tqdm(total=total, file=stream, unit="file", leave=False, mininterval=0.1)

    def advance(self) -> None:
        if self.bar is not None:
            self.bar.update()

    def clear(self) -> None:
        """Wipe the bar so that a line can be printed; the next `advance` draws it again."""
        if self.bar is not None:
            self.bar.clear()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
