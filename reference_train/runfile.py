"""The parity run file (`portlayer.parity.run/1`): one JSON document per training run.

    {"schema": "portlayer.parity.run/1", "preset": "gpt2-tiny",
     "metadata": {...},                       # what defines and what ran the experiment (METADATA)
     "steps": [{"step": 1, "loss": ..., "tokens_per_s": ..., "peak_memory_bytes": ..., "lr": ..., "grad_norm": ...}, ...],
     "summary": {"tokens_per_s": ..., "peak_memory_bytes": ..., "eval_loss": ..., "perplexity": ...}}

The schema is written here once, as the fields of each section (`METADATA`, `STEP`, `SUMMARY`): `write_run`
refuses a run that lacks one of them or has one they lack, and `read_run` fills in, for a file written before
a field existed, what that file meant (`Field.older`); either way a bad file is one `RunFileError` line naming
the file and the first problem. Adding a field is adding it here, and to what the trainer records.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from portlayer import PortlayerError
from portlayer.atomic import write_atomic

SCHEMA = "portlayer.parity.run/1"

# The committed baselines, package data of portlayer.train: found where the package is installed.
BASELINES = Path(str(resources.files(__package__).joinpath("baselines")))

# The JSON types a field's value may take; `_is` keeps true and false out of the numbers.
TEXT, WHOLE, NUMBER, FLAG, OBJECT, LIST = (str,), (int,), (int, float), (bool,), (dict,), (list,)


@dataclass(frozen=True)
class Field:
    """One field of a section of the run file: its name, the JSON types its value takes, whether it may be
    null, and for a field added after run files were first written, what a file without it meant (a function
    of the rest of its section)."""

    name: str
    kind: tuple[type, ...]
    nullable: bool = False
    older: Callable[[dict], Any] | None = None


def _absent(value: Any) -> Callable[[dict], Any]:
    return lambda section: value


METADATA = (
    Field("backend", TEXT),
    Field("device_type", TEXT),
    Field("device_name", TEXT),
    Field("torch", TEXT),
    Field("transformers", TEXT),
    Field("vendor", OBJECT),  # {"module": the vendor's plugin or null, "version": its version or null}
    Field("world_size", WHOLE),
    # Ranks that split each layer (`--tp`) and pipeline stages (`--pp`); the world size over their product trains
    # on different data. `--sp` keeps part of the sequence on each --tp rank; the pipeline's schedule is named.
    Field("tensor_parallel", WHOLE, older=_absent(1)),
    Field("sequence_parallel", FLAG, older=_absent(False)),
    Field("pipeline_parallel", WHOLE, older=_absent(1)),
    Field("pipeline_schedule", TEXT, nullable=True, older=_absent(None)),  # null without --pp
    Field("per_device_batch", WHOLE),
    Field("grad_accum", WHOLE),
    Field("global_batch", WHOLE),  # world_size / (tensor_parallel x pipeline_parallel) x per_device_batch x grad_accum
    Field("seq_len", WHOLE),
    Field("steps", WHOLE),
    # The steps the learning-rate schedule spans, part of the experiment since `--schedule-steps`.
    Field("schedule_steps", WHOLE, older=lambda metadata: metadata.get("steps")),
    Field("lr", NUMBER),
    Field("warmup_steps", WHOLE),
    Field("precision", TEXT),
    Field("strategy", TEXT, older=_absent("ddp")),  # every run before strategies trained with DDP
    Field("strategy_engine", TEXT, nullable=True, older=_absent(None)),
    Field("tf32", FLAG),
    Field("compile", FLAG, older=_absent(False)),  # torch.compile of the model (`--compile`)
    # torch's AdamW and its implementation: "AdamW" (torch's default for the device), "AdamW (fused)", "… (foreach)".
    Field("optimizer", TEXT, older=_absent("AdamW")),
    Field("deterministic", FLAG),
    Field("seed", WHOLE),
    Field("parity", FLAG),
    # The seed of the one-ulp moves `--perturb-init` gave the initial weights (0: none), after their checksum.
    Field("perturb_init", WHOLE, older=_absent(0)),
    Field("config_hash", TEXT),
    Field("data_checksum", TEXT),
    Field("init_weights_checksum", TEXT),
    Field("dropout_fields_zeroed", LIST),
    Field("created", TEXT),
    Field("command", LIST),
    Field("model_name_or_path", TEXT, nullable=True, older=_absent(None)),
    Field("data", TEXT, nullable=True, older=_absent(None)),  # the corpus given with --data; null: built in
)
STEP = (
    Field("step", WHOLE),
    Field("loss", NUMBER),  # NaN for a diverged step: written as null (JSON has none), read back as NaN
    Field("tokens_per_s", NUMBER),
    Field("peak_memory_bytes", WHOLE, nullable=True),  # null where the backend has no device allocator
    Field("lr", NUMBER),
    # The total gradient norm before clipping (null: not recorded, in a file from before it was, or a step
    # whose norm was not finite: an fp16 overflow the scaler skipped).
    Field("grad_norm", NUMBER, nullable=True, older=_absent(None)),
)
SUMMARY = (
    Field("tokens_per_s", NUMBER),
    Field("peak_memory_bytes", WHOLE, nullable=True),
    Field("eval_loss", NUMBER),
    Field("perplexity", NUMBER),
    Field("host_peak_rss_bytes", WHOLE, nullable=True, older=_absent(None)),
)


class RunFileError(PortlayerError):
    """A run file that is missing, not JSON, or not of the schema."""


def _is(value: Any, kind: tuple[type, ...]) -> bool:
    if isinstance(value, bool) and bool not in kind:
        return False
    return isinstance(value, kind)


def _check_section(label: str, section: Any, fields: tuple[Field, ...], *, complete: bool) -> None:
    """Every field there with a value of its type; with `complete`, no field the schema lacks either."""
    if not isinstance(section, dict):
        raise RunFileError(f"{label} is not an object")
    missing = [field.name for field in fields if field.name not in section]
    if missing:
        raise RunFileError(f"{label} lacks {', '.join(missing)}")
    known = {field.name for field in fields}
    unknown = [name for name in section if name not in known]
    if complete and unknown:
        raise RunFileError(f"{label} has {', '.join(unknown)}, which the schema lacks")
    for field in fields:
        value = section[field.name]
        if not (_is(value, field.kind) or (field.nullable and value is None)):
            raise RunFileError(f"{label}.{field.name} has the wrong type ({value!r})")


def validate(run: Any, *, complete: bool = True) -> None:
    """Raise `RunFileError` (no file name) on the first way `run` departs from the schema. `complete`: as a
    writer must, with no field the schema lacks (a reader keeps those a later version may add)."""
    if not isinstance(run, dict):
        raise RunFileError("not a JSON object")
    if run.get("schema") != SCHEMA:
        raise RunFileError(f"schema is {run.get('schema')!r}, expected {SCHEMA!r}")
    if not isinstance(run.get("preset"), str):
        raise RunFileError("no preset name")
    _check_section("metadata", run.get("metadata"), METADATA, complete=complete)
    steps = run.get("steps")
    if not isinstance(steps, list) or not steps:
        raise RunFileError("no steps")
    for index, step in enumerate(steps, start=1):
        _check_section(f"step {index}", step, STEP, complete=complete)
        if step["step"] != index:
            raise RunFileError(f"steps are not numbered 1, 2, 3, …: found {step['step']!r} at position {index}")
    _check_section("summary", run.get("summary"), SUMMARY, complete=complete)
    _check_metadata(run["metadata"], len(steps))


def _check_metadata(metadata: dict, steps: int) -> None:
    """What the metadata's fields say of one another and of the steps the file holds."""
    if steps != metadata["steps"]:
        raise RunFileError(f"metadata.steps is {metadata['steps']} but the file holds {steps} steps")
    if metadata["schedule_steps"] < steps:
        raise RunFileError(f"metadata.schedule_steps is {metadata['schedule_steps']}: fewer than metadata.steps")
    tensor, pipeline = metadata["tensor_parallel"], metadata["pipeline_parallel"]
    model_parallel = tensor * pipeline
    named = " x ".join(name for name, size in (("tensor_parallel", tensor), ("pipeline_parallel", pipeline))
                       if size != 1) or "tensor_parallel"  # fmt: skip
    copies, split = divmod(metadata["world_size"], max(model_parallel, 1))
    if split or tensor < 1 or pipeline < 1:
        raise RunFileError(f"metadata.world_size {metadata['world_size']} is no multiple of metadata.{named}"
                           f" {model_parallel}")  # fmt: skip
    made = copies * metadata["per_device_batch"] * metadata["grad_accum"]
    if metadata["global_batch"] != made:
        over = "" if model_parallel == 1 else f" / {named.replace(' x ', ' / ')}"
        raise RunFileError(
            f"metadata.global_batch is {metadata['global_batch']}, not world_size{over} x per_device_batch x"
            f" grad_accum = {made}"
        )


def _as_the_schema_means(run: Any) -> None:
    """What a file holds, as the current schema means it: a null loss is NaN (JSON has none), and a file
    written before a field existed gets the value that file meant (`Field.older`)."""
    if not isinstance(run, dict):
        return
    steps = run["steps"] if isinstance(run.get("steps"), list) else []
    sections = [(run.get("metadata"), METADATA), (run.get("summary"), SUMMARY), *((step, STEP) for step in steps)]
    for section, fields in sections:
        if not isinstance(section, dict):
            continue
        for field in fields:
            if field.name not in section and field.older is not None:
                section[field.name] = field.older(section)
        if fields is STEP and "loss" in section and section["loss"] is None:
            section["loss"] = math.nan


def _json_number(value: Any) -> Any:
    # JSON has no NaN or infinity: a diverged loss is written as null and read back as NaN.
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _as_written(run: dict) -> dict:
    """`run` laid out as the schema lists it (committed baselines diff well), a step's non-finite numbers null."""
    return {
        "schema": SCHEMA,
        "preset": run["preset"],
        "metadata": {field.name: run["metadata"][field.name] for field in METADATA},
        "steps": [{field.name: _json_number(step[field.name]) for field in STEP} for step in run["steps"]],
        "summary": {field.name: run["summary"][field.name] for field in SUMMARY},
    }


def write_run(path: os.PathLike, run: dict) -> None:
    """Validate `run` and write it to `path` atomically (a reader never sees half a file)."""
    path = Path(path)
    try:
        validate(run)
    except RunFileError as exc:
        raise RunFileError(f"{path}: refusing to write an invalid run: {exc}") from None
    write_atomic(path, json.dumps(_as_written(run), indent=1) + "\n")


def read_json(path: Path, error: type[Exception] = RunFileError, missing: str = "no such file") -> Any:
    """The JSON document in `path` (a run file, a band file); `error` with a one-line reason otherwise."""
    try:
        with open(path, encoding="utf-8") as source:
            return json.load(source)
    except FileNotFoundError:
        raise error(f"{path}: {missing}") from None
    except OSError as exc:
        raise error(f"{path}: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise error(f"{path}: not a JSON file ({exc})") from None


def read_run(path: os.PathLike) -> dict:
    """The run in `path`, validated; `RunFileError` with a one-line reason otherwise."""
    path = Path(path)
    run = read_json(path)
    _as_the_schema_means(run)
    try:
        validate(run, complete=False)
    except RunFileError as exc:
        raise RunFileError(f"{path}: {exc}") from None
    return run

