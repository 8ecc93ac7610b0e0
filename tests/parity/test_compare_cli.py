"""`portlayer parity compare`: what it prints, the files it writes and its exit codes (0 same, 1 diverged,
2 unusable input), run in-process through the top-level `portlayer` command."""

import json

import pytest
from click.testing import CliRunner

from portlayer.cli import cli


def compare(*args):
    return CliRunner().invoke(cli, ["parity", "compare", *args])


def assert_one_line_refusal(result, *fragments):
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    for fragment in fragments:
        assert fragment in result.output


def test_identical_runs_exit_0_with_the_table(make_run, write_run):
    baseline, run = write_run(make_run(), "base.json"), write_run(make_run(), "run.json")
    result = compare(baseline, run)
    assert result.exit_code == 0, result.output
    assert "| model" in result.output and "| gpt2-tiny" in result.output
    assert "first step beyond tolerance" in result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("parity OK: 6 steps within rtol 1e-05")
    assert "rounding-level" in last


def test_within_rtol_exits_0(make_run, perturbed, write_run):
    run = perturbed(make_run(), {4: 3e-6})
    result = compare(write_run(make_run(), "base.json"), write_run(run, "run.json"))
    assert result.exit_code == 0, result.output
    assert "max rel. loss error 3.0e-06 at step 4" in result.output


def test_divergence_exits_1_naming_the_first_step_beyond(make_run, perturbed, write_run):
    run = perturbed(make_run(), {4: 2e-4, 6: 5e-2})
    result = compare(write_run(make_run(), "base.json"), write_run(run, "run.json"), "--rtol", "1e-4")
    assert result.exit_code == 1, result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("DIVERGED at step 4 of 6 (rel. error 2.0e-04 > rtol 0.0001)")
    assert "real divergence" in last
    table_row = [line for line in result.output.splitlines() if line.startswith("| gpt2-tiny")][-1]
    assert table_row.rstrip(" |").endswith("| 4")
    assert "first beyond rtol" in result.output


def test_all_steps_lists_every_step(make_run, write_run):
    many = make_run(losses=[10.0 - step * 0.01 for step in range(40)])
    paths = write_run(many, "base.json"), write_run(many, "run.json")
    sampled, full = compare(*paths), compare(*paths, "--all-steps")
    assert "(11 of 40 steps shown; --all-steps for every step)" in sampled.output
    step_rows = [line for line in full.output.splitlines() if line[:5].strip().isdigit()]
    assert [int(line.split()[0]) for line in step_rows] == list(range(1, 41))


def test_a_different_world_size_with_the_same_global_batch_is_accepted(make_run, write_run):
    one_rank = make_run(world_size=1, per_device_batch=8)
    result = compare(write_run(make_run(), "base.json"), write_run(one_rank, "run.json"))
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"config_hash": "beef"}, "config_hash"),
        ({"data_checksum": "beef"}, "data_checksum"),
        ({"init_weights_checksum": "beef"}, "init_weights_checksum"),
        ({"per_device_batch": 2}, "global_batch"),
    ],
)
def test_a_mismatched_experiment_exits_2_naming_the_field(make_run, write_run, override, field):
    result = compare(write_run(make_run(), "base.json"), write_run(make_run(**override), "run.json"))
    assert_one_line_refusal(result, f"runs differ in {field}")


def test_a_mismatched_preset_exits_2(make_run, write_run):
    other = make_run()
    other["preset"] = "bert-base-uncased-tiny"
    result = compare(write_run(make_run(), "base.json"), write_run(other, "run.json"))
    assert_one_line_refusal(result, "runs differ in preset", "bert-base-uncased-tiny")


def test_a_shorter_run_is_compared_over_the_common_steps(make_run, write_run):
    short = make_run(losses=[10.8, 10.1], data_checksum="first-2-steps")
    result = compare(write_run(make_run(), "base.json"), write_run(short, "run.json"))
    assert result.exit_code == 0, result.output
    assert "note: compared the first 2 steps: the baseline has 6, the run 2" in result.output
    assert result.output.strip().splitlines()[-1].startswith("parity OK: 2 steps within rtol")


def test_steps_beyond_a_runs_length_exits_2(make_run, write_run):
    short = make_run(losses=[10.8, 10.1])
    result = compare(write_run(make_run(), "base.json"), write_run(short, "run.json"), "--steps", "3")
    assert_one_line_refusal(result, "--steps 3: the run has only 2 steps")


def test_json_output_carries_the_verdict_and_every_step(make_run, perturbed, write_run, tmp_path):
    run = perturbed(make_run(), {3: 2e-5})
    base_path, run_path = write_run(make_run(), "base.json"), write_run(run, "run.json")
    plot = tmp_path / "p.png"
    result = compare(base_path, run_path, "--json", "--steps", "5", "--plot", str(plot))
    assert result.exit_code == 1, result.output
    report = json.loads(result.output)  # nothing but the document on stdout
    assert report["schema"] == "portlayer.parity.compare/1"
    assert (report["baseline"], report["run"], report["plot"]) == (base_path, run_path, str(plot))
    assert plot.exists()
    assert report["within_tolerance"] is False
    assert report["first_step_beyond_rtol"] == 3 and report["worst_step"] == 3
    assert report["max_rel_error"] == pytest.approx(2e-5)
    assert (report["steps_compared"], report["baseline_steps"], report["run_steps"]) == (5, 6, 6)
    assert report["notes"] == ["compared the first 5 of the 6 steps both runs have"]
    assert [entry["step"] for entry in report["steps"]] == [1, 2, 3, 4, 5]
    assert report["steps"][2]["run_loss"] == pytest.approx(9.7 * (1 + 2e-5))


def test_json_writes_a_nan_loss_as_null(make_run, write_run):
    run = make_run()
    run["steps"][1]["loss"] = float("nan")
    result = compare(write_run(make_run(), "base.json"), write_run(run, "run.json"), "--json")
    assert result.exit_code == 1
    report = json.loads(result.output)
    assert report["steps"][1]["run_loss"] is None and report["steps"][1]["rel_error"] is None
    assert report["max_rel_error"] is None


def test_a_missing_file_exits_2(make_run, write_run, tmp_path):
    missing = str(tmp_path / "nowhere.json")
    result = compare(write_run(make_run(), "base.json"), missing)
    assert_one_line_refusal(result, "nowhere.json")


def test_corrupt_json_exits_2(make_run, write_run, tmp_path):
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"schema": "portlayer.parity.run/1", "steps": [')
    result = compare(write_run(make_run(), "base.json"), str(corrupt))
    assert_one_line_refusal(result, "corrupt.json")


def test_a_wrong_schema_exits_2(make_run, write_run, tmp_path):
    foreign = make_run()
    foreign["schema"] = "someone.else/3"
    (tmp_path / "foreign.json").write_text(json.dumps(foreign))
    result = compare(str(tmp_path / "foreign.json"), write_run(make_run(), "run.json"))
    assert_one_line_refusal(result, "foreign.json", "schema")


def test_a_nan_loss_in_the_run_is_a_divergence(make_run, write_run):
    broken = make_run()
    broken["steps"][3]["loss"] = float("nan")  # written as null: JSON has no NaN
    result = compare(write_run(make_run(), "base.json"), write_run(broken, "run.json"))
    assert result.exit_code == 1, result.output
    assert "DIVERGED at step 4 of 6 (rel. error inf" in result.output


def test_plot_writes_a_png(make_run, perturbed, write_run, tmp_path):
    run = perturbed(make_run(), {3: 2e-6})
    out = tmp_path / "plots" / "parity.png"
    result = compare(write_run(make_run(), "base.json"), write_run(run, "run.json"), "--plot", str(out))
    assert result.exit_code == 0, result.output
    assert f"plot: {out}" in result.output
    png = out.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    # IHDR's width and height: the figure is 10 x 7 inches (legends beside the axes) at 110 dpi.
    assert png[12:16] == b"IHDR"
    assert (int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")) == (1100, 770)
    assert [path.name for path in out.parent.iterdir()] == ["parity.png"]  # no temporary left behind


def test_plot_of_a_divergence_is_written_too(make_run, perturbed, write_run, tmp_path):
    run = perturbed(make_run(), {2: 0.1})
    out = tmp_path / "diverged.png"
    result = compare(write_run(make_run(), "base.json"), write_run(run, "run.json"), "--plot", str(out))
    assert result.exit_code == 1
    assert f"plot: {out}" in result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_plot_that_cannot_be_written_exits_2_in_one_line(make_run, write_run, tmp_path):
    (tmp_path / "taken").write_text("a file, not a folder")
    out = tmp_path / "taken" / "parity.png"
    result = compare(write_run(make_run(), "base.json"), write_run(make_run(), "run.json"), "--plot", str(out))
    assert result.exit_code == 2, result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith(f"Error: cannot write the plot {out}: ")
    assert "Traceback" not in result.output


def test_a_different_sequence_length_exits_2_naming_it(make_run, write_run):
    result = compare(write_run(make_run(), "base.json"), write_run(make_run(seq_len=128), "run.json"))
    assert_one_line_refusal(result, "runs differ in seq_len: baseline 64, run 128")


def test_settings_that_differ_are_noted_before_the_verdict(make_run, write_run):
    run = make_run(lr=2e-3, warmup_steps=10)
    result = compare(write_run(make_run(), "base.json"), write_run(run, "run.json"))
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[-3:-1] == [
        "note: runs differ in lr: baseline 0.001, run 0.002",
        "note: runs differ in warmup_steps: baseline 5, run 10",
    ]
    assert lines[-1].startswith("parity OK: 6 steps within rtol 1e-05")


def test_an_error_exactly_at_rtol_passes_the_cli(make_run, write_run):
    # 8 -> 9 is a relative error of exactly 1/8.
    baseline, run = make_run(losses=[8.0, 8.0]), make_run(losses=[8.0, 9.0])
    result = compare(write_run(baseline, "base.json"), write_run(run, "run.json"), "--rtol", "0.125")
    assert result.exit_code == 0, result.output
    assert result.output.strip().splitlines()[-1].startswith("parity OK: 2 steps within rtol 0.125")


def test_the_table_shows_a_cpu_runs_host_memory(make_run, write_run):
    cpu = make_run()
    cpu["summary"].update(peak_memory_bytes=0, host_peak_rss_bytes=512 * 2**20)
    result = compare(write_run(cpu, "base.json"), write_run(make_run(), "run.json"))
    rows = [line for line in result.output.splitlines() if line.startswith("| gpt2-tiny")]
    assert "| 512 MiB host RSS |" in rows[0]
    assert "| 200 MiB " in rows[1]


def test_memory_recorded_nowhere_is_a_dash_not_zero(make_run, write_run):
    cpu = make_run()
    cpu["summary"]["peak_memory_bytes"] = None  # a cpu run: no device allocator, and no host RSS recorded
    result = compare(write_run(cpu, "base.json"), write_run(make_run(), "run.json"))
    row = [line for line in result.output.splitlines() if line.startswith("| gpt2-tiny")][0]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[5] == "—"


def test_a_tf32_sized_error_neither_run_recorded_gets_a_hint(make_run, perturbed, write_run):
    run = perturbed(make_run(), {2: 5e-5})
    result = compare(write_run(make_run(), "base.json"), write_run(run, "run.json"), "--rtol", "1e-4")
    assert result.exit_code == 0, result.output
    assert "consistent with TF32 (neither run records it: check the backend's default matmul precision)" in (
        result.output
    )


def test_a_recorded_tf32_run_gets_no_hint(make_run, perturbed, write_run):
    run = perturbed(make_run(tf32=True), {2: 5e-5})
    result = compare(write_run(make_run(), "base.json"), write_run(run, "run.json"), "--rtol", "1e-4")
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[-2] == "note: runs differ in tf32: baseline False, run True"
    assert lines[-1] == "parity OK: 6 steps within rtol 0.0001; max rel. loss error 5.0e-05 at step 2, consistent with TF32"


def test_a_shorter_schedule_is_noted_and_its_divergence_not_called_real(make_run, perturbed, write_run):
    """The issue's case: a 20-step run (its cosine spanning 20 steps, as run files recorded before the
    schedule was part of the experiment) against the 30-step baseline."""
    baseline = make_run(losses=[10.8 - 0.1 * step for step in range(30)])
    short = perturbed(make_run(losses=[10.8 - 0.1 * step for step in range(20)]), {8: 1e-3, 12: 2e-2})
    for entry in short["steps"][6:]:
        entry["lr"] = 9e-4
    result = compare(write_run(baseline, "base.json"), write_run(short, "run.json"))
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert lines[-2].startswith("note: the learning rate differs from step 7 (baseline 0.001, run 0.0009)")
    assert lines[-2].endswith("the schedules span 30 and 20 steps")
    assert lines[-1].startswith("DIVERGED at step 8 of 20")
    assert lines[-1].endswith(
        "explained by a difference the runs record (the learning rate differs from step 7):"
        " rerun with the baseline's settings to judge the port"
    )
    assert "real divergence" not in result.output
    document = json.loads(compare(*(str(p) for p in (write_run(baseline, "b.json"), write_run(short, "r.json"))), "--json").output)
    assert document["known_difference"] == "the learning rate differs from step 7"
