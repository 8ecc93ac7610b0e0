import json
import math

import pytest

from portlayer.train import runfile
from portlayer.train.presets import PRESETS, get_preset
from tests.run_files import read_as_older_file, synthetic_run
from tests.trainer.helpers import BASELINES, TINY_PRESETS, baseline


def minimal_run(steps=2):
    return synthetic_run(losses=[7.0 - step for step in range(1, steps + 1)])


def test_write_then_read_round_trips(tmp_path):
    run = minimal_run()
    runfile.write_run(tmp_path / "run.json", run)
    assert runfile.read_run(tmp_path / "run.json") == run


def test_the_file_keeps_the_schema_order_one_space_indented(tmp_path):
    # Baselines are committed: a stable, diff-friendly layout (schema first, each section's fields in the
    # schema's order whatever order the run listed them in; 1-space indent).
    run = minimal_run()
    run["metadata"] = dict(reversed(run["metadata"].items()))
    runfile.write_run(tmp_path / "run.json", run)
    text = (tmp_path / "run.json").read_text()
    assert text.startswith('{\n "schema": "portlayer.parity.run/1",\n "preset": ')
    assert text.endswith("}\n")
    written = json.loads(text)
    assert list(written) == ["schema", "preset", "metadata", "steps", "summary"]
    assert list(written["metadata"]) == [field.name for field in runfile.METADATA]
    assert list(written["steps"][0]) == [field.name for field in runfile.STEP]


def test_a_long_run_round_trips(tmp_path):
    # 300 steps: step numbers beyond the small integers CPython caches must still check as 1, 2, 3, ...
    run = minimal_run()
    run["steps"] = [{**run["steps"][0], "step": number} for number in range(1, 301)]
    run["metadata"].update(steps=300, schedule_steps=300)
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
        (lambda r: r["metadata"].update(schedule_steps=1), "metadata.schedule_steps is 1: fewer than metadata.steps"),
        (lambda r: r["metadata"].update(schedule_steps=30.0), r"metadata.schedule_steps has the wrong type \(30.0\)"),
        (lambda r: r["metadata"].update(global_batch=16), "metadata.global_batch is 16, not world_size x per_device_batch x grad_accum = 8"),
        # Ranks that split one copy of the model (--tp) read the same data: the copies make the global batch.
        (lambda r: r["metadata"].update(tensor_parallel=2), "metadata.global_batch is 8, not world_size / tensor_parallel x per_device_batch x grad_accum = 4"),
        (lambda r: r["metadata"].update(tensor_parallel=3), "metadata.world_size 2 is no multiple of metadata.tensor_parallel 3"),
        (lambda r: r["metadata"].update(tensor_parallel=0), "metadata.world_size 2 is no multiple of metadata.tensor_parallel 0"),
        # So do the stages of one copy (--pp).
        (lambda r: r["metadata"].update(pipeline_parallel=2), "metadata.global_batch is 8, not world_size / pipeline_parallel x per_device_batch x grad_accum = 4"),
        (lambda r: r["metadata"].update(world_size=4, tensor_parallel=2, pipeline_parallel=2), "metadata.global_batch is 8, not world_size / tensor_parallel / pipeline_parallel x per_device_batch x grad_accum = 4"),
        (lambda r: r["metadata"].update(world_size=6, tensor_parallel=2, pipeline_parallel=2), "metadata.world_size 6 is no multiple of metadata.tensor_parallel x pipeline_parallel 4"),
        (lambda r: r["metadata"].update(pipeline_parallel=0), "metadata.world_size 2 is no multiple of metadata.pipeline_parallel 0"),
        (lambda r: r["metadata"].update(strategy=None), r"metadata.strategy has the wrong type \(None\)"),
        (lambda r: r["metadata"].update(comment="mine"), "metadata has comment, which the schema lacks"),
        (lambda r: r["steps"][0].pop("loss"), "step 1 lacks loss"),
        (lambda r: r["steps"][1].update(mfu=0.3), "step 2 has mfu, which the schema lacks"),
        (lambda r: r["steps"].__setitem__(0, 5), "step 1 is not an object"),
        (lambda r: r["steps"][0].update(loss="7.0"), "step 1.loss has the wrong type"),
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
    ("field", "meant"),
    [
        ("schedule_steps", 2),  # the schedule spanned the run
        ("strategy", "ddp"),  # every run trained with DDP before --strategy
        ("tensor_parallel", 1),  # no run split the model before --tp
        ("sequence_parallel", False),
        ("pipeline_parallel", 1),  # nor into stages before --pp
        ("pipeline_schedule", None),
        ("strategy_engine", None),
        ("model_name_or_path", None),
        ("data", None),
        ("compile", False),  # every run was eager before --compile
        ("optimizer", "AdamW"),  # torch's default implementation, before the trainer chose one
    ],
)
def test_a_file_written_before_a_field_existed_reads_as_what_it_meant(tmp_path, field, meant):
    assert read_as_older_file(minimal_run(), tmp_path, field)["metadata"][field] == meant


def test_every_field_a_file_may_lack_says_what_its_absence_meant():
    may_lack = {field.name for section in (runfile.METADATA, runfile.STEP, runfile.SUMMARY) for field in section
                if field.older is not None}
    assert may_lack == {"schedule_steps", "strategy", "strategy_engine", "model_name_or_path", "data",
                        "host_peak_rss_bytes", "grad_norm", "perturb_init", "compile", "optimizer", "tensor_parallel",
                        "sequence_parallel", "pipeline_parallel", "pipeline_schedule"}


def test_a_field_every_file_has_is_still_required_when_reading(tmp_path):
    with pytest.raises(runfile.RunFileError, match="metadata lacks config_hash$"):
        read_as_older_file(minimal_run(), tmp_path, "config_hash")


def test_a_reader_keeps_a_field_a_later_version_added(tmp_path):
    path = tmp_path / "run.json"
    run = minimal_run()
    run["steps"][0]["mfu"] = 0.3
    path.write_text(json.dumps(run))
    assert runfile.read_run(path)["steps"][0]["mfu"] == 0.3


@pytest.mark.parametrize("preset", TINY_PRESETS)
def test_committed_baselines_are_valid_and_named_by_their_content(preset):
    run = baseline(preset)
    metadata = run["metadata"]
    # <preset>.<backend>-<device>.json, the device "cpu" for any host cpu (docs/reference-train.md)
    assert (run["preset"], metadata["backend"], metadata["device_type"]) == (preset, "cpu", "cpu")
    assert metadata["parity"] and metadata["deterministic"] and metadata["world_size"] == 2
    # recorded before --strategy and --schedule-steps: read as what they meant
    assert (metadata["strategy"], metadata["schedule_steps"]) == ("ddp", metadata["steps"])
    losses = [step["loss"] for step in run["steps"]]
    assert losses[-1] < losses[0] - 0.5, "a parity preset must move the loss"


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("preset", list(PRESETS))
def test_the_h200_files_are_valid_parity_runs_at_the_global_batch_of_two_gpus(preset, precision):
    """Every preset has its H200 run in fp32 and bf16, named by its content (`-bf16` for bf16), recorded as their
    README says: 1 rank x 2 micro-batches of the preset's batch, in parity mode, 30 steps tiny and 50 full-size."""
    run = runfile.read_run(BASELINES / f"{preset}.cuda-h200{'' if precision == 'fp32' else '-bf16'}.json")
    metadata = run["metadata"]
    assert (run["preset"], metadata["backend"], metadata["device_name"]) == (preset, "cuda", "NVIDIA H200")
    assert (metadata["precision"], metadata["parity"], metadata["tf32"]) == (precision, True, False)
    assert (metadata["world_size"], metadata["grad_accum"]) == (1, 2)
    assert metadata["global_batch"] == 2 * get_preset(preset).per_device_batch
    assert len(run["steps"]) == metadata["steps"] == (30 if preset.endswith("-tiny") else 50)
