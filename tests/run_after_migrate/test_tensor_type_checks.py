"""Megatron-LM's mixed-precision optimizers sort parameters by legacy CUDA type strings (`param.type() ==
"torch.cuda.FloatTensor"`) and refuse any other type. In a program of that shape (optimizer/param_groups.py),
the port sorts the parameters it placed on the stand-in npu by dtype as the original sorts CUDA ones, and on
the cpu refuses them as the original refuses cpu parameters on a host without CUDA ("Meaning", rule 2)."""

import json
from pathlib import Path

import pytest

from portlayer.migrate.engine import migrate_source
from tests.processes import fresh_process_json, run_python

PROGRAM = Path(__file__).with_name("optimizer") / "param_groups.py"
SORTED_ON_THE_DEVICE = {
    "float16": ["torch.bfloat16", "torch.bfloat16"],
    "fp32": ["torch.float32", "torch.float32"],
    "main": ["torch.float32 npu", "torch.float32 npu"],
}


def ported(target: str) -> str:
    result = migrate_source(PROGRAM.read_text(encoding="utf-8"), target)
    assert result.diagnostics == ()
    return result.code  # run as __main__, it prints what it observed


@pytest.mark.parametrize("target", ["neutral", "npu"])
def test_on_the_stand_in_npu_the_parameters_are_sorted_by_dtype(target):
    observed = fresh_process_json(ported(target), env={"PORTLAYER_BACKEND": "npu"})
    assert observed == {"device": "npu:0", **SORTED_ON_THE_DEVICE}


def test_on_the_cpu_they_are_refused_as_the_original_refuses_cpu_parameters():
    on_cpu = PROGRAM.read_text(encoding="utf-8").replace('torch.device("cuda")', 'torch.device("cpu")')
    original = run_python(on_cpu, fake_plugins=False)
    observed = fresh_process_json(ported("neutral"), env={"PORTLAYER_BACKEND": "cpu"}, fake_plugins=False)
    assert observed == {"device": "cpu", "refused": json.loads(original.stdout)["refused"]}
    assert observed["refused"].endswith("Received torch.BFloat16Tensor")
