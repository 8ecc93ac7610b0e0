"""compare_runs: when two runs count as the same training, and how an error is classified."""

import dataclasses
import math

import pytest

from portlayer.train.compare import (
    BF16,
    COMPARABLE_FIELDS,
    DEFAULT_RTOL,
    DIVERGENCE,
    KNOWN_DIFFERENCE,
    ROUNDING,
    TF32,
    IncomparableRuns,
    classify,
    compare_runs,
)
from tests.run_files import read_as_older_file


def test_identical_runs_are_within_tolerance_with_zero_error(make_run):
    comparison = compare_runs(make_run(), make_run())
    assert comparison.within_tolerance
    assert comparison.first_beyond is None
    assert comparison.max_rel_error == 0.0
    assert comparison.verdict == ROUNDING
    assert comparison.rtol == DEFAULT_RTOL


def test_errors_below_rtol_pass_and_the_worst_step_is_found(make_run, perturbed):
    run = perturbed(make_run(), {2: 3e-7, 4: -8e-6, 5: 1e-6})
    comparison = compare_runs(make_run(), run, rtol=1e-5)
    assert comparison.within_tolerance
    assert comparison.worst_step.step == 4
    assert comparison.max_rel_error == pytest.approx(8e-6, rel=1e-6)


def test_the_first_step_beyond_rtol_is_reported_not_the_worst(make_run, perturbed):
    run = perturbed(make_run(), {3: 2e-5, 5: 4e-3})
    comparison = compare_runs(make_run(), run, rtol=1e-5)
    assert not comparison.within_tolerance
    assert comparison.first_beyond.step == 3
    assert comparison.worst_step.step == 5
    assert comparison.verdict == DIVERGENCE


def test_rtol_decides(make_run, perturbed):
    run = perturbed(make_run(), {3: 2e-5})
    assert not compare_runs(make_run(), run, rtol=1e-5).within_tolerance
    assert compare_runs(make_run(), run, rtol=1e-4).within_tolerance


def test_an_error_exactly_at_rtol_is_within_it(make_run):
    # 8 -> 9 is a relative error of exactly 1/8 (both exact in binary): "beyond" means strictly greater.
    baseline, run = make_run(losses=[8.0, 8.0]), make_run(losses=[8.0, 9.0])
    comparison = compare_runs(baseline, run, rtol=0.125)
    assert comparison.max_rel_error == 0.125
    assert comparison.within_tolerance
    assert comparison.first_beyond is None
    assert not compare_runs(baseline, run, rtol=0.124).within_tolerance


def test_long_identical_runs_are_comparable(make_run):
    # 300 steps: counts beyond the small integers CPython caches must still compare equal.
    losses = [10.0 - step / 100 for step in range(300)]
    assert compare_runs(make_run(losses=losses), make_run(losses=losses)).within_tolerance


def test_negative_losses_compare_by_their_magnitude(make_run):
    # |(-3) - (-2)| / |-2| = 0.5
    comparison = compare_runs(make_run(losses=[-2.0, -2.0]), make_run(losses=[-2.0, -3.0]), rtol=0.5)
    assert comparison.max_rel_error == 0.5 and comparison.within_tolerance


def test_a_zero_baseline_loss_is_refused(make_run):
    with pytest.raises(IncomparableRuns, match="^baseline loss is 0 at step 2: no relative error$"):
        compare_runs(make_run(losses=[1.0, 0.0]), make_run(losses=[1.0, 0.0]))


def test_a_comparison_cannot_be_altered_after_the_fact(make_run):
    comparison = compare_runs(make_run(), make_run())
    with pytest.raises(dataclasses.FrozenInstanceError):
        comparison.rtol = 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        comparison.steps[0].run_loss = 0.0


def test_a_nan_loss_is_a_divergence(make_run, perturbed):
    run = make_run()
    run["steps"][2]["loss"] = math.nan
    comparison = compare_runs(make_run(), run)
    assert comparison.first_beyond.step == 3
    assert comparison.verdict == DIVERGENCE


def test_a_different_world_size_with_the_same_global_batch_is_comparable(make_run):
    one_rank = make_run(world_size=1, per_device_batch=8)
    assert compare_runs(make_run(), one_rank).within_tolerance


@pytest.mark.parametrize(
    ("field", "override"),
    [
        ("preset", {}),
        ("config_hash", {"config_hash": "beef"}),
        ("data_checksum", {"data_checksum": "beef"}),
        ("init_weights_checksum", {"init_weights_checksum": "beef"}),
        ("global_batch", {"per_device_batch": 3}),
        ("global_batch", {"grad_accum": 2}),
        ("seq_len", {"seq_len": 128}),  # same batch of sequences, twice the tokens: another experiment
    ],
)
def test_each_experiment_field_must_match(make_run, field, override):
    run = make_run(**override)
    if field == "preset":
        run["preset"] = "bert-base-uncased-tiny"
    with pytest.raises(IncomparableRuns, match=f"^runs differ in {field}: baseline .*, run .*"):
        compare_runs(make_run(), run)


@pytest.mark.parametrize(
    ("field", "override", "baseline_value", "run_value"),
    [
        ("lr", {"lr": 1.1e-3}, 1e-3, 1.1e-3),
        ("warmup_steps", {"warmup_steps": 100}, 5, 100),
    ],
)
def test_runs_that_differ_in_a_setting_are_compared_and_the_difference_named(
    make_run, field, override, baseline_value, run_value
):
    comparison = compare_runs(make_run(), make_run(**override))
    assert comparison.setting_differences == ((field, baseline_value, run_value),)


def test_every_setting_that_differs_is_named_in_order(make_run):
    run = make_run(precision="bf16", tf32=True, parity=False, deterministic=False, dropout_fields_zeroed=[])
    assert compare_runs(make_run(), run).setting_differences == (
        ("precision", "fp32", "bf16"),
        ("tf32", False, True),
        ("parity", True, False),
        ("deterministic", True, False),
        ("dropout_fields_zeroed", ["resid_pdrop"], []),
    )


def test_identical_settings_name_no_difference(make_run):
    assert compare_runs(make_run(), make_run()).setting_differences == ()


def test_the_global_batch_counts_accumulation(make_run):
    # 1 rank x 4 sequences x 2 accumulated = 8 = 2 ranks x 4 x 1
    assert compare_runs(make_run(), make_run(world_size=1, per_device_batch=4, grad_accum=2)).within_tolerance


def test_a_mismatched_field_shows_both_values(make_run):
    with pytest.raises(IncomparableRuns) as error:
        compare_runs(make_run(), make_run(config_hash="beef"))
    assert str(error.value) == "runs differ in config_hash: baseline 'c0ffee', run 'beef'"


def test_a_run_longer_than_the_baseline_is_compared_over_the_baselines_steps(make_run):
    comparison = compare_runs(make_run(losses=[10.8, 10.1, 9.7, 9.4]), make_run())
    assert [delta.step for delta in comparison.steps] == [1, 2, 3, 4]
    assert comparison.lengths == (4, 6)


def test_steps_requires_both_runs_to_have_that_many(make_run):
    with pytest.raises(IncomparableRuns, match="^--steps 6: the baseline has only 4 steps$"):
        compare_runs(make_run(losses=[10.8, 10.1, 9.7, 9.4]), make_run(), steps=6)


def test_a_global_batch_mismatch_shows_how_each_is_made(make_run):
    with pytest.raises(IncomparableRuns, match=r"baseline 8 \(2 ranks x 4 x 1 accumulated\), run 6 "):
        compare_runs(make_run(), make_run(world_size=2, per_device_batch=3))


def test_the_compared_fields_include_the_issue_list():
    assert {"preset", "config_hash", "data_checksum", "init_weights_checksum", "global_batch", "seq_len"} <= set(
        COMPARABLE_FIELDS
    )
    assert "world_size" not in COMPARABLE_FIELDS


def test_a_shorter_run_is_compared_over_the_common_steps_and_says_so(make_run):
    # A shorter run consumes fewer samples, so its data checksum differs by construction: not the cause.
    short = make_run(losses=[10.8, 10.1, 9.7, 9.4], data_checksum="da7a-first-4-steps")
    comparison = compare_runs(make_run(), short)
    assert [delta.step for delta in comparison.steps] == [1, 2, 3, 4]
    assert comparison.within_tolerance
    assert comparison.length_note.startswith("compared the first 4 steps: the baseline has 6, the run 4")


def test_runs_of_one_length_have_no_length_note(make_run):
    assert compare_runs(make_run(), make_run()).length_note is None


def test_a_shorter_run_must_still_read_the_same_data(make_run):
    short = make_run(losses=[10.8, 10.1, 9.7, 9.4], data_checksum="other", seed=1)
    with pytest.raises(IncomparableRuns, match="runs differ in seed: baseline 0, run 1"):
        compare_runs(make_run(), short)


def test_steps_requires_that_length_of_both_runs(make_run):
    short = make_run(losses=[10.8, 10.1, 9.7, 9.4])
    with pytest.raises(IncomparableRuns, match="--steps 5: the run has only 4 steps"):
        compare_runs(make_run(), short, steps=5)
    assert len(compare_runs(make_run(), short, steps=3).steps) == 3


def cosine_lrs(steps: int, schedule: int, peak: float = 1e-3, warmup: int = 5) -> list[float]:
    """The learning rate recorded at each step (the one its update uses) under a warm-up + cosine schedule
    spanning `schedule` steps, written here from the schedule's definition, not taken from the trainer."""
    rates = []
    for index in range(steps):
        if index < warmup:
            rates.append(peak * index / warmup)
        else:
            progress = (index - warmup) / (schedule - warmup)
            rates.append(peak * 0.5 * (1 + math.cos(math.pi * progress)))
    return rates


def run_of(make_run, losses, schedule: int, **metadata) -> dict:
    """A run of len(losses) steps with the learning rates of a `schedule`-step schedule."""
    run = make_run(losses=losses, schedule_steps=schedule, **metadata)
    for entry, rate in zip(run["steps"], cosine_lrs(len(losses), schedule)):
        entry["lr"] = rate
    return run


def unrecorded_schedules(make_run, tmp_path, baseline_losses, run_losses) -> tuple[dict, dict]:
    """A baseline and a run from before the schedule was part of the experiment: each file's cosine spanned
    its own length, and neither recorded it."""
    return tuple(
        read_as_older_file(run_of(make_run, losses, len(losses)), tmp_path, "schedule_steps")
        for losses in (baseline_losses, run_losses)
    )


BASELINE_LOSSES = [10.8 - 0.1 * step for step in range(30)]


def test_a_run_stopped_early_on_the_same_schedule_is_a_prefix_and_notes_nothing(make_run):
    baseline = run_of(make_run, BASELINE_LOSSES, 30)
    short = run_of(make_run, BASELINE_LOSSES[:20], 30)
    comparison = compare_runs(baseline, short)
    assert comparison.within_tolerance and comparison.verdict == ROUNDING
    assert comparison.schedule_note is None and comparison.known_difference is None


def test_the_verdict_never_calls_real_a_divergence_that_a_shorter_schedule_explains(make_run, perturbed, tmp_path):
    # A 20-step run from before the schedule was recorded: its cosine spans 20 steps, so its learning rate
    # parts from the 30-step baseline's at step 7 and its loss from step 8 on.
    baseline, short = unrecorded_schedules(make_run, tmp_path, BASELINE_LOSSES, BASELINE_LOSSES[:20])
    short = perturbed(short, {step: 1e-2 for step in range(8, 21)})
    comparison = compare_runs(baseline, short)
    assert comparison.schedule_note.startswith("the learning rate differs from step 7 (baseline")
    assert comparison.schedule_note.endswith("the schedules span 30 and 20 steps")
    assert comparison.first_beyond.step == 8 and not comparison.within_tolerance
    assert comparison.known_difference == (8, "the learning rate differs from step 7")
    assert comparison.verdict == KNOWN_DIFFERENCE


def test_a_divergence_before_the_known_difference_can_show_is_real(make_run, perturbed, tmp_path):
    baseline, short = unrecorded_schedules(make_run, tmp_path, BASELINE_LOSSES, BASELINE_LOSSES[:20])
    short = perturbed(short, {step: 1e-2 for step in range(5, 21)})
    assert compare_runs(baseline, short).verdict == DIVERGENCE


def test_learning_rates_that_part_under_the_same_schedule_explain_nothing(make_run, perturbed):
    baseline = run_of(make_run, BASELINE_LOSSES, 30)
    broken = run_of(make_run, BASELINE_LOSSES, 30)
    for entry in broken["steps"][2:]:
        entry["lr"] *= 0.9
    comparison = compare_runs(baseline, perturbed(broken, {step: 1e-2 for step in range(4, 31)}))
    assert comparison.schedule_note.endswith("though both runs record the same schedule: the run did not follow it")
    assert comparison.known_difference is None
    assert comparison.verdict == DIVERGENCE


def test_a_recorded_setting_explains_a_divergence_from_the_first_step(make_run, perturbed):
    dropout_on = perturbed(make_run(dropout_fields_zeroed=[]), {1: 5e-2, 2: 5e-2})
    comparison = compare_runs(make_run(), dropout_on)
    assert comparison.known_difference == (1, "the runs differ in dropout_fields_zeroed")
    assert comparison.verdict == KNOWN_DIFFERENCE
    # An lr setting acts where the recorded rates part, not before.
    other_lr = perturbed(make_run(lr=2e-3), {1: 5e-2})
    for entry in other_lr["steps"][1:]:
        entry["lr"] = 2e-3
    comparison = compare_runs(make_run(), other_lr)
    assert comparison.known_difference == (3, "the learning rate differs from step 2")
    assert comparison.verdict == DIVERGENCE
    assert comparison.schedule_note is None  # the lr setting is named by its own note


def test_deterministic_algorithms_off_explain_no_divergence(make_run, perturbed):
    """They change the order of reductions only: rounding, never a divergence."""
    comparison = compare_runs(make_run(), perturbed(make_run(deterministic=False), {2: 5e-2}))
    assert comparison.setting_differences == (("deterministic", True, False),)
    assert comparison.known_difference is None
    assert comparison.verdict == DIVERGENCE


@pytest.mark.parametrize(
    ("error", "precisions", "verdict"),
    [
        (0.0, set(), ROUNDING),
        (2.9e-6, set(), ROUNDING),  # full-width gpt2, cpu vs H100, fp32
        (1e-5, set(), ROUNDING),
        (6e-5, {"tf32"}, TF32),  # tiny presets, TF32 vs fp32
        (1e-3, {"tf32"}, TF32),  # the MoE model at published size
        (6e-4, {"bf16"}, BF16),  # the bands overlap: the recorded precision decides
        (6e-4, set(), TF32),
        (1.1e-3, set(), BF16),
        (1.2e-3, {"bf16"}, BF16),
        (1.2e-3, set(), BF16),  # the top of the bf16 band belongs to it, recorded or not
        (1.21e-3, set(), DIVERGENCE),
        (2e-3, {"bf16", "tf32"}, DIVERGENCE),
        (0.5, set(), DIVERGENCE),
    ],
)
def test_classification_follows_the_measured_bands(error, precisions, verdict):
    assert classify(error, precisions) == verdict


def test_the_verdict_uses_the_precision_either_run_recorded(make_run, perturbed):
    bf16_run = perturbed(make_run(precision="bf16"), {2: 6e-4})
    assert compare_runs(make_run(), bf16_run, rtol=1e-2).verdict == BF16
    tf32_run = perturbed(make_run(tf32=True), {2: 6e-4})
    assert compare_runs(make_run(), tf32_run, rtol=1e-2).verdict == TF32
