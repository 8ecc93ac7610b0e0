import json
import math

import pytest

from portlayer.train import runfile
from tests.trainer.helpers import TINY_PRESETS, baseline


def minimal_run(steps=2):
    metadata = {name: "x" for name in runfile.METADATA_FIELDS}
    metadata.update(
        world_size=2,
        per_device_batch=8,
        grad_accum=1,
        global_batch=16,
        seq_len=64,
        steps=steps,
        lr=1e-3,
        warmup_steps=5,
        seed=0,
        tf32=False,
        deterministic=True,
        parity=True,
        vendor={"module": None, "version": None},
        dropout_fields_zeroed=[],
        command=[],
        device_type="cpu",
        backend="cpu",
    )
    return {
        "schema": runfile.SCHEMA,
        "preset": "gpt2-tiny",
        "metadata": metadata,
        "steps": [
            {"step": i, "loss": 7.0 - i, "tokens_per_s": 1.0, "peak_memory_bytes": 0, "lr": 0.0}
            for i in range(1, steps + 1)
        ],
        "summary": {
            "tokens_per_s": 1.0,
            "peak_memory_bytes": 0,
            "eval_loss": 5.0,
            "perplexity": math.exp(5.0),
        },
    }


def test_write_then_read_round_trips(tmp_path):
    run = minimal_run()
    runfile.write_run(tmp_path / "run.json", run)
    assert runfile.read_run(tmp_path / "run.json") == run


def test_the_file_keeps_the_schema_order_one_space_indented(tmp_path):
    # Baselines are committed: a stable, diff-friendly layout (schema first, as written; 1-space indent).
    runfile.write_run(tmp_path / "run.json", minimal_run())
    text = (tmp_path / "run.json").read_text()
    assert text.startswith('{\n "schema": "portlayer.parity.run/1",\n "preset": ')
    assert text.endswith("}\n")


def test_a_long_run_round_trips(tmp_path):
    # 300 steps: step numbers beyond the small integers CPython caches must still check as 1, 2, 3, ...
    run = minimal_run()
    run["steps"] = [{**run["steps"][0], "step": number} for number in range(1, 301)]
    run["metadata"]["steps"] = 300
    runfile.write_run(tmp_path / "run.json", run)
    assert runfile.read_run(tmp_path / "run.json") == run


def test_a_nan_loss_is_written_as_valid_json_and_read_back_as_nan(tmp_path):
    run = minimal_run()
    run["steps"][1]["loss"] = math.nan
    runfile.write_run(tmp_path / "run.json", run)
    json.loads((tmp_path / "run.json").read_text())  # strict JSON: no NaN literal
    assert math.isnan(runfile.read_run(tmp_path / "run.json")["steps"][1]["loss"])


@pytest.mark.parametrize(
    "spoil, reason",
    [
        (lambda r: r.update(schema="other/1"), "schema is 'other/1'"),
        (lambda r: r["metadata"].pop("config_hash"), "metadata lacks config_hash"),
        (lambda r: r["metadata"].update(world_size="2"), "metadata.world_size has the wrong type"),
        (lambda r: r["steps"].pop(0), "steps are not numbered"),
        (lambda r: r["steps"][1].update(step=1), "steps are not numbered 1, 2, 3, …: found 1 at position 2"),
        (lambda r: r["steps"].pop(), "metadata.steps is 2 but the file holds 1 steps"),
        (lambda r: r["metadata"].update(steps=1), "metadata.steps is 1 but the file holds 2 steps"),
        (lambda r: r["metadata"].update(schedule_steps=1), "metadata.schedule_steps is 1: not a whole number"),
        (lambda r: r["metadata"].update(schedule_steps=30.0), "metadata.schedule_steps is 30.0"),
        (lambda r: r["steps"][0].pop("loss"), "step 1 lacks"),
        (lambda r: r["steps"].__setitem__(0, 5), "step 1 lacks one of step, loss"),
        (lambda r: r["metadata"].update(world_size=True), r"metadata.world_size has the wrong type \(True\)"),
        (lambda r: r["metadata"].update(lr=False), r"metadata.lr has the wrong type \(False\)"),
        (lambda r: r["summary"].pop("perplexity"), "summary lacks"),
    ],
)
def test_invalid_runs_are_refused_in_one_line_and_never_written(tmp_path, spoil, reason):
    run = minimal_run()
    spoil(run)
    with pytest.raises(runfile.RunFileError, match=reason) as error:
        runfile.write_run(tmp_path / "run.json", run)
    assert "\n" not in str(error.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "content, reason", [(None, "no such file"), ("{", "not a JSON file"), ("[]", "not a JSON object")]
)
def test_unreadable_files_name_the_file_and_the_reason(tmp_path, content, reason):
    path = tmp_path / "run.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(runfile.RunFileError, match=reason) as error:
        runfile.read_run(path)
    assert str(error.value).startswith(str(path))


@pytest.mark.parametrize(
    "device_type, device_name, slug",
    [
        ("cpu", "AMD EPYC 7B13", "cpu"),
        ("cuda", "NVIDIA H100 80GB HBM3", "h100"),
        ("cuda", "NVIDIA A100-SXM4-80GB", "a100"),
        ("npu", "Ascend910B4", "ascend910b4"),
        ("musa", "MTT S4000", "s4000"),
        ("mps", "Apple GPU", "apple-gpu"),
    ],
)
def test_device_slug(device_type, device_name, slug):
    assert runfile.device_slug(device_type, device_name) == slug


@pytest.mark.parametrize("preset", TINY_PRESETS)
def test_committed_baselines_are_valid_and_named_by_their_content(preset):
    run = baseline(preset)
    assert runfile.baseline_name(run) == f"{preset}.cpu-cpu.json"
    assert (
        run["metadata"]["parity"] and run["metadata"]["deterministic"] and run["metadata"]["world_size"] == 2
    )
    losses = [step["loss"] for step in run["steps"]]
    assert losses[-1] < losses[0] - 0.5, "a parity preset must move the loss"
