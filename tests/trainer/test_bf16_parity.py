"""bf16 parity runs on the cpu against the H200's (reference_train/baselines/), judged by the committed bands:
as run files, and as trainer_state.json files with no portlayer metadata, the band from its file or from
`parity band --runs` over the perturbed runs it was measured from."""

import json
import math

import pytest
from click.testing import CliRunner

from portlayer.cli import cli
from portlayer.train import runfile
from tests.parity.exporters import export
from tests.parity.logs_data import band_path, band_references, h200_run
from tests.trainer.helpers import CPU_BF16_STEPS, TINY_PRESETS

pytestmark = pytest.mark.xdist_group("cpu-bf16-runs")  # one worker trains the session's runs once

# A bf16 run on the cpu is slow (no bf16 matmul units): the suite trains gpt2-tiny's first CPU_BF16_STEPS steps; the
# 30-step cpu runs of every preset are their bands' references, made by the command in
# tests/parity/data/band-references/README.md.
BF16_PRESETS = ("gpt2-tiny",)


def compare(*args):
    return CliRunner().invoke(cli, ["parity", "compare", *map(str, args)])


def last_line(result) -> str:
    return result.output.strip().splitlines()[-1]


@pytest.mark.parametrize("preset", BF16_PRESETS)
def test_a_cpu_bf16_parity_run_is_within_the_band_of_the_h200s(preset, cpu_bf16_run):
    run = runfile.read_run(cpu_bf16_run(preset))
    metadata = run["metadata"]
    assert (metadata["precision"], metadata["parity"], metadata["tf32"]) == ("bf16", True, False)
    assert metadata["dropout_fields_zeroed"] and metadata["deterministic"]
    assert all(step["grad_norm"] > 0 and math.isfinite(step["grad_norm"]) for step in run["steps"])

    result = compare(h200_run(preset, "bf16"), cpu_bf16_run(preset), "--band", band_path(preset, "bf16"))
    assert result.exit_code == 0, result.output
    assert last_line(result).startswith(f"within the band: {CPU_BF16_STEPS} steps of loss, learning rate;")


@pytest.mark.parametrize("preset", TINY_PRESETS)
def test_the_cpus_30_step_bf16_runs_are_within_the_band_of_the_h200s(preset):
    """Each is a correct port of the H200's run (the cpu's kernels, initial weights one ulp apart). bert's masked-LM
    loss differs from the H200's by up to 2.3e-4 at a step (band.FLOOR): the floor, not the references' spread,
    holds it there."""
    for reference in band_references(preset, "bf16"):
        assert runfile.read_run(reference)["metadata"]["backend"] == "cpu"
        result = compare(h200_run(preset, "bf16"), reference, "--band", band_path(preset, "bf16"))
        assert result.exit_code == 0, result.output
        assert last_line(result).startswith("within the band: 30 steps of loss, learning rate;")


@pytest.mark.parametrize("preset", BF16_PRESETS)
def test_as_trainer_state_files_with_a_band_file_or_a_band_from_runs(preset, cpu_bf16_run, tmp_path):
    h200 = export(runfile.read_run(h200_run(preset, "bf16")), "trainer_state", tmp_path / "h200.trainer_state.json")
    cpu = export(runfile.read_run(cpu_bf16_run(preset)), "trainer_state", tmp_path / "cpu.trainer_state.json")

    from_file = compare(h200, cpu, "--band", band_path(preset, "bf16"))
    assert from_file.exit_code == 0, from_file.output
    assert "note: compared the numbers only" in from_file.output
    assert last_line(from_file).startswith(f"within the band: {CPU_BF16_STEPS} steps of loss, learning rate;")

    references = [
        export(runfile.read_run(path), "trainer_state", tmp_path / f"reference-{index}.trainer_state.json")
        for index, path in enumerate(band_references(preset, "bf16"))
    ]
    made = CliRunner().invoke(cli, ["parity", "band", "--runs", *map(str, references), "--out", str(tmp_path / "band.json")])
    assert made.exit_code == 0, made.output
    # The same numbers make the same band, whichever file they come in (the experiment is unknown in this one).
    committed = json.loads(band_path(preset, "bf16").read_text())
    assert json.loads((tmp_path / "band.json").read_text())["steps"] == committed["steps"]
    from_runs = compare(h200, cpu, "--band", tmp_path / "band.json")
    assert from_runs.exit_code == 0, from_runs.output
    assert last_line(from_runs) == last_line(from_file)
