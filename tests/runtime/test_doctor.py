import json

import pytest
from click.testing import CliRunner

import portlayer
from portlayer.cli import cli


@pytest.fixture(autouse=True)
def probed_backend(monkeypatch):
    """Doctor reports the process's selection: make it the probed one, whatever ran before."""
    monkeypatch.delenv("PORTLAYER_BACKEND", raising=False)
    portlayer.activate()


def test_doctor_json_reports_backend_devices_versions_collective_and_a_live_check(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    result = CliRunner().invoke(cli, ["doctor", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    import torch

    assert report["backend"]["name"] == "cpu"
    assert report["reason"] == "no accelerator found"
    assert {p["backend"] for p in report["probes"]} == {"npu", "musa", "mlu", "xpu", "cuda", "mps", "cpu"}
    assert report["torch"] == torch.__version__
    assert report["collective"] == {"name": "gloo", "built": True}
    assert report["visible_devices"] == {"env": "CUDA_VISIBLE_DEVICES", "value": "0"}
    assert len(report["devices"]) == 1 and report["devices"][0]["name"]
    assert report["check"]["ok"] is True
    assert report["check"]["max_abs_error"] < 1e-3


def test_doctor_text_is_one_line_per_fact(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    import torch

    result = CliRunner().invoke(cli, ["doctor", "--no-check"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0] == "backend      cpu  (no accelerator found)"
    assert lines[1].startswith(
        "probed       npu: torch_npu is not installed; musa: torch_musa is not installed; "
        "mlu: torch_mlu is not installed; xpu: "
    )
    assert lines[2].startswith("devices      1: [0] ")
    assert lines[3:] == [
        f"torch        {torch.__version__}",
        "vendor       -",
        "collective   gloo (available in this torch build)",
        "visible      CUDA_VISIBLE_DEVICES=<unset>",
    ]


def test_doctor_exits_1_and_says_what_broke_when_the_live_check_fails(monkeypatch):
    def lost(*args, **kwargs):
        raise RuntimeError("device lost. The driver said more on the following pages\nand more")

    monkeypatch.setattr(portlayer, "synchronize", lost)
    result = CliRunner().invoke(cli, ["doctor"])
    assert result.exit_code == 1
    assert result.output.splitlines()[-1] == "check        FAILED: RuntimeError: device lost"
    as_json = CliRunner().invoke(cli, ["doctor", "--json"])
    assert as_json.exit_code == 1
    assert json.loads(as_json.output)["check"] == {"ok": False, "detail": "RuntimeError: device lost"}


def test_doctor_text_ends_with_the_passed_check():
    result = CliRunner().invoke(cli, ["doctor"])
    assert result.exit_code == 0
    assert result.output.splitlines()[-1].startswith("check        ok: 256x256 matmul on cpu, max abs error vs host ")
