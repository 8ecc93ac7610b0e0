"""The training logs `parity compare` and `parity band` read, each detected from its content.

    series = read_log("trainer_state.json")             # a Series: steps from 1, loss / grad_norm / lr
    series = read_log("train.log", format="megatron")   # forced

One small module per format, each with `NAME` (what `--format` takes), `LABEL` (what a report calls it),
`sniff(content)` (does this content look like mine?) and `read(path, content)`. Detection asks them in the
order of `FORMATS`, most specific first: a binary TensorBoard file, the JSON documents, the JSON-lines files,
the text logs, and CSV last, since almost anything with commas in its first line looks like CSV.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from portlayer.train.logs.series import QUANTITIES, LogError, Point, Series

__all__ = ["FORMATS", "QUANTITIES", "LogError", "Point", "Series", "read_log"]

FORMATS = {
    name: f"portlayer.train.logs.{module}"
    for name, module in (
        ("tensorboard", "tensorboard"),
        ("portlayer", "portlayer_run"),
        ("trainer_state", "trainer_state"),
        ("ms-swift", "ms_swift"),
        ("jsonl", "tabular"),
        ("megatron", "megatron"),
        ("deepspeed", "deepspeed"),
        ("csv", "tabular"),
    )
}


def _reader(name: str):
    module = importlib.import_module(FORMATS[name])
    return getattr(module, "READERS", {}).get(name, module)


def read_log(path: str | Path, format: str | None = None) -> Series:
    """The values the training log at `path` recorded; `format` (a name of `FORMATS`) skips detection."""
    path = Path(path)
    content = _content(path)
    if format is not None:
        return _reader(format).read(path, content)
    for name in FORMATS:
        reader = _reader(name)
        if reader.sniff(content):
            return reader.read(path, content)
    raise LogError(f"{path}: not a training log this reads ({', '.join(FORMATS)}); name one with --format")


def _content(path: Path) -> bytes | list[Path]:
    """The file's bytes, or for a folder the event files under it (a TensorBoard run folder)."""
    try:
        if path.is_dir():
            return sorted(path.rglob("*tfevents*"))
        return path.read_bytes()
    except FileNotFoundError:
        raise LogError(f"{path}: no such file") from None
    except OSError as exc:
        raise LogError(f"{path}: {exc.strerror or exc}") from None
