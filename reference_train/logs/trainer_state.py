"""HuggingFace's `trainer_state.json` (LLaMA-Factory, TRL, ms-swift and every `Trainer` script write it): its
`log_history`.

A training entry holds `loss`, `grad_norm` (transformers 4.38 and later), `learning_rate` and `step`; the loss
is the mean over the steps since the previous entry (`logging_steps`), the gradient norm and the learning rate
are the logged step's own. Evaluation, prediction and the final summary (`train_loss`) share the list and are
left out. The file is written with Python's json, so NaN and Infinity may appear as bare words.
"""

from __future__ import annotations

import json
from dataclasses import replace

from portlayer.train.logs.numbers import load_json
from portlayer.train.logs.series import Collector, LogError, Series, as_text, text_of

NAME = "trainer_state"
LABEL = "trainer_state.json"


def sniff(content) -> bool:
    text = as_text(content)
    if text is None or not text.lstrip().startswith("{") or '"log_history"' not in text:
        return False
    try:
        return isinstance(load_json(text).get("log_history"), list)
    except (json.JSONDecodeError, AttributeError):
        return False


def read(path, content) -> Series:
    try:
        state = load_json(text_of(path, content, LABEL))
    except json.JSONDecodeError as exc:
        raise LogError(f"{path}: not a JSON file ({exc})") from None
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise LogError(f"{path}: no log_history list: not a {LABEL}")
    return series_of(history, path, LABEL)


def series_of(history: list, path, label: str, notes: tuple[str, ...] = (), resolutions=None) -> Series:
    """The training entries of a HuggingFace `log_history` (ms-swift keeps one too); `resolutions` (per
    quantity) where the writer's rounding is known."""
    collected = Collector()
    for entry in history:
        if isinstance(entry, dict) and "loss" in entry and isinstance(entry.get("step"), int):
            collected.add(
                entry["step"], loss=entry["loss"], grad_norm=entry.get("grad_norm"), lr=entry.get("learning_rate")
            )
    if not collected.points and any(isinstance(entry, dict) and "train_loss" in entry for entry in history):
        raise LogError(
            f"{path}: log_history has no per-step loss, only the run's mean train_loss (logging_steps longer"
            " than the run?)"
        )
    series = collected.series(str(path), label, notes=notes, loss_is_interval_mean=True)
    # transformers rounded the logged loss to 4 decimals from 2021 to 2025 (PR #9491, undone by #42104), never
    # the gradient norm or the learning rate: the loss's digits say which, the others are as Python wrote them.
    return replace(series, resolutions={"loss": series.resolution("loss"), **(resolutions or {})})
