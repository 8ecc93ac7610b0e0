"""`portlayer parity check`: the published experiment trained here and held to the committed baseline of its preset
and precision, in one command. One short training run (2 gloo ranks, 4 steps of the 30-step schedule); the rest
is decided before training."""

import json
import shutil

import pytest
from click.testing import CliRunner

from portlayer.cli import cli
from portlayer.train import parity_check, runfile
from portlayer.train.band import BANDS
from tests.trainer.helpers import BASELINES, RTOL, max_relative_difference


def check(*args):
    return CliRunner().invoke(cli, ["parity", "check", *map(str, args)])


def test_a_two_rank_cpu_run_of_four_steps_passes_against_the_h200s(tmp_path):
    out = tmp_path / "run.json"
    # 2 ranks x 4 samples: the H200's global batch of 16 (1 rank x 8 x 2) is made with 2 micro-batches
    result = check("--preset", "gpt2-tiny", "--nproc", 2, "--steps", 4, "--out", out, "--per-device-batch", 4, "--quiet")
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[:3] == [
        f"baseline: {BASELINES / 'gpt2-tiny.cuda-h200.json'}: cuda, NVIDIA H200, torch 2.11.0+cu130",
        "experiment: 4 of its 30 steps, global batch 16 = 2 rank(s) x 4 x 2 micro-batch(es), seq len 64, lr 0.001, "
        "fp32, parity mode",
        "expect: fp32 rounding, every step within rtol 1e-05 (the H200 against the cpu: 1.0e-7 .. 2.1e-7)",
    ]
    assert f"run file: {out}" in lines
    assert lines[-1].startswith("parity OK: 4 steps within rtol 1e-05;")

    run, h200 = runfile.read_run(out), runfile.read_run(BASELINES / "gpt2-tiny.cuda-h200.json")
    metadata = run["metadata"]
    assert (metadata["world_size"], metadata["per_device_batch"], metadata["grad_accum"]) == (2, 4, 2)
    assert (metadata["steps"], metadata["parity"]) == (4, True)
    for key in ("schedule_steps", "global_batch", "seq_len", "lr", "warmup_steps", "seed", "precision",
                "config_hash", "init_weights_checksum"):  # fmt: skip
        assert metadata[key] == h200["metadata"][key], key
    h200["steps"] = h200["steps"][:4]
    assert max_relative_difference(h200, run) < RTOL


@pytest.mark.parametrize(
    "args, message",
    [
        (["--precision", "fp16"], "no committed baseline of gpt2-tiny in fp16; committed: gpt2-tiny.cuda-h200-bf16.json "
         "(bf16), gpt2-tiny.cuda-h200.json (fp32), gpt2-tiny.cpu-cpu.json (fp32)"),
        (["--nproc", 3], "the baseline's global batch 16 is no multiple of --nproc 3 x per-device batch 8 (24): choose "
         "--nproc and --per-device-batch whose product divides it"),
        (["--nproc", 2, "--per-device-batch", 16], "the baseline's global batch 16 is no multiple of --nproc 2 x "
         "per-device batch 16 (32): choose --nproc and --per-device-batch whose product divides it"),
        (["--lr", "0.002"], "--lr is the baseline's (gpt2-tiny.cuda-h200.json): `parity check` trains its experiment, "
         "`parity run` any other"),
        (["--grad-accum", 2], "--grad-accum is the baseline's (gpt2-tiny.cuda-h200.json): `parity check` trains its "
         "experiment, `parity run` any other"),
        (["--no-parity"], "--parity is the baseline's (gpt2-tiny.cuda-h200.json): `parity check` trains its "
         "experiment, `parity run` any other"),
        (["--steps", 31], "--steps 31: the baseline has 30"),
        (["--baseline", "missing.json"], "--baseline missing.json: no such file"),
        (["--baseline", BASELINES / "gpt2.cuda-h200.json"],
         f"--baseline {BASELINES / 'gpt2.cuda-h200.json'} is a run of gpt2, not of --preset gpt2-tiny"),
        (["--precision", "bf16", "--baseline", BASELINES / "gpt2-tiny.cpu-cpu.json"],
         f"--precision bf16, but --baseline {BASELINES / 'gpt2-tiny.cpu-cpu.json'} trained in fp32"),
    ],
    ids=["no-such-precision", "ranks", "per-device-batch", "lr", "grad-accum", "no-parity", "steps", "missing",
         "other-preset", "other-precision"],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2_before_training(args, message):
    result = check("--preset", "gpt2-tiny", *args)
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [f"Error: {message}"]


def test_a_baseline_not_in_parity_mode_is_refused(tmp_path):
    run = json.loads((BASELINES / "gpt2-tiny.cpu-cpu.json").read_text())
    run["metadata"]["parity"] = False
    (tmp_path / "run.json").write_text(json.dumps(run))
    result = check("--preset", "gpt2-tiny", "--baseline", tmp_path / "run.json")
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"Error: --baseline {tmp_path / 'run.json'} was not trained in parity mode: compare it with "
        "`parity compare`"
    )


@pytest.mark.parametrize("preset", ["gpt2-tiny", "bert-base-uncased-tiny", "mixtral-8x7b-tiny", "gpt2"])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_h200s_run_of_the_preset_and_precision_is_chosen(preset, precision):
    chosen = parity_check.choose_baseline(preset, precision)
    suffix = "" if precision == "fp32" else "-bf16"
    assert chosen.path == BASELINES / f"{preset}.cuda-h200{suffix}.json"
    assert (chosen.note, chosen.metadata["precision"]) == (None, precision)


def test_the_cpus_run_where_no_gpu_run_is_committed_saying_so(tmp_path, monkeypatch):
    for name in ("gpt2-tiny.cpu-cpu.json", "gpt2-tiny.cuda-h200-bf16.json", "gpt2.cuda-h200.json"):
        shutil.copy(BASELINES / name, tmp_path)
    monkeypatch.setattr(parity_check, "BASELINES", tmp_path)
    chosen = parity_check.choose_baseline("gpt2-tiny", "fp32")
    assert chosen.path == tmp_path / "gpt2-tiny.cpu-cpu.json"
    assert chosen.note == "no GPU run of gpt2-tiny in fp32 is committed: the cpu's"
    assert parity_check.choose_baseline("gpt2-tiny", "bf16").path == tmp_path / "gpt2-tiny.cuda-h200-bf16.json"


def test_fp32_is_judged_at_the_rounding_floor():
    band, expectation = parity_check.judgement(parity_check.choose_baseline("mixtral-8x7b-tiny", "fp32"), None)
    assert band is None
    assert expectation == "expect: fp32 rounding, every step within rtol 1e-05 (the H200 against the cpu: 1.0e-7 .. 2.1e-7)"


def test_bf16_is_judged_by_the_committed_band():
    band, expectation = parity_check.judgement(parity_check.choose_baseline("gpt2-tiny", "bf16"), None)
    assert band == BANDS / "gpt2-tiny.bf16.json"
    assert expectation == (
        "expect: bf16 rounding grows over the steps; judged by the committed band gpt2-tiny.bf16.json "
        "(`parity compare --band`)"
    )


def test_without_a_committed_band_it_says_so_and_how_to_measure_one():
    # The full-size mixtral-8x7b has the H200's bf16 run but no band (a band of a full-size preset needs a GPU).
    assert not (BANDS / "mixtral-8x7b.bf16.json").exists()
    _, bf16 = parity_check.judgement(parity_check.choose_baseline("mixtral-8x7b", "bf16"), None)
    assert bf16 == (
        "expect: bf16 rounding grows over the steps, and no band of mixtral-8x7b in bf16 is committed: judged "
        "at rtol 1e-05, which a correct run may exceed; `portlayer parity band --preset mixtral-8x7b "
        "--precision bf16 --out band.json` measures one for --band"
    )


def test_a_spike_in_an_fp32_baseline_points_to_the_band():
    # The H200's gpt2 (124M) at lr 6e-4: 4.66 at step 18, 6.87 at step 19.
    gpt2 = parity_check.choose_baseline("gpt2", "fp32")
    assert parity_check.loss_spike(gpt2.run) == (19, pytest.approx(4.66, abs=5e-3), pytest.approx(6.87, abs=5e-3))
    band, expectation = parity_check.judgement(gpt2, None)
    assert band is None
    assert expectation.startswith(
        "expect: the baseline's loss spikes at step 19 (4.66 to 6.87): rounding grows after it, and no band of gpt2 "
        "in fp32 is committed: judged at rtol 1e-05"
    )
    for preset in ("gpt2-tiny", "bert-base-uncased", "mixtral-8x7b"):
        assert parity_check.loss_spike(parity_check.choose_baseline(preset, "fp32").run) is None, preset


def test_a_band_given_is_the_judge(tmp_path):
    given = tmp_path / "band.json"
    band, expectation = parity_check.judgement(parity_check.choose_baseline("gpt2-tiny", "fp32"), given)
    assert band == given
    assert expectation == f"expect: every step within the band {given} (given with --band)"
