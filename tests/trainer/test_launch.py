"""`portlayer.train.launch`: torchrun with the ranks forked from one import of torch, where a fork is safe.

That the forked ranks train as torchrun's new interpreters do is shown by every `parity run` in the suite, each
held to the baselines that torchrun's ranks recorded (tests/trainer/test_parity_runs.py).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.processes import HUNG_S

# What a new interpreter imports and asks before the fork server's preload: the warm one has done both already.
pytestmark = pytest.mark.real_interpreter

ARGUMENTS = """
import json
from portlayer.train.launch import preload, torchrun_arguments
print(json.dumps([preload(), torchrun_arguments(["--standalone"], ["--preset", "gpt2-tiny"])]))
"""

# Every way torch.cuda could be asked about a device, made to fail loudly; then the preload, as the fork server
# imports it; then which device plugins the process holds.
PRELOAD_ASKS_NOTHING = """
import json, sys
import torch

asked = []
for name in ("is_available", "device_count", "init", "_lazy_init", "current_device", "get_device_properties"):
    setattr(torch.cuda, name, lambda *args, _name=name, **kwargs: asked.append(_name))
from portlayer.train.launch import PRELOADED
for module in PRELOADED:
    __import__(module)
print(json.dumps({"asked": asked, "plugins": sorted({"torch_npu", "torch_musa"} & set(sys.modules))}))
"""


def run(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=HUNG_S)


def launch(env: dict) -> tuple[list[str] | None, list[str]]:
    result = run(ARGUMENTS, env)
    assert result.returncode == 0, result.stderr
    modules, arguments = json.loads(result.stdout)
    return modules, arguments


def forked(trainer_script) -> list[str]:
    return ["--standalone", "--run-path", "--start-method=forkserver", str(trainer_script), "--preset", "gpt2-tiny"]


def test_transformers_joins_the_preload_only_with_a_cpu_only_torch_and_no_plugin(without_accelerators):
    import torch

    from portlayer.train.launch import PRELOADED, PRELOADED_WITHOUT_DEVICES, TRAINER_SCRIPT

    modules, arguments = launch(without_accelerators)
    assert arguments == forked(TRAINER_SCRIPT)
    if torch.backends.cuda.is_built():  # a GPU host, or a CUDA wheel on this one (`make test-compat`)
        assert modules == list(PRELOADED)
    else:
        assert modules == [*PRELOADED, *PRELOADED_WITHOUT_DEVICES]


def test_where_a_device_plugin_is_installed_the_ranks_fork_with_torch_alone_imported(stand_in_device):
    # transformers would ask the installed torch_npu whether an NPU is there: the ranks import it after the fork.
    from portlayer.train.launch import PRELOADED, TRAINER_SCRIPT

    assert launch(stand_in_device("npu")) == (list(PRELOADED), forked(TRAINER_SCRIPT))


def test_where_import_torch_loads_a_vendor_plugin_the_ranks_start_as_torchrun_starts_them(stand_in_device):
    modules, arguments = launch(stand_in_device("npu", autoload=True))
    assert modules is None
    assert arguments == ["--standalone", "-m", "portlayer.train", "--preset", "gpt2-tiny"]


def test_the_preload_asks_no_device_anything_and_loads_no_plugin_that_is_installed(stand_in_device):
    # The stand-in npu is installed (torch_npu importable) without its autoload entry point: nothing preloaded
    # may import it, nor ask torch.cuda, or the ranks would fork a process holding a device runtime.
    result = run(PRELOAD_ASKS_NOTHING, stand_in_device("npu"))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == {"asked": [], "plugins": []}
