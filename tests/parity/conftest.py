"""Small synthetic run files in the parity run-file format, for testing compare without training."""

from __future__ import annotations

import copy

import pytest

from portlayer.train import runfile

LOSSES = [10.8, 10.1, 9.7, 9.4, 9.2, 9.05]


def _make_run(losses=LOSSES, **metadata) -> dict:
    """A run of gpt2-tiny on 2 cpu ranks x 4 sequences; keyword arguments override metadata fields."""
    fields = {
        "backend": "cpu",
        "device_type": "cpu",
        "device_name": "x86_64 cpu",
        "torch": "2.13.0",
        "transformers": "5.23.0",
        "vendor": {"module": None, "version": None},
        "world_size": 2,
        "per_device_batch": 4,
        "grad_accum": 1,
        "global_batch": 8,
        "seq_len": 64,
        "steps": len(losses),
        "lr": 1e-3,
        "warmup_steps": 5,
        "precision": "fp32",
        "tf32": False,
        "deterministic": True,
        "seed": 0,
        "parity": True,
        "config_hash": "c0ffee",
        "data_checksum": "da7a",
        "init_weights_checksum": "1717",
        "dropout_fields_zeroed": ["resid_pdrop"],
        "created": "2025-01-01T00:00:00Z",
        "command": ["portlayer", "parity", "run", "--preset", "gpt2-tiny"],
    }
    fields.update(metadata)
    return {
        "schema": "portlayer.parity.run/1",
        "preset": "gpt2-tiny",
        "metadata": fields,
        "steps": [
            {
                "step": index + 1,
                "loss": loss,
                "tokens_per_s": 4000.0,
                "peak_memory_bytes": 200 * 2**20,
                "lr": 1e-3,
            }
            for index, loss in enumerate(losses)
        ],
        "summary": {
            "tokens_per_s": 4000.0,
            "peak_memory_bytes": 200 * 2**20,
            "eval_loss": losses[-1],
            "perplexity": 8500.0,
        },
    }


def _perturbed(run: dict, rel_errors: dict[int, float]) -> dict:
    """A copy of `run` whose loss at each given step is off by that relative error."""
    run = copy.deepcopy(run)
    for entry in run["steps"]:
        entry["loss"] *= 1 + rel_errors.get(entry["step"], 0.0)
    return run


@pytest.fixture
def make_run():
    return _make_run


@pytest.fixture
def perturbed():
    return _perturbed


@pytest.fixture
def write_run(tmp_path):
    """Write a run with the trainer's own writer, as `portlayer parity run` would."""

    def write(run: dict, name: str) -> str:
        path = tmp_path / name
        runfile.write_run(path, run)
        return str(path)

    return write
