"""Shared by the reference trainer's tests: where the baselines are, and how far two loss curves are apart."""

from __future__ import annotations

from pathlib import Path

from portlayer.train import runfile
from portlayer.train.compare import DEFAULT_RTOL, compare_runs

BASELINES = Path(__file__).resolve().parents[2] / "reference_train" / "baselines"
TINY_PRESETS = ("gpt2-tiny", "bert-base-uncased-tiny", "mixtral-8x7b-tiny")
# cpu fp32 runs agree to ~1e-7 across hosts, thread counts and torch versions (docs/parity.md, "Tolerance and what an error means").
RTOL = DEFAULT_RTOL


def baseline(preset: str) -> dict:
    return runfile.read_run(BASELINES / f"{preset}.cpu-cpu.json")


def max_relative_difference(expected: dict, actual: dict) -> float:
    """max over steps of |Δloss| / |loss|, by the same comparison `portlayer parity compare` makes."""
    return compare_runs(expected, actual).max_rel_error
