"""The precision table (`portlayer.precision`): what each `--precision` name means, said once for the trainer
and preflight."""

from __future__ import annotations

import pytest
import torch

from portlayer.precision import FP32, PRECISIONS
from portlayer.preflight import sharding
from portlayer.preflight.cli import preflight
from portlayer.train.__main__ import main as trainer
from tests.processes import run_python


def test_each_precision_names_its_torch_dtype_and_size():
    assert {name: precision.dtype for name, precision in PRECISIONS.items()} == {
        "fp32": torch.float32,
        "bf16": torch.bfloat16,
        "fp16": torch.float16,
    }
    assert all(precision.bytes == precision.dtype.itemsize for precision in PRECISIONS.values())


def test_only_the_16_bit_precisions_autocast():
    assert {name for name, precision in PRECISIONS.items() if precision.autocast} == {"bf16", "fp16"}
    assert FP32 is PRECISIONS["fp32"]


def _choices(command, option: str) -> list[str]:
    (found,) = [param for param in command.params if param.name == option]
    return list(found.type.choices)


def test_the_trainer_and_preflight_offer_the_tables_names():
    assert _choices(trainer, "precision") == _choices(preflight, "precision") == list(PRECISIONS)


def test_preflights_byte_counts_come_from_the_table():
    assert sharding.WEIGHT_BYTES == {"fp32": 4, "bf16": 2, "fp16": 2}
    # AdamW's two fp32 moments, and an fp32 master copy of 16-bit weights
    assert sharding.ADAM_BYTES == {"fp32": 8, "bf16": 12, "fp16": 12}


# What a new interpreter has imported: the warm one has torch already.
@pytest.mark.real_interpreter
def test_the_names_load_no_torch():
    result = run_python(
        "import sys; from portlayer.precision import PRECISIONS; print(sorted(PRECISIONS), 'torch' in sys.modules)",
        fake_plugins=False,
    )
    assert result.stdout.split("]")[-1].strip() == "False", result.stdout + result.stderr
