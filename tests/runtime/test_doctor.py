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
    assert [p["backend"] for p in report["probes"]] == [
        "npu", "musa", "mlu", "hpu", "sdaa", "supa", "xpu", "cuda", "mps", "cpu"
    ]
    assert report["torch"] == torch.__version__
    assert report["collective"] == {"name": "gloo", "built": True}
    assert report["visible_devices"] == {"env": "CUDA_VISIBLE_DEVICES", "value": "0"}
    assert len(report["devices"]) == 1 and report["devices"][0]["name"]
    assert report["check"]["ok"] is True
    assert report["check"]["max_abs_error"] < 1e-3


def test_doctor_text_is_one_line_per_fact():
    result = CliRunner().invoke(cli, ["doctor", "--no-check"])
    assert result.exit_code == 0
    labels = [line.split()[0] for line in result.output.splitlines()]
    assert labels[:2] == ["backend", "probed"]
    assert {"devices", "torch", "vendor", "collective", "visible"} <= set(labels)
    assert "check" not in labels
