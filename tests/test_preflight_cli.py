"""`portlayer preflight`: exit 0 all native, 1 something would fall back or fail, 2 unusable input."""

import json

import pytest
from click.testing import CliRunner

from portlayer.cli import cli


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
    assert result.output.splitlines()[-1] == report["verdict"]
    phases = {phase for op in report["ops"] for phase in op["phases"]}
    assert phases == {"forward", "backward", "optimizer"}


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
    assert missing["aten::addcdiv_"]["first"]["module"] == "AdamW.step"
    assert report["source"]["label"] == f"list {kernels}"
    assert f"{len(missing)} of {len(report['ops'])} ops would fall back" in result.output.splitlines()[-1]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--preset", "gpt2-tiny", "--target", "npu", "--kernels", "absent.txt"], "cannot read kernel list"),
        (["--preset", "gpt2-tiny", "--target", "musa"], "no kernel list for musa"),
        (["--preset", "no-such-model", "--target", "npu"], "unknown preset"),
        (["--target", "npu"], "pass --preset"),
        (["--target", "npu", "--export-kernels", "out.txt"], "needs torch_npu installed"),
        (["--preset", "gpt2-tiny", "--target", "cuda"], "Invalid value for '--target'"),
    ],
)
def test_unusable_input_is_one_line_and_exit_2(args, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run(*args)
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out.txt").exists()
