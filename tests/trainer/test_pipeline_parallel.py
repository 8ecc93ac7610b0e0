"""`--pp N` (Megatron's pipeline parallel, with torch.distributed.pipelining) and `--sp`: the layouts refused before
any rank starts, and runs cut into stages held to the committed DDP baselines (each rank's gradients are the whole
model's: tests/trainer/test_split_gradients.py).

Cutting the model moves no arithmetic: a stage runs the model's own forward over its blocks. What a pipeline
changes is where gradients are summed (the layers every stage holds, across the stages; the micro-batches, by the
schedule), so the loss moves by rounding only (measured up to 1.6e-7 here) and `parity compare` names the cause.
"""

import pytest
from click.testing import CliRunner

from portlayer.cli import cli
from portlayer.train import runfile
from portlayer.train.parity_run import run
from tests.trainer.helpers import BASELINES, KILL_OPTIONS, assert_killed_with_a_checkpoint, baseline
from tests.trainer.test_parity_run_cli import assert_one_line_error, portlayer

pytestmark = pytest.mark.usefixtures("without_accelerators")


def parity_run(*args):
    return CliRunner().invoke(run, [*map(str, args), "--quiet"], catch_exceptions=False)


@pytest.mark.parametrize(
    ("options", "error"),
    [
        (("--preset", "gpt2-tiny", "--nproc", 3, "--pp", 2), "world size 3 is no multiple of --pp 2"),
        (("--preset", "bert-base-uncased-tiny", "--nproc", 6, "--tp", 2, "--pp", 2, "--grad-accum", 2),
         "world size 6 is no multiple of --tp 2 x --pp 2 = 4"),
        (("--preset", "gpt2-tiny", "--nproc", 4, "--pipeline-model-parallel-size", 4, "--grad-accum", 4),
         "the model's 2 layers do not split over --pp 4"),
        (("--preset", "gpt2-tiny", "--nproc", 2, "--pp", 2), "a 1F1B pipeline of 2 stages needs at least 2 micro-batches"),
        (("--preset", "gpt2-tiny", "--nproc", 2, "--pp", 2, "--grad-accum", 2, "--strategy", "zero1"),
         "--pp 2 composes with --strategy ddp, not yet with zero1"),
        (("--preset", "gpt2-tiny", "--nproc", 2, "--sp"), "--sp splits the sequence over the --tp ranks"),
        (("--preset", "bert-base-uncased-tiny", "--nproc", 4, "--tp", 4, "--sp", "--seq-len", 30),
         "--seq-len 30 does not split over --tp 4 (--sp)"),
    ],
)
def test_a_layout_that_does_not_divide_is_one_line_and_exit_2_before_any_rank_starts(options, error, tmp_path):
    result = portlayer("parity", "run", *options, "--out", tmp_path / "run.json")
    assert_one_line_error(result, 2, error)
    assert result.stdout == ""  # no trainer output: no rank started


def assert_matches_the_ddp_baseline(preset: str, out, expected_layout: dict, engine: str) -> None:
    expected, actual = baseline(preset)["metadata"], runfile.read_run(out)["metadata"]
    assert {key: actual[key] for key in expected_layout} == expected_layout
    assert actual["strategy_engine"] == engine
    for key in ("config_hash", "data_checksum", "init_weights_checksum", "global_batch"):
        assert actual[key] == expected[key], key
    compared = CliRunner().invoke(cli, ["parity", "compare", str(BASELINES / f"{preset}.cpu-cpu.json"), str(out)])
    assert compared.exit_code == 0, compared.output
    assert f"note: runs differ in pipeline_parallel: baseline 1, run {expected_layout['pipeline_parallel']}" in (
        compared.output
    )
    assert compared.output.strip().splitlines()[-1].endswith("rounding: reduction order")


def test_pp_2_by_dp_2_killed_and_resumed_matches_the_ddp_baseline(tmp_path):
    # The baseline's 2 ranks x 8 sequences: 2 copies x 2 micro-batches of 4.
    out, checkpoints = tmp_path / "run.json", tmp_path / "checkpoints"
    common = ("--preset", "gpt2-tiny", "--nproc", 4, "--pp", 2, "--grad-accum", 2, "--per-device-batch", 4)
    common += ("--out", out, "--checkpoint-dir", checkpoints)

    killed = parity_run(*common, *KILL_OPTIONS)
    assert_killed_with_a_checkpoint(killed.exit_code, killed.output, checkpoints, "pp")
    (saved,) = checkpoints.iterdir()
    assert sorted(path.name for path in saved.glob("model-optimizer*")) == [
        "model-optimizer.stage-0-of-2.pt", "model-optimizer.stage-1-of-2.pt"
    ]

    resumed = parity_run(*common, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert_matches_the_ddp_baseline(
        "gpt2-tiny", out, {"pipeline_parallel": 2, "pipeline_schedule": "1f1b", "world_size": 4},
        "torch pipeline parallel over 2 stages (1f1b), data parallel over 2",
    )  # fmt: skip

    # A stage's file holds a stage: the checkpoint resumes under its own layout only.
    elsewhere = parity_run("--preset", "gpt2-tiny", "--nproc", 4, "--per-device-batch", 4, "--out", out,
                           "--checkpoint-dir", checkpoints, "--resume")  # fmt: skip
    assert elsewhere.exit_code == 1
    assert "saved by a different experiment, world size or layout; not resuming" in elsewhere.output


def test_tp_2_with_sp_by_pp_2_under_gpipe_matches_the_ddp_baseline(tmp_path):
    # One copy: 2 stages, each split over 2 ranks (the sequence too); its 2 micro-batches of 8 are the baseline's
    # 2 ranks x 8.
    out = tmp_path / "run.json"
    result = parity_run("--preset", "bert-base-uncased-tiny", "--nproc", 4, "--tp", 2, "--sp", "--pp", 2,
                        "--grad-accum", 2, "--pp-schedule", "gpipe", "--out", out)  # fmt: skip
    assert result.exit_code == 0, result.output
    layout = {"tensor_parallel": 2, "sequence_parallel": True, "pipeline_parallel": 2, "pipeline_schedule": "gpipe"}
    assert_matches_the_ddp_baseline(
        "bert-base-uncased-tiny", out, layout,
        "torch pipeline parallel over 2 stages (gpipe), tensor parallel over 2 ranks, data parallel over 1",
    )  # fmt: skip
