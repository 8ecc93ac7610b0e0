"""`pip install portlayer` beside the torch a vendor plugin pins leaves that torch alone.

torch_npu pins the torch it was built for one for one (2.6.0, 2.7.1, 2.8.0 for the releases Ascend sites run),
torch_musa likewise (2.7.1, 2.9.1, 2.11.0): an install that asked pip for a newer torch would replace the
vendor's and break its plugin. Each case is a fresh environment holding a torch distribution of that release,
as pip sees an installed one (its dist-info: pip decides from the metadata, never imports torch), into which
pip installs portlayer's wheel, built from this checkout, from a folder with nothing else: no index,
no configured folder of wheels, so that pip could not replace torch even if it wanted to, and says so.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv
from importlib import metadata
from pathlib import Path

import pytest

from tests.processes import HUNG_S

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.xdist_group("install_beside_torch")  # one wheel build, on one worker

FLOOR = re.search(r'"torch>=([\d.]+)"', (ROOT / "pyproject.toml").read_text()).group(1)


def pip(*args, python: Path | None = None, isolated: bool = False) -> subprocess.CompletedProcess:
    """pip of this environment (`python`: acting on that one); `isolated`: without the machine's pip settings
    (configured indexes, folders of wheels, constraints)."""
    target = ("--python", str(python)) if python else ()
    command = [sys.executable, "-m", "pip", *target, "--disable-pip-version-check", "--no-input", *map(str, args)]
    env = {k: v for k, v in os.environ.items() if not (isolated and k.startswith("PIP_"))}
    if isolated:
        env["PIP_CONFIG_FILE"] = os.devnull
    return subprocess.run(command, capture_output=True, text=True, timeout=HUNG_S, env=env)


def install_portlayer(python: Path, wheelhouse: Path) -> subprocess.CompletedProcess:
    return pip("install", "--no-index", "--find-links", wheelhouse, "portlayer", python=python, isolated=True)


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory) -> Path:
    """portlayer's wheel, built from this checkout with this environment's setuptools (torch requires it); no
    download, so that the test runs where there is no network (a GPU host)."""
    folder = tmp_path_factory.mktemp("wheelhouse")
    # Built from a copy: setuptools builds in the source tree's build/, which the checkout must not share with
    # whatever else runs beside the test (seen: a build that lost build/lib/portlayer/migrate mid-copy).
    source = tmp_path_factory.mktemp("source") / "portlayer"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv*", ".whl", "build", "*.egg-info", "__pycache__", "tests", "runs", "gpu-lane"))
    built = pip("wheel", "--no-deps", "--no-build-isolation", "-q", "-w", folder, source)
    assert built.returncode == 0, built.stderr[-3000:]
    return folder


def installed_as_pip_sees_it(site: Path, name: str, release: str) -> Path:
    """A distribution as pip sees an installed one (pip decides from the metadata, never imports it)."""
    info = site / f"{name}-{release}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {release}\nRequires-Python: >=3.9\n")
    (info / "INSTALLER").write_text("pip\n")
    (info / "RECORD").write_text("".join(f"{info.name}/{file},,\n" for file in ("METADATA", "INSTALLER", "RECORD")))
    return info


def environment_with_torch(root: Path, release: str) -> tuple[Path, Path]:
    """A new environment holding torch `release` (and click, portlayer's other dependency) as pip installed
    them; returns its python and torch's dist-info."""
    venv.EnvBuilder(with_pip=False).create(root)
    python = root / "bin" / "python"
    site = Path(subprocess.check_output([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], text=True).strip())
    installed_as_pip_sees_it(site, "click", metadata.version("click"))
    return python, installed_as_pip_sees_it(site, "torch", release)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in folder.iterdir()}


def installed_versions(python: Path) -> dict[str, str]:
    listed = pip("list", "--format=freeze", python=python)
    return dict(line.split("==") for line in listed.stdout.split())


# torch_npu 2.6.0.post5 and 2.7.1.post11 pin these (tests/vendor_api), local version label included.
@pytest.mark.parametrize("release", ["2.6.0+cpu", "2.7.1+cpu"])
def test_pip_install_portlayer_leaves_a_vendors_pinned_torch_as_it_was(tmp_path, wheelhouse, release):
    python, torch_info = environment_with_torch(tmp_path / "env", release)
    before = snapshot(torch_info)
    result = install_portlayer(python, wheelhouse)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "torch" not in re.findall(r"Successfully installed (.*)", result.stdout)[0]
    versions = installed_versions(python)
    assert versions["torch"] == release and versions["portlayer"] == metadata.version("portlayer")
    assert snapshot(torch_info) == before


def test_the_declared_floor_is_the_oldest_release_left_alone(tmp_path, wheelhouse):
    # The case above can fail: a torch older than the floor is one pip must replace, and with nothing to
    # replace it with in the folder it says so.
    assert FLOOR == "2.6"
    python, _ = environment_with_torch(tmp_path / "env", "2.5.1")
    result = install_portlayer(python, wheelhouse)
    assert result.returncode != 0
    assert "No matching distribution found for torch>=2.6" in result.stderr
