"""fake_step's bookkeeping of MemTracker's figures, on hand-made snapshots: the sum over devices, and which
phase of the steady-state step holds the peak."""

from __future__ import annotations

from enum import Enum
from types import SimpleNamespace

import pytest

from portlayer.preflight import fake_step
from portlayer.preflight.engines import BUFFERS, GRADIENTS


class Tracker:
    """MemTracker's `get_tracker_snapshot(kind)`: per device, bytes by category; and the ledger of what a played
    engine's buffers hold at the peak."""

    def __init__(self, peak: dict, current: dict | None = None, engine_at_peak: dict | None = None):
        self.snapshots = {"peak": peak, "current": current or {}}
        self.ledger = SimpleNamespace(at_peak=engine_at_peak or {})

    def get_tracker_snapshot(self, kind: str) -> dict:
        return self.snapshots[kind]


def test_the_peak_snapshot_sums_each_category_over_devices():
    tracker = Tracker({"cpu": {"Parameter": 3, "Total": 3}, "meta": {"Parameter": 5, "Gradient": 2, "Total": 7}})
    assert fake_step._snapshot(tracker) == {"Parameter": 8, "Gradient": 2, "Total": 10}


@pytest.mark.parametrize("phase", ["forward", "backward"])
def test_the_training_peak_is_in_the_phase_the_tracker_was_in_at_its_peak(phase):
    memory, optimizing = fake_step._steady_state({"Total": 100}, phase, {}, state=0, ddp_buckets=0)
    assert optimizing is None  # no optimizer phase above the backward's peak: the training peak is the step's
    assert memory.phase == phase


def test_the_ledger_remembers_the_phase_of_the_last_peak():
    from portlayer.preflight.engines import Ledger

    ledger = Ledger()
    ledger.phase = "backward"
    ledger.peak_recorded()
    ledger.phase = "optimizer"
    assert ledger.phase_at_peak == "backward"


def test_a_category_keyed_by_an_enum_is_keyed_by_its_name():
    # MemTracker keys its categories by enum members (`_MemRefType.PARAM`); the figures are read by their value.
    class Category(Enum):
        PARAMETER = "Parameter"

    tracker = Tracker({"cpu": {Category.PARAMETER: 3}, "meta": {"Parameter": 5}})
    assert fake_step._snapshot(tracker) == {"Parameter": 8}


def test_the_peak_so_far_adds_what_a_played_engine_holds_to_the_snapshot():
    tracker = Tracker({"meta": {"Parameter": 5, "Temp": 9}}, engine_at_peak={BUFFERS: 4})
    assert fake_step._peak_so_far(tracker) == {"Parameter": 5, "Temp": 9, BUFFERS: 4}
    assert fake_step._peak_so_far(None) == {}  # memory not measured


def test_the_current_total_sums_the_devices_totals():
    tracker = Tracker({}, current={"cpu": {"Total": 3, "Parameter": 3}, "meta": {"Total": 7}, "cuda": {}})
    assert fake_step._current_total(tracker) == 10


def test_a_peaks_categories_are_what_memtracker_filed_them_under_less_the_engines_buffers():
    # MemTracker files DDP's buckets and a played engine's buffers and gradients under activations or
    # temporaries: they are moved out of the activations into communication and gradients.
    at_peak = {"Parameter": 1000, "Gradient": 200, "Activation": 5000, "Temp": 700, "Other": 30, "Buffer": 4,
               BUFFERS: 100, GRADIENTS: 56}
    memory = fake_step._memory(at_peak, "backward", optimizer_state=9000, ddp_buckets=60)
    assert memory == fake_step.Memory(parameters=1000, gradients=256, optimizer_state=9000,
                                      activations=5730 - 160 - 56, communication=160, buffers=4, phase="backward")


def test_a_category_memtracker_did_not_report_holds_nothing():
    assert fake_step._memory({}, "forward", optimizer_state=0, ddp_buckets=0) == fake_step.Memory(0, 0, 0, 0, 0, 0, "forward")


@pytest.mark.parametrize("category", ["Activation", "Temp", "Other"])
def test_each_of_activations_temporaries_and_other_counts_as_activations(category):
    assert fake_step._memory({category: 100}, "forward", optimizer_state=0, ddp_buckets=0).activations == 100


def test_activations_never_go_below_zero_when_the_buffers_were_filed_elsewhere():
    memory = fake_step._memory({"Activation": 10, BUFFERS: 50}, "forward", optimizer_state=0, ddp_buckets=0)
    assert (memory.activations, memory.communication) == (0, 50)


def test_a_memory_totals_its_parts():
    # Each part shares a bit with the sum before it: a sum is not mistaken for a bitwise or.
    memory = fake_step.Memory(parameters=3, gradients=5, optimizer_state=8, activations=16, communication=33,
                              buffers=7, phase="optimizer")
    assert memory.total == 3 + 5 + 8 + 16 + 33 + 7
    assert memory.parts() == {"parameters": 3, "gradients": 5, "optimizer state": 8, "activations, temps": 16,
                              "communication": 33, "buffers": 7}
    assert memory.as_dict() == {"parameters": 3, "gradients": 5, "optimizer_state": 8, "activations": 16,
                                "communication": 33, "buffers": 7, "total": 72, "phase": "optimizer"}


def test_the_training_peak_holds_the_state_the_optimizer_had_from_the_start():
    # The fake step creates the optimizer's state before the step (the steady state): the peak's snapshot has it.
    after_backward = {"Total": 300, "Parameter": 100, "Optstate": 57}
    memory, _ = fake_step._steady_state(after_backward, "backward", {}, state=57, ddp_buckets=3)
    assert (memory.optimizer_state, memory.parameters, memory.communication) == (57, 100, 3)


def test_an_optimizer_phase_above_the_backward_peak_is_its_own_peak():
    # The optimizer step's own optimizer-state figure beyond the state that stays is its temporaries.
    after_backward = {"Total": 300, "Parameter": 100, "Optstate": 150}
    at_end = {"Total": 400, "Parameter": 100, "Optstate": 180, "Temp": 20}
    training, optimizing = fake_step._steady_state(after_backward, "backward", at_end, state=150, ddp_buckets=0)
    assert training.phase == "backward"
    assert optimizing == fake_step.Memory(parameters=100, gradients=0, optimizer_state=150, activations=20 + 30,
                                          communication=0, buffers=0, phase="optimizer")
    # No temporaries filed as such: the optimizer's own are all there is.
    _, optimizing = fake_step._steady_state(after_backward, "backward", {"Total": 400, "Optstate": 180},
                                            state=150, ddp_buckets=0)
    assert optimizing.activations == 30
    # An optimizer without state (plain SGD) files nothing under optimizer state.
    _, optimizing = fake_step._steady_state({"Total": 300}, "backward", {"Total": 400, "Temp": 20}, state=0,
                                            ddp_buckets=0)
    assert optimizing.activations == 20


def test_an_optimizer_phase_above_a_backward_snapshot_without_a_total_is_a_peak():
    _, optimizing = fake_step._steady_state({}, "forward", {"Total": 1}, state=0, ddp_buckets=0)
    assert optimizing is not None and optimizing.phase == "optimizer"


@pytest.mark.parametrize("at_end_total", [300, 299, 0])
def test_an_optimizer_phase_no_higher_than_the_backward_is_not_a_peak(at_end_total):
    after_backward = {"Total": 300, "Parameter": 100}
    _, optimizing = fake_step._steady_state(after_backward, "backward", {"Total": at_end_total}, state=0,
                                            ddp_buckets=0)
    assert optimizing is None
