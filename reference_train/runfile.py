"""The parity run file (`portlayer.parity.run/1`): one JSON document per training run.

    {"schema": "portlayer.parity.run/1", "preset": "gpt2-tiny",
     "metadata": {...},                       # what defines and what ran the experiment (METADATA_FIELDS)
     "steps": [{"step": 1, "loss": ..., "tokens_per_s": ..., "peak_memory_bytes": ..., "lr": ...}, ...],
     "summary": {"tokens_per_s": ..., "peak_memory_bytes": ..., "eval_loss": ..., "perplexity": ...}}

`write_run` and `read_run` validate the same schema; a bad file is one `RunFileError` line naming the
file and the first problem.
"""

from __future__ import annotations

import json
import math
import os
import re
from importlib import resources
from pathlib import Path
from typing import Any

from portlayer import PortlayerError
from portlayer.atomic import write_atomic

SCHEMA = "portlayer.parity.run/1"

# The committed baselines, package data of portlayer.train: found where the package is installed.
BASELINES = Path(str(resources.files(__package__).joinpath("baselines")))

METADATA_FIELDS = (
    "backend",
    "device_type",
    "device_name",
    "torch",
    "transformers",
    "vendor",
    "world_size",
    "per_device_batch",
    "grad_accum",
    "global_batch",
    "seq_len",
    "steps",
    "lr",
    "warmup_steps",
    "precision",
    "tf32",
    "deterministic",
    "seed",
    "parity",
    "config_hash",
    "data_checksum",
    "init_weights_checksum",
    "dropout_fields_zeroed",
    "created",
    "command",
)
STEP_FIELDS = ("step", "loss", "tokens_per_s", "peak_memory_bytes", "lr")
SUMMARY_FIELDS = ("tokens_per_s", "peak_memory_bytes", "eval_loss", "perplexity")

_NUMBER = (int, float)
_TYPES: dict[str, Any] = {
    "world_size": int,
    "per_device_batch": int,
    "grad_accum": int,
    "global_batch": int,
    "seq_len": int,
    "steps": int,
    "warmup_steps": int,
    "seed": int,
    "lr": _NUMBER,
    "tf32": bool,
    "deterministic": bool,
    "parity": bool,
    "vendor": dict,
    "dropout_fields_zeroed": list,
    "command": list,
}


class RunFileError(PortlayerError):
    """A run file that is missing, not JSON, or not of the schema."""


def _is(value: Any, kind: Any) -> bool:
    if kind is int or kind is _NUMBER:
        return not isinstance(value, bool) and isinstance(value, kind)
    return isinstance(value, kind)


def validate(run: Any) -> None:
    """Raise `RunFileError` (no file name) on the first way `run` departs from the schema."""

    def fail(message: str):
        raise RunFileError(message)

    if not isinstance(run, dict):
        fail("not a JSON object")
    if run.get("schema") != SCHEMA:
        fail(f"schema is {run.get('schema')!r}, expected {SCHEMA!r}")
    if not isinstance(run.get("preset"), str):
        fail("no preset name")
    metadata = run.get("metadata")
    if not isinstance(metadata, dict):
        fail("no metadata object")
    missing = [name for name in METADATA_FIELDS if name not in metadata]
    if missing:
        fail(f"metadata lacks {', '.join(missing)}")
    for name, kind in _TYPES.items():
        if not _is(metadata[name], kind):
            fail(f"metadata.{name} has the wrong type ({metadata[name]!r})")
    steps = run.get("steps")
    if not isinstance(steps, list) or not steps:
        fail("no steps")
    for index, step in enumerate(steps, start=1):
        if not isinstance(step, dict) or any(name not in step for name in STEP_FIELDS):
            fail(f"step {index} lacks one of {', '.join(STEP_FIELDS)}")
        if step["step"] != index:
            fail(f"steps are not numbered 1, 2, 3, …: found {step['step']!r} at position {index}")
        if not _is(step["loss"], _NUMBER):
            fail(f"step {index}: loss is {step['loss']!r}")
    if len(steps) != metadata["steps"]:
        fail(f"metadata.steps is {metadata['steps']} but the file holds {len(steps)} steps")
    # Recorded since the schedule became part of the experiment; older files spanned their own length.
    schedule = metadata.get("schedule_steps", metadata["steps"])
    if not _is(schedule, int) or schedule < metadata["steps"]:
        fail(f"metadata.schedule_steps is {schedule!r}: not a whole number of steps, at least metadata.steps")
    summary = run.get("summary")
    if not isinstance(summary, dict) or any(name not in summary for name in SUMMARY_FIELDS):
        fail(f"summary lacks one of {', '.join(SUMMARY_FIELDS)}")


def _json_number(value: Any) -> Any:
    # JSON has no NaN or infinity: a diverged loss is written as null and read back as NaN.
    return None if isinstance(value, float) and not math.isfinite(value) else value


def write_run(path: os.PathLike, run: dict) -> None:
    """Validate `run` and write it to `path` atomically (a reader never sees half a file)."""
    path = Path(path)
    try:
        validate(run)
    except RunFileError as exc:
        raise RunFileError(f"{path}: refusing to write an invalid run: {exc}") from None
    run = {**run, "steps": [{k: _json_number(v) for k, v in step.items()} for step in run["steps"]]}
    text = json.dumps(run, indent=1, sort_keys=False) + "\n"
    write_atomic(path, text)


def read_run(path: os.PathLike) -> dict:
    """The run in `path`, validated; `RunFileError` with a one-line reason otherwise."""
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as source:
            run = json.load(source)
    except FileNotFoundError:
        raise RunFileError(f"{path}: no such file") from None
    except OSError as exc:
        raise RunFileError(f"{path}: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RunFileError(f"{path}: not a JSON file ({exc})") from None
    steps = run.get("steps") if isinstance(run, dict) else None
    for step in steps if isinstance(steps, list) else ():
        if isinstance(step, dict) and "loss" in step and step["loss"] is None:
            step["loss"] = math.nan  # written as null: JSON has no NaN
    try:
        validate(run)
    except RunFileError as exc:
        raise RunFileError(f"{path}: {exc}") from None
    return run


def device_slug(device_type: str, device_name: str) -> str:
    """The device part of a baseline's name: "cpu" for any host cpu, else the model in the device name.

    cpu runs in fp32 agree across hosts, so the processor model does not matter. For an accelerator it
    is the first word with a digit, lower-cased ("NVIDIA H100 80GB HBM3" -> "h100", "Ascend910B4" ->
    "ascend910b4", "MTT S4000" -> "s4000"), else the whole name made file-safe.
    """
    if device_type == "cpu":
        return "cpu"
    words = re.split(r"[\s_/-]+", device_name.lower())
    for word in words:
        if any(ch.isdigit() for ch in word):
            return re.sub(r"[^a-z0-9.]+", "", word)
    return re.sub(r"[^a-z0-9.]+", "-", device_name.lower()).strip("-") or device_type


def baseline_name(run: dict) -> str:
    """`<preset>.<backend>-<device>.json`, the name of `run` among `reference_train/baselines/`."""
    metadata = run["metadata"]
    return f"{run['preset']}.{metadata['backend']}-{device_slug(metadata['device_type'], metadata['device_name'])}.json"
