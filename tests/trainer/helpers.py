"""Shared by the reference trainer's tests: where the baselines are, and how far two loss curves are apart."""

from __future__ import annotations

from pathlib import Path

from reference_train import runfile

BASELINES = Path(__file__).resolve().parents[2] / "reference_train" / "baselines"
TINY_PRESETS = ("gpt2-tiny", "bert-base-uncased-tiny", "mixtral-8x7b-tiny")
# cpu fp32 runs agree to ~1e-7 across hosts, thread counts and torch versions (DESIGN, parity notes).
RTOL = 1e-5


def baseline(preset: str) -> dict:
    return runfile.read_run(BASELINES / f"{preset}.cpu-cpu.json")


def max_relative_difference(expected: dict, actual: dict) -> float:
    """max over steps of |Δloss| / |loss|; the runs must have the same number of steps."""
    assert len(expected["steps"]) == len(actual["steps"])
    return max(
        abs(a["loss"] - e["loss"]) / abs(e["loss"]) for e, a in zip(expected["steps"], actual["steps"])
    )
