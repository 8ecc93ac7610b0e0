import json
import platform

import pytest
from click.testing import CliRunner

import portlayer
from portlayer.cli import cli
from tests.accelerator import NONE_VISIBLE
from tests.processes import run_python


@pytest.fixture(autouse=True)
def probed_backend(monkeypatch):
    """Doctor reports the process's selection: make it the probed one, whatever ran before."""
    monkeypatch.delenv("PORTLAYER_BACKEND", raising=False)
    portlayer.activate()


def test_doctor_json_reports_backend_devices_versions_collective_and_a_live_check():
    result = run_python("from portlayer.cli import main; main(['doctor', '--json'])", fake_plugins=False,
                        env=NONE_VISIBLE)  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    import torch

    assert report["backend"]["name"] == "cpu"
    assert report["reason"] == "no accelerator found"
    assert [p["backend"] for p in report["probes"]] == [
        "npu", "musa", "mlu", "hpu", "sdaa", "supa", "xpu", "cuda", "mps", "cpu"
    ]
    assert report["torch"] == torch.__version__
    assert report["portlayer"] == portlayer.__version__
    assert report["python"].startswith(platform.python_version())
    assert report["os"] == platform.platform()
    assert report["collective"] == {"name": "gloo", "built": True}
    assert report["visible_devices"] == {"env": "CUDA_VISIBLE_DEVICES", "value": ""}
    assert len(report["devices"]) == 1 and report["devices"][0]["name"]
    assert report["check"]["ok"] is True
    assert report["check"]["max_abs_error"] < 1e-3


def test_doctor_text_is_a_fenced_block_one_line_per_fact_versions_first():
    result = CliRunner().invoke(cli, ["doctor", "--no-check"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0] == "```text" and lines[-1] == "```"  # pastes into an issue as it looks here
    facts = dict(line.split(None, 1) for line in lines[1:-1])
    labels = list(facts)
    assert labels[:6] == ["portlayer", "python", "os", "torch", "transformers", "backend"]
    # "probed" (the backends before this one that were passed over) only where there were such backends.
    assert labels[6:8] in (["probed", "devices"], ["devices", "vendor"])
    assert {"devices", "vendor", "collective", "visible"} <= set(labels)
    assert "check" not in labels
    import sys

    import torch
    import transformers

    assert facts["portlayer"] == portlayer.__version__
    assert facts["python"].startswith(".".join(map(str, sys.version_info[:3])) + " (")
    assert facts["torch"] == torch.__version__
    assert facts["transformers"] == transformers.__version__


def test_doctor_says_when_transformers_is_not_installed(monkeypatch):
    from importlib import metadata

    real_version = metadata.version

    def version(name):
        if name == "transformers":
            raise metadata.PackageNotFoundError(name)
        return real_version(name)

    monkeypatch.setattr(metadata, "version", version)
    monkeypatch.delitem(__import__("sys").modules, "transformers", raising=False)
    json_report = json.loads(CliRunner().invoke(cli, ["doctor", "--json", "--no-check"]).output)
    assert json_report["transformers"] is None
    assert "transformers not installed" in CliRunner().invoke(cli, ["doctor", "--no-check"]).output


def test_doctor_exits_1_and_says_what_broke_when_the_live_check_fails(monkeypatch):
    def lost(*args, **kwargs):
        raise RuntimeError("device lost. The driver said more on the following pages\nand more")

    monkeypatch.setattr(portlayer, "synchronize", lost)
    result = CliRunner().invoke(cli, ["doctor"])
    assert result.exit_code == 1
    assert result.output.splitlines()[-2:] == ["check        FAILED: RuntimeError: device lost", "```"]
    as_json = CliRunner().invoke(cli, ["doctor", "--json"])
    assert as_json.exit_code == 1
    assert json.loads(as_json.output)["check"] == {"ok": False, "detail": "RuntimeError: device lost"}


def test_doctor_text_ends_with_the_passed_check():
    result = CliRunner().invoke(cli, ["doctor"])
    assert result.exit_code == 0
    check, fence = result.output.splitlines()[-2:]
    assert fence == "```"
    where = "cpu" if portlayer.device_type() == "cpu" else str(portlayer.device())
    assert check.startswith(f"check        ok: 256x256 matmul on {where}, max abs error vs host ")
