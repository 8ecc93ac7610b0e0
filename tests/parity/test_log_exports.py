"""A trainer run written out as each tool logs it (tests/parity/exporters.py), read back: the format is detected,
the steps and values are the run's up to the format's own rounding, and a comparison with the run file itself is
within any band (nothing but the writing differs)."""

import math

import pytest
from click.testing import CliRunner

from portlayer.cli import cli
from portlayer.train import runfile
from portlayer.train.compare import compare_logs
from portlayer.train.logs import read_log
from portlayer.train.logs.portlayer_run import series_of_run
from tests.parity.exporters import WRITERS, export
from tests.parity.logs_data import band_path

RUN = runfile.BASELINES / "gpt2-tiny.cpu-cpu.json"  # a real 2-rank trainer run, with gradient norms

LABELS = {
    "trainer_state": "trainer_state.json",
    "ms-swift": "ms-swift logging.jsonl",
    "megatron": "Megatron-LM log",
    "deepspeed": "DeepSpeed log",
    "csv": "CSV file",
    "jsonl": "JSON-lines file",
    "tensorboard": "TensorBoard events",
}
# What each format keeps of a step: DeepSpeed prints no gradient norm; its pipeline engine's loss has 4 decimals.
QUANTITIES = {name: ("loss", "grad_norm", "lr") for name in LABELS} | {"deepspeed": ("loss", "lr")}


@pytest.mark.parametrize("format", sorted(WRITERS))
def test_an_exported_run_reads_back_as_the_run(format, tmp_path):
    run = runfile.read_run(RUN)
    series = read_log(export(run, format, tmp_path / f"run.{format}"))
    assert series.format == LABELS[format]
    assert [point.step for point in series.points][:30] == list(range(1, 31))
    assert series.quantities() == QUANTITIES[format]
    for record, point in zip(run["steps"], series.points):
        for quantity in QUANTITIES[format]:
            expected, actual = record[quantity], point.values[quantity]
            allowed = series.resolution(quantity).of(expected)
            assert abs(actual - expected) <= allowed * (1 + 1e-9) + 1e-15, (format, record["step"], quantity)


@pytest.mark.parametrize("format", ["trainer_state", "megatron", "tensorboard"])
def test_a_log_every_five_steps_is_compared_with_the_runs_means_over_the_same_steps(format, tmp_path):
    run = runfile.read_run(RUN)
    exported = read_log(export(run, format, tmp_path / f"run.{format}", log_every=5))
    comparison = compare_logs(series_of_run(run, str(RUN)), exported)
    assert [delta.step for delta in comparison.steps] == [5, 10, 15, 20, 25, 30]
    assert comparison.max_rel_error < 1e-6  # the writing's rounding only (Megatron's 7 digits)
    assert any("averaged over the other side's logging intervals" in note for note in comparison.alignment_notes)


@pytest.mark.parametrize("format", sorted(WRITERS))
def test_an_exported_run_is_within_a_band_of_its_own_rounding(format, tmp_path):
    """The committed band of gpt2-tiny in fp32, against the run it was exported from."""
    exported = export(runfile.read_run(RUN), format, tmp_path / f"run.{format}")
    band = band_path("gpt2-tiny", "fp32")
    result = CliRunner().invoke(cli, ["parity", "compare", str(RUN), str(exported), "--band", str(band)])
    assert result.exit_code == 0, result.output
    assert result.output.strip().splitlines()[-1].startswith("within the band: 30 steps")
    assert "compared the numbers only" in result.output


def test_an_exported_nan_loss_reads_back_as_nan(tmp_path):
    run = runfile.read_run(RUN)
    run["steps"][2]["loss"] = math.nan
    for format in ("trainer_state", "megatron", "jsonl", "tensorboard"):
        series = read_log(export(run, format, tmp_path / f"nan.{format}"))
        assert math.isnan(series.points[2].values["loss"]), format
