"""Run files for the tests that need one without training, made from the schema itself (`runfile.METADATA`,
`STEP`, `SUMMARY`): a field the schema gains is in every synthetic run at once, and a test names only the
fields it is about.

    run = synthetic_run(losses=[10.8, 10.1], strategy="zero2")   # every other field from the schema
    old = read_as_older_file(run, tmp_path, "strategy")          # written before the field existed, read back
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from portlayer.train import runfile

LOSSES = [10.8, 10.1, 9.7, 9.4, 9.2, 9.05]

# The run the tests mean where it matters: gpt2-tiny on 2 cpu ranks x 4 sequences, fp32 parity under DDP.
SETTINGS = {
    "backend": "cpu",
    "device_type": "cpu",
    "device_name": "x86_64 cpu",
    "vendor": {"module": None, "version": None},
    "world_size": 2,
    "tensor_parallel": 1,
    "sequence_parallel": False,
    "pipeline_parallel": 1,
    "pipeline_schedule": None,
    "per_device_batch": 4,
    "grad_accum": 1,
    "seq_len": 64,
    "lr": 1e-3,
    "warmup_steps": 5,
    "precision": "fp32",
    "strategy": "ddp",
    "tf32": False,
    "deterministic": True,
    "seed": 0,
    "parity": True,
    "config_hash": "c0ffee",
    "data_checksum": "da7a",
    "init_weights_checksum": "1717",
    "dropout_fields_zeroed": ["resid_pdrop"],
    "created": "2025-01-01T00:00:00Z",
}
STEP = {"tokens_per_s": 4000.0, "peak_memory_bytes": 200 * 2**20, "lr": 1e-3}
SUMMARY = {"tokens_per_s": 4000.0, "peak_memory_bytes": 200 * 2**20, "perplexity": 8500.0}


def placeholder(field: runfile.Field):
    """A value of the field's type, for a field no test is about."""
    kind = field.kind[0]
    return f"<{field.name}>" if kind is str else kind()


def _section(fields: tuple[runfile.Field, ...], values: dict) -> dict:
    return {field.name: values[field.name] if field.name in values else placeholder(field) for field in fields}


def synthetic_run(losses=LOSSES, **metadata) -> dict:
    """A valid run of `losses`, one step each; keyword arguments set metadata fields. The global batch is made
    from its factors, the schedule spans the run, unless given."""
    values = {**SETTINGS, "steps": len(losses), "schedule_steps": len(losses), **metadata}
    copies = values["world_size"] // (values["tensor_parallel"] * values["pipeline_parallel"])
    values.setdefault("global_batch", copies * values["per_device_batch"] * values["grad_accum"])
    return {
        "schema": runfile.SCHEMA,
        "preset": "gpt2-tiny",
        "metadata": _section(runfile.METADATA, values),
        "steps": [
            _section(runfile.STEP, {**STEP, "step": index, "loss": loss})
            for index, loss in enumerate(losses, start=1)
        ],
        "summary": _section(runfile.SUMMARY, {**SUMMARY, "eval_loss": losses[-1]}),
    }


def read_as_older_file(run: dict, folder: Path, *fields: str) -> dict:
    """`run` written as a file from before these metadata fields existed (without them, as that version's
    writer wrote it), then read back with `runfile.read_run`."""
    path = folder / f"older-{len(list(folder.iterdir()))}.json"
    path.write_text(json.dumps({**run, "metadata": {k: v for k, v in run["metadata"].items() if k not in fields}}))
    return runfile.read_run(path)


def perturbed(run: dict, rel_errors: dict[int, float]) -> dict:
    """A copy of `run` whose loss at each given step is off by that relative error."""
    run = copy.deepcopy(run)
    for entry in run["steps"]:
        entry["loss"] *= 1 + rel_errors.get(entry["step"], 0.0)
    return run
