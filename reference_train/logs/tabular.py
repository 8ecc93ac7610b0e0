"""CSV and JSON-lines files with a step column and a loss (gradient norm, learning rate) column: what a script
writes itself (DeepSpeedExamples' `step,loss`), Lightning's `CSVLogger` `metrics.csv`, LLaMA-Factory's
`trainer_log.jsonl`, a W&B history export.

Columns are found by name, in a fixed order of preference (`COLUMNS`: `loss` before `train_loss`, …); names
are matched without regard to case. Steps counted from 0 (a first step of 0, or Lightning's file, whose `step`
is the number of steps done before the row) are counted from 1 here. A loss is a step's own, except
LLaMA-Factory's (HuggingFace's mean since the previous log). Empty cells are values not logged; `nan` and
`inf` are read as such; a row whose step is not a number (a header written again on append) is skipped.
"""

from __future__ import annotations

import csv
import io
import json

from portlayer.train.logs.numbers import Written, load_json
from portlayer.train.logs.series import Collector, LogError, Series, as_text, text_of

COLUMNS = {
    "step": ("step", "global_step", "iteration", "current_steps", "train/global_step", "_step"),
    "loss": ("loss", "train_loss", "train/loss", "train_loss_step", "lm loss", "lm_loss"),
    "grad_norm": ("grad_norm", "train/grad_norm", "grad norm", "grad-norm"),
    "lr": ("lr", "learning_rate", "train/learning_rate", "learning rate", "learning-rate"),
}


def _columns(names) -> dict[str, str]:
    """quantity (and "step") -> the column read for it, for the columns present."""
    by_lower = {}
    for name in names:
        by_lower.setdefault(str(name).lower(), name)
    found = {}
    for role, candidates in COLUMNS.items():
        chosen = next((by_lower[name] for name in candidates if name in by_lower), None)
        if chosen is not None:
            found[role] = chosen
    return found


def _usable(columns: dict[str, str]) -> bool:
    return "step" in columns and len(columns) > 1


def _number(cell) -> Written | float | None:
    if cell is None or isinstance(cell, bool):
        return None
    if isinstance(cell, (int, float)):
        return cell
    try:
        return Written(cell) if str(cell).strip() else None
    except ValueError:
        return None


def _collect(path, rows, columns: dict[str, str], label: str, *, zero_based: bool, interval: bool) -> Series:
    if not _usable(columns):
        wanted = ", ".join(f"{role}: {'/'.join(names)}" for role, names in COLUMNS.items())
        raise LogError(f"{path}: no step column and loss, grad norm or lr column ({wanted}) in this {label}")
    steps = [(_number(row.get(columns["step"])), row) for row in rows]
    steps = [(step, row) for step, row in steps if step is not None and float(step).is_integer()]
    zero_based = zero_based or (bool(steps) and steps[0][0] == 0)
    collected = Collector(first_step=0 if zero_based else 1)
    for step, row in steps:
        values = {role: _number(row.get(name)) for role, name in columns.items() if role != "step"}
        collected.add(int(step), **values)
    read = ", ".join(f"{role} from {name!r}" for role, name in columns.items())
    return collected.series(str(path), label, notes=(f"{path}: {read}",), loss_is_interval_mean=interval)


class Csv:
    NAME, LABEL = "csv", "CSV file"

    @staticmethod
    def sniff(content) -> bool:
        text = as_text(content)
        if text is None or not text.strip():
            return False
        header = next(csv.reader(io.StringIO(text.lstrip().split("\n", 1)[0])), [])
        return _usable(_columns(header))

    @classmethod
    def read(cls, path, content) -> Series:
        reader = csv.DictReader(io.StringIO(text_of(path, content, cls.LABEL)))
        header = reader.fieldnames or []
        lightning = {"epoch", "step"} <= {name.lower() for name in header}
        return _collect(path, list(reader), _columns(header), cls.LABEL, zero_based=lightning, interval=False)


class Jsonl:
    NAME, LABEL = "jsonl", "JSON-lines file"

    @staticmethod
    def sniff(content) -> bool:
        text = as_text(content)
        if text is None or not text.lstrip().startswith("{"):
            return False
        try:
            first = load_json(text.lstrip().split("\n", 1)[0])
        except json.JSONDecodeError:
            return False
        return isinstance(first, dict) and _usable(_columns(first))

    @classmethod
    def read(cls, path, content) -> Series:
        try:
            rows = [load_json(line) for line in text_of(path, content, cls.LABEL).splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise LogError(f"{path}: a line is not JSON ({exc})") from None
        rows = [row for row in rows if isinstance(row, dict)]
        names = sorted({name for row in rows for name in row})
        # LLaMA-Factory's LogCallback: HuggingFace's log, so its loss is the mean since the previous log.
        llama_factory = {"current_steps", "total_steps"} <= set(names)
        label = "LLaMA-Factory trainer_log.jsonl" if llama_factory else cls.LABEL
        return _collect(path, rows, _columns(names), label, zero_based=False, interval=llama_factory)


READERS = {"csv": Csv, "jsonl": Jsonl}
