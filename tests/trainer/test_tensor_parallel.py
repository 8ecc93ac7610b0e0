"""`--tp N` (Megatron's tensor parallel, with torch's styles): the plan the trainer derives, the layouts it refuses
before any rank starts, and runs that split the model held to the committed DDP baselines.

Splitting a matmul by rows sums its halves' partial products by an all-reduce: the loss moves by rounding only
(measured up to 1.1e-7 here), and `parity compare` names the cause. The 4-rank run is killed part-way and
resumed from its checkpoint, so one pair of jobs proves the layout's parity and its checkpoint.
"""

import re

import pytest
import torch
from click.testing import CliRunner

from portlayer.cli import cli
from portlayer.errors import PortlayerError
from portlayer.strategies.tensor_parallel import COLWISE, ROWWISE, tensor_plan
from portlayer.train import runfile
from portlayer.train.parity_run import run
from portlayer.train.presets import build_model, get_preset
from tests.parity.logs_data import band_path
from tests.trainer.helpers import BASELINES, KILL_OPTIONS, assert_killed_with_a_checkpoint, baseline
from tests.trainer.test_parity_run_cli import assert_one_line_error, portlayer

pytestmark = pytest.mark.usefixtures("without_accelerators")


def parity_run(*args):
    return CliRunner().invoke(run, [*map(str, args), "--quiet"], catch_exceptions=False)


def model(preset: str, **overrides):
    return build_model(get_preset(preset), config_overrides=overrides)


def transformers_own_plan(core) -> dict[str, str]:
    """The colwise and rowwise Linear layers of the model's own `base_model_tp_plan` (transformers'), by name."""
    prefix = f"{core.base_model_prefix}."
    plan = {}
    for pattern, style in core.config.base_model_tp_plan.items():
        matcher = re.compile(re.escape(prefix + pattern).replace(r"\*", r"\d+") + "$")
        for name, module in core.named_modules():
            if style in (COLWISE, ROWWISE) and matcher.match(name) and isinstance(module, torch.nn.Linear):
                plan[name] = style
    return plan


def test_bert_splits_q_k_v_and_the_mlp_up_by_columns_and_what_reads_them_back_by_rows():
    layers = ("bert.encoder.layer.0", "bert.encoder.layer.1")
    expected = {}
    for layer in layers:
        expected |= {f"{layer}.attention.self.{name}": COLWISE for name in ("query", "key", "value")}
        expected |= {f"{layer}.attention.output.dense": ROWWISE}
        expected |= {f"{layer}.intermediate.dense": COLWISE, f"{layer}.output.dense": ROWWISE}
    assert tensor_plan(model("bert-base-uncased-tiny"), 2) == expected


def test_for_a_model_transformers_plans_the_derived_plan_is_its_own():
    core = model("mixtral-8x7b-tiny")
    own = transformers_own_plan(core)
    assert set(own.values()) == {COLWISE, ROWWISE}  # attention's q, k, v and o; its experts are not Linear layers
    assert tensor_plan(core, 2) == own


def test_deriving_the_plan_draws_nothing_from_the_generator_and_leaves_the_model_training():
    core = model("bert-base-uncased-tiny")
    core.train()
    state = torch.random.get_rng_state()
    tensor_plan(core, 2)
    assert core.training
    assert torch.equal(torch.random.get_rng_state(), state)


@pytest.mark.parametrize(
    ("preset", "overrides", "tensor", "refusal"),
    [
        # GPT-2 projects q, k and v in one Conv1D: no pair of Linear layers to split by heads.
        ("gpt2-tiny", {}, 2, "tensor parallel splits pairs of nn.Linear layers, and GPT2Block runs none"),
        ("mixtral-8x7b-tiny", {}, 4, "the model's 2 key-value heads do not split over --tp 4"),
        ("bert-base-uncased-tiny", {}, 3, "the model's 4 attention heads do not split over --tp 3"),
        (
            "bert-base-uncased-tiny",
            {"intermediate_size": 130},
            4,
            "bert.encoder.layer.0.intermediate.dense is 130 wide, which does not split over --tp 4",
        ),
    ],
)
def test_a_model_that_does_not_split_is_refused_in_one_line(preset, overrides, tensor, refusal):
    with pytest.raises(PortlayerError, match=f"^{re.escape(refusal)}") as refused:
        tensor_plan(model(preset, **overrides), tensor)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("options", "error"),
    [
        (("--preset", "gpt2-tiny", "--nproc", 3, "--tp", 2), "world size 3 is no multiple of --tp 2"),
        (
            ("--preset", "gpt2-tiny", "--nproc", 1, "--nnodes", 3, "--rdzv-endpoint", "h:1", "--tp", 2),
            "world size 3 is no multiple of --tp 2",
        ),
        (("--preset", "mixtral-8x7b-tiny", "--nproc", 4, "--tp", 4), "the model's 2 key-value heads do not split"),
        (
            ("--preset", "mixtral-8x7b-tiny", "--nproc", 4, "--tensor-model-parallel-size", 4),
            "the model's 2 key-value heads do not split",
        ),
        (("--preset", "gpt2-tiny", "--nproc", 2, "--tp", 2, "--strategy", "zero2"), "--tp 2 composes with --strategy ddp, not yet with zero2"),
        (("--preset", "gpt2-tiny", "--nproc", 2, "--tp", 2, "--compile"), "--tp 2 trains eager"),
    ],
)
def test_a_layout_that_does_not_divide_is_one_line_and_exit_2_before_any_rank_starts(options, error, tmp_path):
    result = portlayer("parity", "run", *options, "--out", tmp_path / "run.json")
    assert_one_line_error(result, 2, error)
    assert result.stdout == ""  # no trainer output: no rank started


def compare(preset: str, out, *options):
    return CliRunner().invoke(cli, ["parity", "compare", str(BASELINES / f"{preset}.cpu-cpu.json"), str(out), *options])


def assert_matches_the_ddp_baseline(preset: str, out, tensor: int, world: int) -> None:
    expected, actual = baseline(preset)["metadata"], runfile.read_run(out)["metadata"]
    assert (actual["tensor_parallel"], actual["world_size"]) == (tensor, world)
    assert actual["strategy_engine"] == f"torch tensor parallel over {tensor} ranks, data parallel over {world // tensor}"
    for key in ("config_hash", "data_checksum", "init_weights_checksum", "global_batch"):
        assert actual[key] == expected[key], key
    compared = compare(preset, out)
    assert compared.exit_code == 0, compared.output
    assert f"note: runs differ in tensor_parallel: baseline 1, run {tensor}" in compared.output
    assert compared.output.strip().splitlines()[-1].endswith("rounding: reduction order")
    # The split model's gradient norm (its split layers' squares summed over the ranks) is DDP's too.
    banded = compare(preset, out, "--band", str(band_path(preset, "fp32")))
    assert banded.exit_code == 0, banded.output
    assert banded.output.strip().splitlines()[-1].startswith(
        "within the band: 30 steps of loss, gradient norm, learning rate;"
    )


def test_tp_2_by_dp_2_killed_and_resumed_matches_the_ddp_baseline(tmp_path):
    out, checkpoints = tmp_path / "run.json", tmp_path / "checkpoints"
    common = ("--preset", "mixtral-8x7b-tiny", "--nproc", 4, "--tp", 2, "--strategy", "ddp", "--out", out)
    common += ("--checkpoint-dir", checkpoints)

    killed = parity_run(*common, *KILL_OPTIONS)
    assert_killed_with_a_checkpoint(killed.exit_code, killed.output, checkpoints, "tp")

    resumed = parity_run(*common, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert_matches_the_ddp_baseline("mixtral-8x7b-tiny", out, tensor=2, world=4)


def test_an_encoder_split_over_2_ranks_by_2_copies_matches_the_ddp_baseline(tmp_path):
    out = tmp_path / "run.json"
    result = parity_run("--preset", "bert-base-uncased-tiny", "--nproc", 4, "--tp", 2, "--out", out)
    assert result.exit_code == 0, result.output
    assert_matches_the_ddp_baseline("bert-base-uncased-tiny", out, tensor=2, world=4)
