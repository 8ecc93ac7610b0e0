"""portlayer's own run file (`portlayer.parity.run/1`, runfile.py): every step's loss, gradient norm and lr,
and the metadata that say which experiment it was."""

from __future__ import annotations

from portlayer.train import runfile
from portlayer.train.logs.series import Collector, LogError, Series, as_text

NAME = "portlayer"
LABEL = "portlayer run file"


def sniff(content) -> bool:
    text = as_text(content)
    return text is not None and f'"{runfile.SCHEMA}"' in text[:200]


def read(path, content) -> Series:
    try:
        return series_of_run(runfile.read_run(path), str(path))
    except runfile.RunFileError as exc:
        raise LogError(str(exc)) from None


def series_of_run(run: dict, path: str) -> Series:
    """A run file's content (as `runfile.read_run` returns it) as a Series."""
    collected = Collector()
    for step in run["steps"]:
        collected.add(step["step"], loss=step["loss"], grad_norm=step["grad_norm"], lr=step["lr"])
    return collected.series(path, LABEL, run_file=run)
