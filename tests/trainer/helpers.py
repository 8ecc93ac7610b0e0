"""Shared by the reference trainer's tests: where the baselines are, and how far two loss curves are apart."""

from __future__ import annotations

import math
import socket

from portlayer.train import runfile

BASELINES = runfile.BASELINES
TINY_PRESETS = ("gpt2-tiny", "bert-base-uncased-tiny", "mixtral-8x7b-tiny")
# cpu fp32 runs agree to ~1e-7 across hosts, thread counts and torch versions (docs/parity.md, "Tolerance
# and what an error means"): 1e-5
# is `portlayer parity compare`'s default tolerance, written here on its own so the tests do not take it
# from the code they check.
RTOL = 1e-5
# Where each sharded strategy keeps its model and optimizer state inside a checkpoint folder.
STRATEGY_STATE = {"fsdp2": "model-optimizer.pt", "zero2": "deepspeed", "zero3": "deepspeed"}


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
