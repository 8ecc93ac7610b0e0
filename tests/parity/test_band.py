"""The noise band (band.py): measured from reference runs, written and read back, and the verdict it gives."""

import math

import pytest

from portlayer.train.band import (
    FACTOR,
    FLOOR,
    LR_FLOOR,
    BandError,
    judge,
    measure_band,
    read_band,
    write_band,
)
from portlayer.train.compare import compare_logs, compare_runs
from portlayer.train.logs.numbers import Resolution
from portlayer.train.logs.portlayer_run import series_of_run
from portlayer.train.logs.series import Collector


def series(losses, grad_norms=None, lrs=None, name="log", **details):
    """A log of another program (no run-file metadata) with these values at steps 1, 2, …"""
    collected = Collector()
    for index, loss in enumerate(losses):
        collected.add(
            index + 1,
            loss=loss,
            grad_norm=None if grad_norms is None else grad_norms[index],
            lr=None if lrs is None else lrs[index],
        )
    return collected.series(name, "CSV file", **details)


def test_the_band_is_the_references_spread_carried_forward_and_widened():
    band = measure_band(
        [series([10.0, 9.0, 8.0, 7.0]), series([10.0, 9.009, 8.0, 7.0007]), series([10.0, 8.991, 8.0, 7.0])],
        factor=2,
    )
    widths = [band.width(step, "loss") for step in (1, 2, 3, 4)]
    # Step 2: (9.009 - 8.991) / 9.0 = 2e-3; step 3 agrees by chance but the band keeps the largest so far.
    assert widths == pytest.approx([0.0, 4e-3, 4e-3, 4e-3])
    assert band.steps == 4 and band.factor == 2 and band.precision is None and band.experiment is None


def test_a_band_needs_two_runs_and_steps_they_share():
    with pytest.raises(BandError, match="two reference runs at least"):
        measure_band([series([1.0, 2.0])])
    shared = measure_band([series([3.0, 2.0, 1.0]), series([3.0, 2.0])])
    assert shared.steps == 2


def test_within_the_band_and_the_first_step_and_quantity_that_left_it():
    band = measure_band([series([10.0] * 5, [2.0] * 5), series([10.0, 10.01, 10.01, 10.01, 10.01], [2.0] * 5)], 1)
    baseline = series([10.0] * 5, [2.0] * 5)
    inside = judge(compare_logs(baseline, series([10.0, 10.005, 9.995, 10.0, 10.009], [2.0] * 5)), band)
    assert inside.within and inside.first_out is None
    # Step 1 is held to the floor (the references agree there); step 4's gradient norm and loss both leave.
    outside = judge(compare_logs(baseline, series([10.0, 10.0, 10.0, 10.02, 10.03], [2.0, 2.0, 2.0, 2.2, 2.0])), band)
    step, left = outside.first_out
    assert step == 4
    assert [excursion.quantity for excursion in left] == ["grad_norm", "loss"]  # causes first
    # The spread is relative to the references' middle value (10.01 of two); the band is that x |baseline|.
    assert left[1].used == pytest.approx((10.02 - 10.0) / (0.01 / 10.01 * 10.0))


def test_the_floor_is_the_precisions_rounding_where_references_agree_exactly():
    identical = [series([7.0, 6.5]), series([7.0, 6.5])]
    band = measure_band(identical)
    assert band.width(2, "loss") == 0.0
    baseline = series([7.0, 6.5])
    floor = FLOOR["bf16"]["loss"]  # no precision recorded: the widest
    assert judge(compare_logs(baseline, series([7.0, 6.5 * (1 + floor * 0.9)])), band).within
    assert not judge(compare_logs(baseline, series([7.0, 6.5 * (1 + floor * 1.1)])), band).within


def test_a_learning_rate_is_judged_against_its_own_floor_even_where_the_references_logged_none():
    band = measure_band([series([5.0, 4.0]), series([5.0, 4.001])])
    baseline = series([5.0, 4.0], lrs=[1e-3, 1e-3])
    assert judge(compare_logs(baseline, series([5.0, 4.0], lrs=[1e-3, 1e-3 * (1 + LR_FLOOR / 2)])), band).within
    out = judge(compare_logs(baseline, series([5.0, 4.0], lrs=[1e-3, 1.1e-3])), band).first_out
    assert (out[0], out[1][0].quantity) == (2, "lr")


def test_what_a_logs_rounding_hides_is_never_out_of_the_band():
    """ms-swift writes lr 1.1261e-07 as 1.1e-07: 2.4% apart, and both within 5e-9 of the truth."""
    band = measure_band([series([5.0, 4.0]), series([5.0, 4.0])])
    exact = series([5.0, 4.0], lrs=[0.0, 1.1261e-07])
    rounded = series([5.0, 4.0], lrs=[0.0, 1.1e-07], resolutions={"lr": Resolution(absolute=5e-9)})
    assert judge(compare_logs(exact, rounded), band).within
    unrounded = series([5.0, 4.0], lrs=[0.0, 1.1e-07])
    assert not judge(compare_logs(exact, unrounded), band).within


def test_steps_past_the_band_are_not_judged_and_said():
    band = measure_band([series([5.0, 4.0]), series([5.0, 4.0])])
    verdict = judge(compare_logs(series([5.0, 4.0, 3.0]), series([5.0, 4.0, 9.0])), band)
    assert verdict.within and verdict.unjudged == (3,)


def test_a_nan_loss_leaves_the_band_unless_the_baseline_diverged_there_too():
    band = measure_band([series([5.0, 4.0]), series([5.0, 4.1])])
    assert judge(compare_logs(series([5.0, 4.0]), series([5.0, math.nan])), band).first_out[0] == 2
    assert judge(compare_logs(series([5.0, math.nan]), series([5.0, math.nan])), band).within


def test_a_band_file_round_trips_and_a_bad_one_is_one_line(tmp_path, make_run):
    runs = [series_of_run(make_run(losses=losses), f"ref{index}.json") for index, losses in
            enumerate(([10.0, 9.0, 8.5], [10.0, 9.01, 8.49]))]  # fmt: skip
    band = measure_band(runs)
    path = tmp_path / "band.json"
    write_band(path, band)
    again = read_band(path)
    assert again == band
    assert again.precision == "fp32" and again.experiment["preset"] == "gpt2-tiny"
    assert again.references == ("ref0.json", "ref1.json")
    (tmp_path / "other.json").write_text('{"schema": "something/1"}')
    with pytest.raises(BandError, match="not a band file"):
        read_band(tmp_path / "other.json")
    with pytest.raises(BandError, match="no such band file"):
        read_band(tmp_path / "missing.json")


def test_references_of_different_experiments_make_no_band(make_run):
    with pytest.raises(BandError, match="differs in lr"):
        measure_band([series_of_run(make_run(), "a"), series_of_run(make_run(lr=2e-3), "b")])
    with pytest.raises(BandError, match="different precisions"):
        measure_band([series_of_run(make_run(), "a"), series_of_run(make_run(precision="bf16"), "b")])


def test_a_band_of_another_experiment_is_refused_for_run_files(make_run):
    band = measure_band([series_of_run(make_run(), "a"), series_of_run(make_run(), "b")])
    with pytest.raises(BandError, match="measured for another experiment: warmup_steps 5"):
        judge(compare_runs(make_run(warmup_steps=6), make_run(warmup_steps=6)), band)
    # Another program's logs carry no settings to check: the band is taken on the user's word.
    assert judge(compare_logs(series([10.8, 10.1]), series([10.8, 10.1])), band).within


def test_the_default_factor_is_the_measured_one():
    assert measure_band([series([1.0]), series([1.0])]).factor == FACTOR
