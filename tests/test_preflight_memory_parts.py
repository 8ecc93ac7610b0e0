"""fake_step's bookkeeping of MemTracker's figures, on hand-made snapshots: the sum over devices, and which
phase of the steady-state step holds the peak."""

from __future__ import annotations

import pytest

from portlayer.preflight import fake_step


class Tracker:
    """MemTracker's `get_tracker_snapshot(kind)`: per device, bytes by category."""

    def __init__(self, peak: dict):
        self.peak = peak

    def get_tracker_snapshot(self, kind: str) -> dict:
        assert kind == "peak"
        return self.peak


def test_the_peak_snapshot_sums_each_category_over_devices():
    tracker = Tracker({"cpu": {"Parameter": 3, "Total": 3}, "meta": {"Parameter": 5, "Gradient": 2, "Total": 7}})
    assert fake_step._snapshot(tracker) == {"Parameter": 8, "Gradient": 2, "Total": 10}


@pytest.mark.parametrize(
    ("after_forward", "after_backward", "phase"),
    [
        ({"Total": 100, "Activation": 60, "Parameter": 40}, {"Total": 50, "Parameter": 40}, "forward"),
        ({"Total": 50, "Parameter": 40}, {"Total": 100, "Gradient": 60, "Parameter": 40}, "backward"),
        ({"Total": 0}, {}, "forward"),  # a snapshot without a total counts as 0, not more
        ({}, {"Total": 1}, "backward"),
    ],
)
def test_the_training_peak_is_in_the_phase_that_holds_more(after_forward, after_backward, phase):
    memory, optimizing = fake_step._steady_state(after_forward, after_backward, {}, state=0, ddp_buckets=0)
    assert optimizing is None  # no optimizer phase above the backward's peak: the training peak is the step's
    assert memory.phase == phase
