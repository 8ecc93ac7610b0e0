"""`portlayer preflight`: exit 0 all native and fits, 1 something would fall back, fail or not fit, 2 unusable
input."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from portlayer.cli import cli
from portlayer.preflight.devices import DEVICES, GiB, parse_size

REPO = Path(__file__).resolve().parents[2]


def run(*args):
    return CliRunner().invoke(cli, ["preflight", *args])


def test_tiny_preset_against_the_committed_npu_list(tmp_path):
    report_path = tmp_path / "preflight.json"
    result = run("--preset", "gpt2-tiny", "--target", "npu", "--report", str(report_path))

    report = json.loads(report_path.read_text())
    # Every op gpt2 trains with is in torch_npu's op list, in the dtypes it trains with: all native.
    assert result.exit_code == report["exit_code"] == 0
    assert (report["missing"], report["dtype_risks"]) == ([], [])
    assert report["verdict"].startswith("preflight npu: all ")
    assert " ops native (" in report["verdict"] and "composite), no dtype risks (source: wheel yaml" in report["verdict"]
    assert report["source"]["kind"] == "wheel yaml"
    assert "caveat: the wheel's yaml omits" in result.output
    assert report["verdict"] in result.output.splitlines()
    phases = {phase for op in report["ops"] for phase in op["phases"]}
    assert phases == {"forward", "backward", "optimizer"}
    # The preset's published per-device batch and sequence, per rank of a DDP job.
    assert report["shape"] == {"model": "gpt2-tiny", "batch_size": 8, "seq_len": 64, "overrides": {},
                               "layers": 2, "precision": "fp32", "strategy": "ddp", "nproc": 1, "lora_r": None,
                               "gradient_checkpointing": False, "weights": "fp32", "parity": False,
                               "grad_accum": 1,
                               "layout": {"tensor": 1, "pipeline": 1, "sequence": False, "schedule": "1f1b"}}
    memory = report["memory"]
    assert memory["parameters"] == memory["communication"] > 0  # fp32 parameters; one DDP bucket copy of them
    assert memory["total"] == sum(memory[part] for part in ("parameters", "gradients", "optimizer_state",
                                                            "activations", "communication", "buffers",
                                                            "workspaces"))
    # --target npu: npu's kernels and allocator, no BLAS workspace counted (none published)
    device = report["device_memory"]
    assert (device["target"], device["tool"], memory["workspaces"]) == ("npu", "npu-smi", 0)
    assert memory["total"] <= device["allocated"] <= device["reserved"] == device["shown"]


def test_ops_missing_from_a_kernel_list_fail_with_their_origin(tmp_path):
    kernels = tmp_path / "kernels.txt"
    kernels.write_text("aten::mm\naten::addmm\n")
    report_path = tmp_path / "preflight.json"
    result = run("--preset", "gpt2-tiny", "--target", "musa", "--kernels", str(kernels), "--report", str(report_path))

    assert result.exit_code == 1, result.output
    report = json.loads(report_path.read_text())
    missing = {op["op"]: op for op in report["missing"]}
    assert "aten::mm" not in missing and "aten::addmm" not in missing
    assert "aten::expand" not in missing  # composite: runs on any backend
    assert missing["aten::tanh"]["first"]["module"] == "transformer.h.0.mlp.act"  # gpt2's gelu_new
    assert missing["aten::tanh_backward"]["phases"] == ["backward"]
    # The optimizer phase too: clipping's norm (AdamW's foreach ops are composite: they run anywhere).
    assert missing["aten::linalg_vector_norm"]["first"]["module"] == "clip_grad_norm_"
    assert missing["aten::linalg_vector_norm"]["phases"] == ["optimizer"]
    assert report["source"]["label"] == f"list {kernels}"
    assert f"{len(missing)} of {len(report['ops'])} ops would fall back" in result.output


def test_a_step_that_does_not_fit_says_by_how_much_and_what_would_fit(tmp_path):
    report_path = tmp_path / "preflight.json"
    result = run("--preset", "gpt2-tiny", "--target", "musa", "--memory", "20MiB", "--report", str(report_path))

    assert result.exit_code == 1, result.output
    report = json.loads(report_path.read_text())
    # What musa's tool would show is held against the capacity: the allocator's segments and what can be cited
    # outside them.
    shown, capacity = report["device_memory"]["shown"], 20 * 2**20
    assert report["device"]["memory"] == capacity and report["device"]["fits"] is False
    assert f"does not fit, {(shown - capacity) / 2**20:.1f} MiB over" in result.output
    # No musa list here: the ops are recorded, not checked, and the memory answer still comes.
    assert "not checked: no kernel list for musa" in result.output
    options = {s["option"].split("=")[0].split(" ")[0]: s for s in report["device"]["suggestions"]}
    assert set(options) == {"--override", "--batch-size", "--gradient-checkpointing", "--precision", "--weights"}
    fitting = [s for s in report["device"]["suggestions"] if s["fits"]]
    assert fitting and all(s["memory"] <= capacity for s in fitting)
    assert "to fit:" in result.output


def test_sarif_names_the_memory_verdict():
    sarif = run("--preset", "gpt2-tiny", "--target", "musa", "--device", "s4000", "--output-format", "sarif")
    results = json.loads(sarif.stdout)["runs"][0]["results"]  # stdout: transformers logs to stderr
    # ops not checked (no list); the memory per rank; it fits
    assert [r["ruleId"] for r in results] == ["PF103", "PF203", "PF202"]
    assert "fits s4000 (Moore Threads MTT S4000, 48.0 GiB)" in results[2]["message"]["text"]
    assert sarif.exit_code == 0


def test_named_devices_carry_their_published_memory():
    assert DEVICES["s4000"].memory == 48 * GiB
    assert DEVICES["a100-40gb"].memory == 40 * GiB and DEVICES["a100-80gb"].memory == 80 * GiB
    assert DEVICES["910b"].memory == 64 * GiB
    assert DEVICES["h200"].memory == 143771 * 2**20 and DEVICES["h200"].capability == (9, 0)
    assert parse_size("48GiB") == 48 * 2**30
    assert parse_size("40 GB") == 40 * 10**9
    assert parse_size("81920MiB") == 80 * 2**30


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--preset", "gpt2-tiny", "--target", "npu", "--kernels", "absent.txt"], "cannot read kernel list"),
        (["--preset", "no-such-model", "--target", "npu"], "unknown preset"),
        (["--target", "npu"], "pass --preset"),
        (["--preset", "gpt2-tiny", "--config", "bad.json"], "pass --preset NAME or --config PATH"),
        (["--config", "absent/config.json"], "does not exist"),
        (["--config", "bad.json"], "not a HuggingFace config.json"),
        (["--preset", "gpt2-tiny", "--strategy", "zero4"], "Invalid value for '--strategy'"),
        (["--preset", "gpt2-tiny", "--nproc", "0"], "Invalid value for '--nproc'"),
        (["--preset", "bert-base-uncased-tiny", "--lora-r", "0"], "Invalid value for '--lora-r'"),
        (["--target", "npu", "--export-kernels", "out.txt"], "needs torch_npu installed"),
        (["--preset", "gpt2-tiny", "--target", "cuda"], "Invalid value for '--target'"),
        (["--preset", "gpt2-tiny", "--target", "npu", "--device", "v100"], "unknown device 'v100'"),
        (["--preset", "gpt2-tiny", "--target", "npu", "--device", "h200"], "--device h200 runs cuda, not --target npu"),
        (["--preset", "gpt2-tiny", "--target", "npu", "--memory", "48XB"], "expected a size such as 48GiB"),
        (["--preset", "gpt2-tiny", "--target", "npu", "--memory", "1GiB", "--device", "s4000"], "not both"),
        (["--preset", "gpt2-tiny", "--target", "npu", "--override", "layers"], "expected FIELD=VALUE"),
        (["--preset", "gpt2-tiny", "--target", "npu", "--override", "no_such=1"], "has no field 'no_such'"),
        (["--preset", "gpt2-tiny", "--target", "npu", "--output-format", "xml"], "Invalid value for '--output-format'"),
        (["--preset", "gpt2-published"], "unknown preset 'gpt2-published'"),  # the trainer's gpt2 is published
        (["--preset", "gpt2-tiny", "--weights", "fp16", "--precision", "bf16"], "computes in one 16-bit type"),
        (["--preset", "gpt2-tiny", "--grad-accum", "2", "--strategy", "zero2"], "--grad-accum is predicted under"),
        (["--preset", "gpt2-tiny", "--grad-accum", "0"], "Invalid value for '--grad-accum'"),
    ],
)
def test_unusable_input_is_one_line_and_exit_2(args, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.json").write_text("{not json")
    result = run(*args)
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out.txt").exists()


def test_progress_names_the_stage_on_a_terminal_only(monkeypatch):
    import io

    from portlayer.preflight.cli import StageLine

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    for stream, shown in ((Terminal(), True), (io.StringIO(), False)):
        monkeypatch.setattr("sys.stderr", stream)
        progress = StageLine()
        progress("backward")
        progress.close()
        assert ("preflight: backward" in stream.getvalue()) is shown


QWEN = REPO / "examples" / "configs" / "qwen1.5-7b" / "config.json"


def test_the_qwen_config_has_qwen15_7bs_published_parameter_count():
    from portlayer.preflight import per_rank
    from portlayer.preflight.model_source import Training, from_config_file

    source = from_config_file(QWEN, batch_size=1, seq_len=8, overrides={})
    # Qwen1.5-7B's model card: 7.72B parameters. By hand: untied embedding and head, 32 layers of
    # q/k/v/o (q, k, v with bias), a SwiGLU MLP and two RMSNorms, and the final norm.
    vocab, hidden, inner = 151936, 4096, 11008
    layer = 4 * hidden * hidden + 3 * hidden + 3 * hidden * inner + 2 * hidden
    assert per_rank.count_parameters(source, Training()).total == 2 * vocab * hidden + 32 * layer + hidden
    lora = per_rank.count_parameters(source, Training(lora_r=8))
    assert lora.trainable == 32 * 4 * 8 * (hidden + hidden)  # r x (in + out) beside each of q, k, v, o


TINY_QWEN = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 64,
             "intermediate_size": 160, "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 3,
             "vocab_size": 512, "max_position_embeddings": 256, "tie_word_embeddings": False}


def test_a_config_file_under_zero3_with_lora_in_text_and_json(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY_QWEN))
    common = ["--config", str(config), "--strategy", "zero3", "--nproc", "4", "--lora-r", "8", "--weights",
              "bf16", "--seq-len", "64", "--memory", "1GiB"]
    report_path = tmp_path / "report.json"
    text = run(*common, "--report", str(report_path))
    assert text.exit_code == 0, text.output
    assert "bf16 weights, zero3 on 4 ranks, LoRA r=8), peak in the" in text.output
    assert "not checked: no --target" in text.output
    # ZeRO's gathers and reduce-scatters are played by size and moment on the fake step, not listed as collectives.
    assert "communication per rank and step: not itemised under --strategy zero3" in text.output
    report = json.loads(report_path.read_text())
    count, memory = report["parameters"], report["memory"]
    assert report["shape"]["strategy"] == "zero3" and report["shape"]["batch_size"] == 1
    assert memory["parameters"] == -(-count["total"] * 2 // 4)  # bf16 weights, a quarter each
    assert memory["optimizer_state"] == -(-count["trainable"] * 12 // 4)
    found = json.loads(run(*common, "--output-format", "json").stdout)
    assert [f["code"] for f in found] == ["PF103", "PF203", "PF202"]
    assert f"peak {memory['total'] / 2**20:.1f} MiB per rank" in found[1]["message"]


def test_a_device_names_the_target_it_runs():
    result = run("--preset", "gpt2-tiny", "--device", "910b")
    assert "preflight npu: all " in result.output and result.exit_code == 0


def test_codes_doc_is_generated_from_the_table():
    from portlayer.preflight.codes import CODES, markdown

    assert (REPO / "docs" / "preflight-codes.md").read_text() == markdown()
    assert all(code.startswith(("PF1", "PF2", "PF3")) for code in CODES)


# What a new interpreter has imported: the warm one has torch already.
@pytest.mark.real_interpreter
def test_the_commands_help_reads_without_torch():
    # `portlayer --help` lists preflight: its command and option tables load no torch (the step's modules do).
    from tests.processes import run_python

    result = run_python(
        "import sys\nfrom portlayer.cli import main\nimport portlayer.preflight.cli\nprint('torch' in sys.modules)",
        fake_plugins=False,
    )
    assert result.stdout.split() == ["False"], result.stderr


def test_the_trainers_parity_run_and_preflight_describe_the_same_step(tmp_path):
    from portlayer.train.__main__ import main as trainer
    from portlayer.train.parity_run import trainer_arguments
    from portlayer.train.presets import get_preset

    # What `portlayer parity run --preset gpt2-tiny --grad-accum 2` has the trainer run, as its ranks parse it.
    options = trainer.make_context("trainer", trainer_arguments("gpt2-tiny", None, tmp_path / "run.json",
                                                                ("--grad-accum", "2"))).params
    preset = get_preset(options["preset"])
    report_path = tmp_path / "report.json"
    result = run("--preset", "gpt2-tiny", "--parity", "--grad-accum", "2", "--report", str(report_path))

    assert result.exit_code == 0, result.output
    shape = json.loads(report_path.read_text())["shape"]
    assert (shape["model"], shape["batch_size"], shape["seq_len"]) == (
        options["preset"], options["per_device_batch"] or preset.per_device_batch, options["seq_len"] or preset.seq_len)
    for option in ("parity", "grad_accum", "precision", "strategy"):
        assert shape[option] == options[option], option
    # No --device: cuda's kernels and allocator, and what nvidia-smi would show, less what cannot be cited.
    assert "2 micro-batches, parity (eager attention, no dropout)" in result.output
    assert "on cuda (its kernels and caching allocator):" in result.output
    assert "    not counted: context: CUDA's context has no published size" in result.output


def test_the_device_tools_figure_adds_only_what_has_a_size_and_names_the_rest():
    # Two ranks on cuda: NCCL's buffers depend on the topology (no figure), CUDA's context has none published.
    result = run("--preset", "gpt2-tiny", "--nproc", "2")
    assert result.exit_code == 0, result.output
    shown = next(line for line in result.output.splitlines() if line.lstrip().startswith("nvidia-smi"))
    assert shown.endswith(" reserved"), shown
    assert "    not counted: collective buffers: NCCL's buffers" in result.output
    assert "    not counted: context: CUDA's context" in result.output


def test_the_targets_attention_kernel_is_checked_as_the_sdpa_the_model_called(tmp_path):
    # On a 910b in bf16 the step runs flash attention, standing for torch_npu's fused kernel: npu is asked
    # for scaled_dot_product_attention, which it answers itself, not for CUDA's flash kernel.
    report_path = tmp_path / "report.json"
    result = run("--preset", "gpt2-tiny", "--device", "910b", "--precision", "bf16", "--report", str(report_path))
    assert result.exit_code == 0, result.output
    ops = {op["op"]: op for op in json.loads(report_path.read_text())["ops"]}
    assert not [name for name in ops if "flash_attention" in name]
    assert "aten::_scaled_dot_product_flash_attention" in ops["aten::scaled_dot_product_attention"]["recorded_as"]
