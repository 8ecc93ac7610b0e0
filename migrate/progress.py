"""A progress bar (tqdm) on a terminal's stderr for large runs; nothing at all in a pipe or a log."""

from __future__ import annotations

from typing import TextIO

from portlayer.progress import terminal_bar

# Runs shorter than this finish before a bar would be worth reading.
MIN_FILES = 200


class FileProgress:
    def __init__(self, total: int, stream: TextIO, enabled: bool = True):
        self.bar = terminal_bar(stream, enabled and total >= MIN_FILES, total=total, unit="file", leave=False,
                                mininterval=0.1)

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
