"""The training loop in this process (world size 1): what parity mode holds fixed, and what breaks it.

A 1-rank run over the same global batch as the 2-rank baseline trains on the same samples in the same
order, so it must reproduce the baseline's losses; with dropout on, or the learning rate 10% off, it
must not.
"""

import dataclasses
import math

import pytest
from click.testing import CliRunner

from portlayer.errors import PortlayerError
from portlayer.train import runfile
from portlayer.train import train as train_module
from portlayer.train.cli import parity
from portlayer.train.presets import get_preset
from portlayer.train.train import Options, compile_traces_transformers, train
from tests.trainer.helpers import BASELINES, RTOL, baseline, max_relative_difference, needs_compile

pytestmark = pytest.mark.usefixtures("restore_torch_switches")


def gpt2_tiny_like_baseline(**changes) -> Options:
    """One rank with the 2-rank baseline's global batch (2 x 8) and its hyperparameters."""
    preset = get_preset("gpt2-tiny")
    recorded = baseline("gpt2-tiny")["metadata"]
    options = Options(
        preset=preset,
        steps=recorded["steps"],
        per_device_batch=recorded["global_batch"],
        seq_len=recorded["seq_len"],
        lr=recorded["lr"],
        warmup_steps=recorded["warmup_steps"],
        seed=recorded["seed"],
        parity=True,
        quiet=True,
    )
    return dataclasses.replace(options, **changes)


def test_one_rank_reproduces_the_two_rank_baseline_and_its_checksums():
    expected = baseline("gpt2-tiny")
    run = train(gpt2_tiny_like_baseline())
    runfile.validate(run)  # the record holds the schema's fields, no fewer and no more
    assert max_relative_difference(expected, run) < RTOL
    for key in ("data_checksum", "init_weights_checksum", "dropout_fields_zeroed"):
        assert run["metadata"][key] == expected["metadata"][key]
    assert run["summary"]["perplexity"] == pytest.approx(math.exp(run["summary"]["eval_loss"]))
    assert run["summary"]["eval_loss"] == pytest.approx(expected["summary"]["eval_loss"], rel=RTOL)


def test_a_run_stopped_early_is_a_prefix_of_the_baseline_and_compares(tmp_path):
    """The schedule is the preset's (30 steps) whatever --steps says: 10 steps reproduce the committed
    30-step baseline's first 10, learning rates included, and compare says so without a note."""
    expected = baseline("gpt2-tiny")
    run = train(gpt2_tiny_like_baseline(steps=10))
    assert run["metadata"]["schedule_steps"] == 30
    assert [step["lr"] for step in run["steps"]] == [step["lr"] for step in expected["steps"][:10]]
    runfile.write_run(tmp_path / "run.json", run)
    result = CliRunner().invoke(
        parity, ["compare", str(BASELINES / "gpt2-tiny.cpu-cpu.json"), str(tmp_path / "run.json")]
    )
    assert result.exit_code == 0, result.output
    assert "learning rate" not in result.output
    assert result.output.strip().splitlines()[-1].startswith("parity OK: 10 steps within rtol")


def test_gradient_accumulation_matches_the_whole_batch():
    options = gpt2_tiny_like_baseline(steps=8)
    whole = train(options)
    accumulated = train(
        dataclasses.replace(options, per_device_batch=options.per_device_batch // 2, grad_accum=2)
    )
    assert max_relative_difference(whole, accumulated) < RTOL
    assert accumulated["metadata"]["global_batch"] == whole["metadata"]["global_batch"]


@pytest.mark.parametrize(
    "change", [{"keep_dropout": True}, {"lr": 1.1e-3}], ids=["dropout-left-on", "learning-rate-perturbed"]
)
def test_what_parity_mode_guards_against_is_reported_as_diverged(change, tmp_path):
    # Five steps show both: dropout moves the first loss, the learning rate the second (the first step's is 0).
    run = train(gpt2_tiny_like_baseline(steps=5, **change))
    runfile.write_run(tmp_path / "run.json", run)
    result = CliRunner().invoke(
        parity, ["compare", str(BASELINES / "gpt2-tiny.cpu-cpu.json"), str(tmp_path / "run.json")]
    )
    assert result.exit_code == 1, result.output
    assert "DIVERGED at step" in result.output
    expected = baseline("gpt2-tiny")
    assert max_relative_difference({**expected, "steps": expected["steps"][:5]}, run) > 100 * RTOL


def test_mixed_precision_trains_close_to_fp32_but_not_equal():
    fp32 = train(gpt2_tiny_like_baseline(steps=10, parity=False))
    for precision in ("bf16", "fp16"):
        run = train(gpt2_tiny_like_baseline(steps=10, parity=False, precision=precision))
        losses = [step["loss"] for step in run["steps"]]
        assert losses[-1] < losses[0] - 0.2, precision
        assert 0 < max_relative_difference(fp32, run) < 0.05, precision


class SteppingClock:
    """A perf_counter that advances by `tick` seconds per reading: each step (two readings) takes `tick`."""

    def __init__(self, tick: float):
        self.now, self.tick = 0.0, tick

    def perf_counter(self) -> float:
        self.now += self.tick
        return self.now


def test_tokens_per_second_counts_the_tokens_processed(monkeypatch):
    import types

    from portlayer.train import step_records
    from portlayer.train import train as train_module

    clock = types.SimpleNamespace(perf_counter=SteppingClock(0.5).perf_counter)
    monkeypatch.setattr(train_module, "time", clock)  # when a step begins
    monkeypatch.setattr(step_records, "time", clock)  # when a window of steps is read
    run = train(gpt2_tiny_like_baseline(steps=3))
    # 16 sequences of 64 tokens per step (packed blocks: no padding), each step timed at 0.5 s: step 1 alone, then
    # steps 2 and 3 read together, one second for the two.
    assert [step["tokens_per_s"] for step in run["steps"]] == [2048.0, 2048.0, 2048.0]
    assert run["summary"]["tokens_per_s"] == 2048.0
    assert run["summary"]["host_peak_rss_bytes"] > 50 * 2**20


def test_the_cpu_records_no_device_memory_rather_than_zero():
    run = train(gpt2_tiny_like_baseline(steps=2))
    assert [step["peak_memory_bytes"] for step in run["steps"]] == [None, None]
    assert run["summary"]["peak_memory_bytes"] is None


def test_compile_is_refused_in_one_line_on_a_torch_without_what_transformers_asks(monkeypatch):
    if compile_traces_transformers():  # torch 2.7 on: answer as torch 2.6 does (torch itself calls is_exporting)
        monkeypatch.setattr(train_module, "compile_traces_transformers", lambda: False)
    with pytest.raises(PortlayerError, match=r"^--compile needs torch >= 2\.7: transformers calls torch\.compiler"):
        train(gpt2_tiny_like_baseline(steps=1, compile=True))


@needs_compile
def test_compile_trains_the_baselines_run_to_rounding():
    """`--compile` (torch.compile of the model, in place): the same training as eager, to the rounding of
    kernels that inductor fuses and reorders; recorded in the run file. The first step pays for compilation."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    expected = baseline("gpt2-tiny")
    counters.clear()
    run = train(gpt2_tiny_like_baseline(steps=3, compile=True))
    runfile.validate(run)
    assert run["metadata"]["compile"] is True
    if hasattr(torch._dynamo.config, "ignore_logging_functions"):  # 2.8 lacks it: a graph break at a warning
        assert not counters["graph_break"]  # the forward is one graph (train.compile_in_place)
    assert run["metadata"]["init_weights_checksum"] == expected["metadata"]["init_weights_checksum"]
    for got, want in zip(run["steps"], expected["steps"]):
        assert got["loss"] == pytest.approx(want["loss"], rel=1e-5)
        assert got["grad_norm"] == pytest.approx(want["grad_norm"], rel=1e-4)
