"""Comparing runs of two strategies (ddp against fsdp2 or zero*): the difference is named, and an error the
size of a sharded reduction's reordering is called that ("rounding: reduction order", docs/parity.md,
"Across strategies"), while the same error between runs of one strategy stays plain rounding."""

from click.testing import CliRunner

from portlayer.cli import cli
from portlayer.train.compare import REDUCTION_ORDER, REDUCTION_ORDER_LIMIT, ROUNDING, compare_runs
from tests.run_files import read_as_older_file


def test_an_error_within_the_reduction_order_band_across_strategies_names_that_cause(make_run, perturbed):
    run = perturbed(make_run(strategy="zero2"), {3: REDUCTION_ORDER_LIMIT / 2})
    comparison = compare_runs(make_run(strategy="ddp"), run)
    assert comparison.within_tolerance
    assert comparison.verdict == REDUCTION_ORDER
    assert ("strategy", "ddp", "zero2") in comparison.setting_differences


def test_the_same_error_under_one_strategy_is_plain_rounding(make_run, perturbed):
    run = perturbed(make_run(strategy="fsdp2"), {3: REDUCTION_ORDER_LIMIT / 2})
    assert compare_runs(make_run(strategy="fsdp2"), run).verdict == ROUNDING


def test_an_error_beyond_the_band_across_strategies_is_not_blamed_on_reduction_order(make_run, perturbed):
    run = perturbed(make_run(strategy="zero3"), {3: REDUCTION_ORDER_LIMIT * 5})
    assert compare_runs(make_run(), run).verdict != REDUCTION_ORDER


def test_a_run_file_without_a_strategy_is_a_ddp_run(make_run, tmp_path):
    """Run files (and the committed baselines) from before --strategy trained with DDP."""
    baseline = read_as_older_file(make_run(strategy="zero1"), tmp_path, "strategy")
    assert compare_runs(baseline, make_run(strategy="ddp")).setting_differences == ()
    assert compare_runs(baseline, make_run(strategy="zero2")).setting_differences == (("strategy", "ddp", "zero2"),)


def test_the_cli_verdict_and_note_name_the_strategies(make_run, perturbed, write_run):
    run = perturbed(make_run(strategy="fsdp2"), {2: REDUCTION_ORDER_LIMIT / 2})
    result = CliRunner().invoke(
        cli, ["parity", "compare", write_run(make_run(), "ddp.json"), write_run(run, "fsdp2.json")]
    )
    assert result.exit_code == 0, result.output
    assert "note: runs differ in strategy: baseline 'ddp', run 'fsdp2'" in result.output
    assert result.output.strip().splitlines()[-1].endswith(REDUCTION_ORDER)
