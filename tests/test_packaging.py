"""The distribution's metadata: license, classifiers, extras, and what `make` installs for each job."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from tests.processes import HUNG_S

ROOT = Path(__file__).resolve().parents[1]


def test_the_license_file_is_the_apache_2_text_and_ships_with_the_metadata():
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    for section in ("1. Definitions.", "4. Redistribution.", "9. Accepting Warranty or Additional Liability."):
        assert section in text
    assert "END OF TERMS AND CONDITIONS" in text
    installed = metadata.metadata("portlayer")
    assert installed["License-Expression"] == "Apache-2.0"
    assert installed.get_all("License-File") == ["LICENSE"]


def test_the_build_backend_is_new_enough_for_a_license_expression():
    # PEP 639 license expressions (`license = "Apache-2.0"`) are accepted from setuptools 77 on.
    pyproject = (ROOT / "pyproject.toml").read_text()
    floor = re.search(r'^requires = \["setuptools>=(\d+)', pyproject, re.MULTILINE)
    assert floor and int(floor.group(1)) >= 77


def test_classifiers_say_what_it_is_and_no_license_classifier_duplicates_the_expression():
    classifiers = metadata.metadata("portlayer").get_all("Classifier")
    assert "Topic :: Scientific/Engineering :: Artificial Intelligence" in classifiers
    assert "Intended Audience :: Developers" in classifiers
    assert not [c for c in classifiers if c.startswith("License ::")]


def _requirements() -> dict[str, set[str]]:
    """extra ('' for the core) -> the distribution names it requires."""
    extras: dict[str, set[str]] = {}
    for requirement in metadata.requires("portlayer"):
        name = re.match(r"[A-Za-z0-9_.-]+", requirement).group(0)
        extra = re.search(r'extra == "([^"]+)"', requirement)
        extras.setdefault(extra.group(1) if extra else "", set()).add(name)
    return extras


def test_accelerate_is_not_a_dependency_of_the_trainer_or_runtime():
    # Only HF's Trainer needs it: the bench measures against it, the tests run an HF Trainer script.
    extras = _requirements()
    assert extras["bench"] == {"accelerate"}
    assert "accelerate" in extras["dev"]
    assert "accelerate" not in extras["train"] | extras["migrate"] | extras[""]


def test_every_dependency_is_pinned_in_the_constraints():
    pinned = {
        line.split("==")[0].lower().replace("_", "-")
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if "==" in line
    }
    wanted = {
        name.lower().replace("_", "-")
        for extra, names in _requirements().items()
        if extra != "npu"  # the Ascend plugin needs CANN on the host: never installed by make
        for name in names
    }
    assert wanted - pinned == set()


def test_make_bench_installs_the_bench_extra_and_make_venv_does_not(tmp_path):
    def planned(target: str) -> str:
        # -n: print the commands without running them, for a virtualenv that does not exist yet.
        return subprocess.run(
            ["make", "-n", target, f"VENV={tmp_path / 'venv'}"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout

    assert "-c constraints.txt -e '.[migrate,train,dev,bench]'" in planned("bench")
    venv = planned("venv")
    assert "-c constraints.txt -e '.[migrate,train,dev]'" in venv and "bench]" not in venv


def test_the_venv_installs_from_the_folders_of_local_wheels_pip_is_configured_with(tmp_path):
    # uv reads none of pip's settings: without the folder that holds the pinned cpu torch, it would take
    # PyPI's torch 2.13.0, a CUDA build of several GB.
    planned = subprocess.run(
        ["make", "-n", "venv", f"VENV={tmp_path / 'venv'}"],
        cwd=ROOT, capture_output=True, text=True, check=True, env={**os.environ, "PIP_FIND_LINKS": "/a/b /c/d"},
    ).stdout
    installs = [line for line in planned.splitlines() if " pip install " in line and "-c constraints.txt" in line]
    assert installs and all("--find-links /a/b --find-links /c/d" in line for line in installs), planned


def test_make_venv_and_test_build_deepspeed_against_the_installed_torch(tmp_path):
    # DeepSpeed ships as a source archive; build isolation would fetch a CUDA torch to build it against.
    assert _requirements()["deepspeed"] == {"deepspeed"}
    for target in ("venv", "test"):
        planned = subprocess.run(
            ["make", "-n", target, f"VENV={tmp_path / 'venv'}"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
        install = next(line for line in planned.splitlines() if "'.[deepspeed]'" in line)
        assert install.startswith("DS_BUILD_OPS=0 ")
        assert "-c constraints.txt --no-build-isolation -e '.[deepspeed]'" in install
        assert planned.index("-c constraints.txt wheel") < planned.index(install)


def test_a_checkout_without_an_install_names_the_missing_package_in_one_line(tmp_path):
    # The interpreter without site's .pth files: site-packages (click, torch) on the path, but not the
    # editable install's finder, so `portlayer` is this checkout's folder and portlayer.migrate is missing.
    site_packages = next(path for path in sys.path if path.endswith("site-packages"))
    code = (f"import sys; sys.path[:0] = [{str(ROOT)!r}, {site_packages!r}]; "
            "from portlayer.cli import main; main(['migrate', '--check', '.'])")
    result = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, cwd=tmp_path,
                            timeout=HUNG_S)
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines() == [
        "portlayer: error: 'portlayer migrate' needs portlayer.migrate, which only an installed portlayer has "
        "(setup.py maps migrate/ to it): pip install -e '.[migrate]' in this checkout"
    ]


def test_committed_baselines_are_found_through_the_installed_package():
    from portlayer.train.runfile import BASELINES

    assert sorted(path.name for path in BASELINES.glob("*.cpu-cpu.json")) == [
        "bert-base-uncased-tiny.cpu-cpu.json", "gpt2-tiny.cpu-cpu.json", "mixtral-8x7b-tiny.cpu-cpu.json"]
    # The NVIDIA H200's runs of every preset, fp32 and bf16 (reference_train/baselines/README.md).
    assert len(list(BASELINES.glob("*.cuda-h200.json"))) == len(list(BASELINES.glob("*.cuda-h200-bf16.json"))) == 6
