"""Shared by the reference trainer's tests: where the baselines are, and how far two loss curves are apart."""

from __future__ import annotations

import math
import socket

import pytest
import torch

from portlayer.train import runfile
from portlayer.train.train import compile_traces_transformers

BASELINES = runfile.BASELINES
# What the trainer refuses in one line on older torch (tests/trainer/test_training.py, tests/strategies/test_prepare.py)
# is tested where torch has it: --compile from 2.7 (transformers calls torch.compiler.is_exporting); fsdp2 on the cpu
# from 2.11 (2.6's cpu streams have no events; 2.7 and 2.8's gloo sums where fully_shard asks for the average).
needs_compile = pytest.mark.skipif(not compile_traces_transformers(), reason="torch < 2.7: the trainer refuses --compile")
needs_cpu_fsdp2 = pytest.mark.skipif(
    torch.__version__.startswith(("2.6.", "2.7.", "2.8.")), reason="torch 2.6-2.8: the trainer refuses fsdp2 on the cpu"
)
TINY_PRESETS = ("gpt2-tiny", "bert-base-uncased-tiny", "mixtral-8x7b-tiny")
# cpu fp32 runs agree to ~1e-7 across hosts, thread counts and torch versions (docs/parity.md, "Tolerance
# and what an error means"): 1e-5
# is `portlayer parity compare`'s default tolerance, written here on its own so the tests do not take it
# from the code they check.
RTOL = 1e-5
# Where each sharded strategy (and tensor and pipeline parallel, "tp", "pp") keeps its model and optimizer state in a checkpoint folder.
STRATEGY_STATE = {"fsdp2": "model-optimizer.pt", "tp": "model-optimizer.pt", "pp": "model-optimizer.stage-0-of-2.pt",
                  "zero2": "deepspeed", "zero3": "deepspeed"}
# A killed run: `--save-every` and `--fault` of its first launch; the second resumes from the checkpoint.
KILL_OPTIONS = ("--save-every", 10, "--fault", "exit@15:1")
# A bf16 step on this cpu (no bf16 matmul units) costs a few seconds: the live run is the first third of the H200's
# 30 steps, compared as a prefix. The 30 steps are held by the cpu's committed band references, which the same
# trainer recorded (tests/trainer/test_bf16_parity.py).
CPU_BF16_STEPS = 10


def baseline(preset: str) -> dict:
    return runfile.read_run(BASELINES / f"{preset}.cpu-cpu.json")


def max_relative_difference(expected: dict, actual: dict) -> float:
    """max over steps of |Δloss| / |loss| (docs/parity.md), computed here, not by the compare under test."""
    assert len(expected["steps"]) == len(actual["steps"])
    errors = [abs(run["loss"] - base["loss"]) / abs(base["loss"]) for base, run in zip(expected["steps"], actual["steps"])]
    return max(math.inf if math.isnan(error) else error for error in errors)  # a NaN loss is never close


def free_port() -> int:
    """A port nothing listens on now, for a rendezvous the test starts itself."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def assert_killed_with_a_checkpoint(status: int, output: str, checkpoints, strategy: str) -> None:
    """A run launched with KILL_OPTIONS failed in one line at rank 1's step 15, and its step-10 checkpoint holds
    the strategy's state."""
    assert status == 1, output[-4000:]
    assert output.strip().splitlines()[-1].endswith("rank 1: injected fault: exiting at step 15"), output[-4000:]
    (saved,) = checkpoints.iterdir()
    assert saved.name == "step-000010"
    assert (saved / STRATEGY_STATE[strategy]).exists()
