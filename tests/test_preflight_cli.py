"""`portlayer preflight`: exit 0 all native and fits, 1 something would fall back, fail or not fit, 2 unusable
input."""

import json

import pytest
from click.testing import CliRunner

from portlayer.cli import cli
from portlayer.preflight.devices import DEVICES, GiB, parse_size


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
    assert report["shape"] == {"preset": "gpt2-tiny", "batch_size": 8, "seq_len": 64, "overrides": {},
                               "precision": "fp32", "ddp": True}
    memory = report["memory"]
    assert memory["parameters"] == memory["ddp_buckets"] > 0  # fp32 parameters; one bucket copy of them
    assert memory["total"] == sum(memory[part] for part in ("parameters", "gradients", "optimizer_state",
                                                            "activations", "ddp_buckets", "buffers"))


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
    total, capacity = report["memory"]["total"], 20 * 2**20
    assert report["device"]["memory"] == capacity and report["device"]["fits"] is False
    assert f"does not fit, {(total - capacity) / 2**20:.1f} MiB over" in result.output
    # No musa list here: the ops are recorded, not checked, and the memory answer still comes.
    assert "not checked: no kernel list for musa" in result.output
    options = {s["option"].split("=")[0].split(" ")[0]: s for s in report["device"]["suggestions"]}
    assert set(options) == {"--override", "--batch-size", "--precision"}
    fitting = [s for s in report["device"]["suggestions"] if s["fits"]]
    assert fitting and all(s["memory"] <= capacity for s in fitting)
    assert "to fit:" in result.output


def test_sarif_names_the_memory_verdict():
    sarif = run("--preset", "gpt2-tiny", "--target", "musa", "--device", "s4000", "--output-format", "sarif")
    results = json.loads(sarif.output)["runs"][0]["results"]
    assert [r["ruleId"] for r in results] == ["PF103", "PF202"]  # ops not checked (no list); memory fits
    assert "fits s4000 (Moore Threads MTT S4000, 48.0 GiB)" in results[1]["message"]["text"]
    assert sarif.exit_code == 0


def test_named_devices_carry_their_published_memory():
    assert DEVICES["s4000"].memory == 48 * GiB
    assert DEVICES["a100-40gb"].memory == 40 * GiB and DEVICES["a100-80gb"].memory == 80 * GiB
    assert DEVICES["910b"].memory == 64 * GiB
    assert parse_size("48GiB") == 48 * 2**30
    assert parse_size("40 GB") == 40 * 10**9
    assert parse_size("81920MiB") == 80 * 2**30


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--preset", "gpt2-tiny", "--target", "npu", "--kernels", "absent.txt"], "cannot read kernel list"),
        (["--preset", "no-such-model", "--target", "npu"], "unknown preset"),
        (["--target", "npu"], "pass --preset"),
        (["--target", "npu", "--export-kernels", "out.txt"], "needs torch_npu installed"),
        (["--preset", "gpt2-tiny", "--target", "cuda"], "Invalid value for '--target'"),
        (["--preset", "gpt2-tiny", "--target", "npu", "--device", "v100"], "unknown device 'v100'"),
        (["--preset", "gpt2-tiny", "--target", "npu", "--memory", "48XB"], "expected a size such as 48GiB"),
        (["--preset", "gpt2-tiny", "--target", "npu", "--memory", "1GiB", "--device", "s4000"], "not both"),
        (["--preset", "gpt2-tiny", "--target", "npu", "--override", "layers"], "expected FIELD=VALUE"),
        (["--preset", "gpt2-tiny", "--target", "npu", "--override", "no_such=1"], "has no field 'no_such'"),
        (["--preset", "gpt2-tiny", "--target", "npu", "--output-format", "xml"], "Invalid value for '--output-format'"),
    ],
)
def test_unusable_input_is_one_line_and_exit_2(args, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run(*args)
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out.txt").exists()


def test_progress_names_the_stage_on_a_terminal_only(monkeypatch):
    import io

    from portlayer.preflight.cli import Progress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    for stream, shown in ((Terminal(), True), (io.StringIO(), False)):
        monkeypatch.setattr("sys.stderr", stream)
        progress = Progress()
        progress("backward")
        progress.close()
        assert ("preflight: backward" in stream.getvalue()) is shown
