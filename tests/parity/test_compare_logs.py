"""Comparing logs of other programs: steps aligned by number, a logging interval's mean matched by averaging,
what was compared said, settings unknown said in one line; and the industry criteria beside the verdict."""

import pytest
from click.testing import CliRunner

from portlayer.cli import cli
from portlayer.train.compare import IncomparableRuns, compare_logs
from portlayer.train.criteria import industry_criteria
from portlayer.train.logs.series import Collector
from tests.parity.logs_data import LOGS


def log(values: dict, *, interval=False, name="log.csv"):
    """step -> loss (or (loss, grad_norm)) of another program's log."""
    collected = Collector()
    for step, value in values.items():
        loss, grad_norm = value if isinstance(value, tuple) else (value, None)
        collected.add(step, loss=loss, grad_norm=grad_norm)
    return collected.series(name, "trainer_state.json" if interval else "CSV file", loss_is_interval_mean=interval)


def test_steps_are_aligned_by_number_and_what_was_compared_is_said():
    every_step = log({step: 10.0 - step for step in range(1, 7)})
    every_other = log({2: 8.0, 4: 6.0, 6: 4.0}, name="other.csv")
    comparison = compare_logs(every_step, every_other)
    assert [delta.step for delta in comparison.steps] == [2, 4, 6]
    assert comparison.max_rel_error == 0.0
    assert comparison.length_note == (
        "compared the 3 steps both logged (CSV file, steps 1-6; CSV file, steps 2-6 every 2)"
    )


def test_an_interval_mean_is_compared_with_the_other_sides_mean_over_the_same_steps():
    per_step = log({1: 10.0, 2: 9.0, 3: 8.0, 4: 7.0, 5: 6.0})
    # HuggingFace with logging_first_step and logging_steps 2: step 1's own, then the means of 2-3 and 4-5.
    huggingface = log({1: 10.0, 3: 8.5, 5: 6.5}, interval=True, name="trainer_state.json")
    comparison = compare_logs(per_step, huggingface)
    assert [(d.step, d.baseline_loss, d.run_loss) for d in comparison.steps] == [(1, 10.0, 10.0), (3, 8.5, 8.5), (5, 6.5, 6.5)]
    assert comparison.alignment_notes == (
        "the baseline's losses were averaged over the other side's logging intervals (it logs the mean loss since"
        " its previous log)",
    )


def test_two_means_over_different_intervals_compare_no_loss_but_the_rest():
    every_two = log({2: (9.5, 1.0), 4: (7.5, 1.0)}, interval=True)
    every_four = log({4: (8.5, 1.25)}, interval=True)
    (delta,) = compare_logs(every_two, every_four).steps
    assert "loss" not in delta.baseline_values and delta.error("grad_norm") == 0.25


def test_logs_with_no_step_in_common_are_refused_in_one_line():
    with pytest.raises(IncomparableRuns, match="no step to compare"):
        compare_logs(log({1: 5.0, 2: 4.0}), log({10: 3.0}))


def test_the_industry_criteria_over_the_compared_steps():
    baseline = log({1: (10.0, 2.0), 2: (8.0, 2.0), 3: (6.0, 2.0), 4: (5.0, 2.0)})
    run = log({1: (10.02, 2.1), 2: (8.08, 2.7), 3: (6.0, 2.2), 4: (5.0, 2.0)})
    mean, first, norm, per_step = industry_criteria(compare_logs(baseline, run))
    assert mean.value == pytest.approx((0.002 + 0.01) / 4) and mean.passed
    assert first.value == pytest.approx(0.002) and first.passed and "(step 1)" in first.name
    assert norm.value == pytest.approx((0.05 + 0.35 + 0.1) / 4) and not norm.passed  # 12.5% > 10%
    assert per_step.value == pytest.approx(0.01) and per_step.passed


def test_criteria_without_a_gradient_norm_say_not_logged(tmp_path):
    (tmp_path / "a.csv").write_text("step,loss\n1,10.0\n2,9.0\n")
    (tmp_path / "b.csv").write_text("step,loss\n1,10.0\n2,9.5\n")
    result = CliRunner().invoke(cli, ["parity", "compare", str(tmp_path / "a.csv"), str(tmp_path / "b.csv")])
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert any("Ascend: mean relative gradient-norm error" in line and line.endswith("not logged") for line in lines)
    assert any("MindSpeed-LLM CI" in line and "5.56%" in line and line.endswith("FAIL") for line in lines)
    assert f"note: compared the numbers only: {tmp_path / 'a.csv'} and {tmp_path / 'b.csv'} record no settings" in result.output


def test_one_run_as_trainer_state_and_as_its_tensorboard_file_compares_equal_rate_and_all():
    """TensorBoard keeps the learning rate as a float32 of trainer_state.json's: rounding, not a parting."""
    run = LOGS / "generated_hf_tiny"
    events = next(run.glob("events.out.tfevents.*"))
    result = CliRunner().invoke(cli, ["parity", "compare", str(run / "trainer_state.json"), str(events)])
    assert result.exit_code == 0, result.output
    assert "learning rate differs" not in result.output
    assert result.output.strip().splitlines()[-1].startswith("parity OK: 30 steps within rtol 1e-05")
