"""ms-swift's `logging.jsonl`: one JSON object per HuggingFace log call, every float rounded to 8 decimals.

A training line holds `loss`, `grad_norm`, `learning_rate` and the step as `"global_step/max_steps": "N/M"`
(3.x), `global_step` (2.x) or `"iteration": "N/M"` (ms-swift's Megatron trainer). Rounding to 8 decimals moves a
small learning rate by percents (1.1261e-07 is written 1.1e-07); the last line of a finished run carries the
whole `log_history` at full precision, and is read instead where it is there. ms-swift 2.x writes every line
twice: a repeated step with the same values is one step.
"""

from __future__ import annotations

import json
import re

from portlayer.train.logs.numbers import load_json, rounded_to
from portlayer.train.logs.series import QUANTITIES, Collector, LogError, Series, as_text, text_of
from portlayer.train.logs.trainer_state import series_of

NAME = "ms-swift"
LABEL = "ms-swift logging.jsonl"

_PROGRESS_KEYS = ("global_step/max_steps", "steps[global_step/max_steps]", "iteration")
_FRACTION = re.compile(r"(\d+)/\d+")


def _objects(text: str) -> list:
    return [load_json(line) for line in text.splitlines() if line.strip()]


def _is_swift_line(entry) -> bool:
    if not isinstance(entry, dict):
        return False
    if any(isinstance(entry.get(key), str) and _FRACTION.fullmatch(entry[key]) for key in _PROGRESS_KEYS[:2]):
        return True
    speed = any(key.startswith("train_speed(") for key in entry)
    counter = isinstance(entry.get("global_step"), int) or (
        isinstance(entry.get("iteration"), str) and _FRACTION.fullmatch(entry["iteration"])
    )
    return speed and counter


def sniff(content) -> bool:
    text = as_text(content)
    if text is None or not text.lstrip().startswith("{"):
        return False
    first = text.lstrip().split("\n", 1)[0]
    try:
        return _is_swift_line(load_json(first))
    except json.JSONDecodeError:
        return False


def _step(entry: dict) -> int | None:
    for key in _PROGRESS_KEYS:
        found = entry.get(key)
        if isinstance(found, str) and _FRACTION.fullmatch(found):
            return int(_FRACTION.fullmatch(found).group(1))
    return entry["global_step"] if isinstance(entry.get("global_step"), int) else None


def read(path, content) -> Series:
    try:
        entries = _objects(text_of(path, content, LABEL))
    except json.JSONDecodeError as exc:
        raise LogError(f"{path}: a line is not JSON ({exc})") from None
    final = [entry for entry in entries if isinstance(entry, dict) and isinstance(entry.get("log_history"), list)]
    if final:
        note = f"{path}: read the full-precision log_history of the run's last line"
        return series_of(final[-1]["log_history"], path, LABEL, notes=(note,))
    collected = Collector()
    for entry in entries:
        step = _step(entry) if isinstance(entry, dict) and "loss" in entry else None
        if step is not None:
            collected.add(step, loss=entry["loss"], grad_norm=entry.get("grad_norm"), lr=entry.get("learning_rate"))
    eight_decimals = rounded_to(8)  # swift's add_train_message: round(v, 8) of every float
    return collected.series(
        str(path), LABEL, loss_is_interval_mean=True, resolutions=dict.fromkeys(QUANTITIES, eight_decimals)
    )
