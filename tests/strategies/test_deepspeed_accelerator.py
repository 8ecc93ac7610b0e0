"""DeepSpeed's accelerator follows portlayer's active backend (portlayer/strategies/deepspeed_accelerator.py):
DeepSpeed's own where it has one (cpu: gloo without oneCCL), portlayer's through `set_accelerator` where it has
none (musa, on the stand-in device). Each case runs in a fresh interpreter: DeepSpeed picks its accelerator
once per process, when imported.

DeepSpeed's accelerator interface: deepspeed/accelerator/abstract_accelerator.py and real_accelerator.py
(deepspeedai/DeepSpeed v0.19.8, the version constraints.txt pins).
"""

import os
import subprocess
import sys

import pytest

from portlayer.backends import IN_TREE
from tests.example_reference import REPO
from tests.fake_backend import install_gcu
from tests.fake_device import environment
from tests.processes import HUNG_S, fresh_process_json, run_python

ON_MUSA = r"""
import json, os, torch, portlayer
from portlayer.strategies.deepspeed_accelerator import use_active_backend
accelerator = use_active_backend()
from portlayer.strategies.portlayer_accelerator import PortlayerAccelerator
from deepspeed.accelerator import get_accelerator
assert get_accelerator() is accelerator
portlayer.set_device(1)
held = accelerator.FloatTensor([1.0, 2.0, 3.0, 4.0])
launcher_env = {}
accelerator.set_visible_devices_envs(launcher_env, [0, 1])
print(json.dumps({
    "class": type(accelerator).__name__, "name": accelerator.device_name(), "named": accelerator.device_name(1),
    "current": accelerator.current_device_name(), "collective": accelerator.communication_backend_name(),
    "tensor": str(held.device), "on": accelerator.on_accelerator(held),
    "on_cpu": accelerator.on_accelerator(torch.ones(1)), "allocated": accelerator.memory_allocated(1),
    "count": accelerator.device_count(), "fp64": accelerator.is_fp64_supported(),
    "visible": accelerator.visible_devices_envs(), "ops": accelerator.create_op_builder("FusedAdamBuilder"),
    "synchronized": accelerator.is_synchronized_device(),
    "stats": accelerator.memory_stats(1).get("allocated_bytes.all.current"),
    "dtypes": [str(dtype) for dtype in accelerator.supported_dtypes()], "bf16": portlayer.is_bf16_supported(),
    "triton": accelerator.is_triton_supported(), "exported": accelerator.export_envs(), "launcher": launcher_env,
    "ds_env_after": os.environ.get("DS_ACCELERATOR"),
    "allocated_0": accelerator.memory_allocated(0),
    "free_and_total": [accelerator.available_memory(1), accelerator.total_memory(1)], "info": portlayer.mem_get_info(1),
    "one_class": type(accelerator) is PortlayerAccelerator,
    "portlayers_stream_and_event": accelerator.Stream is portlayer.Stream and accelerator.Event is portlayer.Event,
    "constructed": {name: str(getattr(accelerator, name)([1]).dtype) for name in (
        "BFloat16Tensor", "ByteTensor", "DoubleTensor", "FloatTensor", "HalfTensor", "IntTensor", "LongTensor")},
}))
"""

ON_CPU = r"""
import json
from portlayer.strategies.deepspeed_accelerator import use_active_backend
accelerator = use_active_backend()
print(json.dumps({"class": type(accelerator).__name__, "collective": accelerator.communication_backend_name()}))
"""

SUPPORTED = r"""
import json
from deepspeed.accelerator import real_accelerator
print(json.dumps(sorted(real_accelerator.SUPPORTED_ACCELERATOR_LIST)))
"""

pytestmark = pytest.mark.deepspeed  # every test here runs DeepSpeed


def test_musa_gets_portlayers_accelerator_answering_for_the_stand_in_device(stand_in_device):
    seen = fresh_process_json(ON_MUSA, env=environment("musa"))
    assert seen["class"] == "PortlayerAccelerator"
    assert (seen["name"], seen["named"], seen["current"]) == ("musa", "musa:1", "musa:1")
    assert seen["collective"] == "mccl"  # the backend record's, what init_process_group needs there
    assert seen["tensor"] == "musa:1" and seen["on"] and not seen["on_cpu"]
    assert seen["allocated"] == 16  # four float32 on device 1, as the device's own allocator counts them
    assert seen["count"] == 2
    assert seen["fp64"] is False  # the musa record lists float64 among the dtypes the device emulates
    assert seen["visible"] == ["MUSA_VISIBLE_DEVICES"]
    assert seen["ops"] is None  # DeepSpeed's "no such op here": nothing to compile
    assert seen["synchronized"] is False
    assert seen["stats"] == 16  # the device module's own memory_stats, as memory_allocated's figure
    # float64 is among the dtypes the musa record says the device emulates; float16 is not.
    assert seen["dtypes"] == ["torch.float32", "torch.float16"] + (["torch.bfloat16"] if seen["bf16"] else [])
    assert seen["triton"] is False
    # DeepSpeed's launcher forwards the variables named with these prefixes (NCCL_*, CUDA_* on cuda).
    assert seen["exported"] == ["MCCL", "MUSA"]
    assert seen["launcher"] == {"MUSA_VISIBLE_DEVICES": "0,1"}
    assert seen["ds_env_after"] is None  # DeepSpeed was told cpu while importing, and the variable put back
    assert seen["allocated_0"] == 0  # the device asked for, not the current one
    # Available is what is free, not the device's total (mem_get_info answers both).
    assert seen["free_and_total"] == [seen["info"][0], seen["info"][1]]
    assert seen["one_class"] and seen["portlayers_stream_and_event"]
    assert seen["constructed"] == {
        "BFloat16Tensor": "torch.bfloat16", "ByteTensor": "torch.uint8", "DoubleTensor": "torch.float64",
        "FloatTensor": "torch.float32", "HalfTensor": "torch.float16", "IntTensor": "torch.int32",
        "LongTensor": "torch.int64",
    }


def test_the_cpu_gets_deepspeeds_own_accelerator_over_gloo_without_oneccl():
    seen = fresh_process_json(ON_CPU, env={"PORTLAYER_BACKEND": "cpu"}, fake_plugins=False)
    assert seen == {"class": "CPU_Accelerator", "collective": "gloo"}


@pytest.mark.parametrize(("backend", "told"), [("cpu", "npu"), ("npu", "cpu")])
def test_deepspeed_told_another_accelerator_than_portlayers_backend_is_refused(stand_in_device, backend, told):
    # DS_ACCELERATOR set by hand wins over portlayer's choice (setdefault): the run stops before two devices mix.
    env = {**environment("npu"), "PORTLAYER_BACKEND": backend, "DS_ACCELERATOR": told}
    result = run_python(ON_CPU, env=env)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1].endswith(
        f"DeepSpeed chose its {told} accelerator, but portlayer's backend is {backend}: "
        f"unset DS_ACCELERATOR or set it to {backend}"
    )


def test_the_records_name_deepspeeds_accelerators_as_deepspeed_lists_them():
    deepspeeds = set(fresh_process_json(SUPPORTED, fake_plugins=False))
    named = {backend.name: backend.deepspeed_accelerator for backend in IN_TREE}
    # Each backend DeepSpeed has an accelerator for names it, by DeepSpeed's name; the others name none.
    assert named == {name: name if name in deepspeeds else None for name in named}
    assert named["musa"] is None
    # DeepSpeed's list has devices portlayer has no record for (Kunlun's klxpu), none the other way round.
    assert deepspeeds - set(named) == {"klxpu"}


ON_GCU = r"""
import json, torch, portlayer
from portlayer.strategies.deepspeed_accelerator import use_active_backend
accelerator = use_active_backend()
from deepspeed.accelerator import get_accelerator
launcher_env = {}
accelerator.set_visible_devices_envs(launcher_env, [2, 3])
held = accelerator.FloatTensor([1.0])
print(json.dumps({
    "class": type(accelerator).__name__, "deepspeeds": get_accelerator() is accelerator,
    "name": accelerator.device_name(1), "collective": accelerator.communication_backend_name(),
    "exported": accelerator.export_envs(), "launcher": launcher_env, "tensor": held.device.type,
    "count": accelerator.device_count(), "fp64": accelerator.is_fp64_supported(),
    "fp16": accelerator.is_fp16_supported(),
}))
"""


def test_a_new_backend_record_is_all_deepspeeds_accelerator_needs(tmp_path, stand_in_device):
    # The out-of-tree gcu (tests/fake_backend.py): a record and a plugin, nothing in portlayer's code names it.
    root = install_gcu(tmp_path)
    seen = fresh_process_json(ON_GCU, env={"PYTHONPATH": os.pathsep.join([str(REPO), str(root)])}, fake_plugins=False)
    assert seen == {
        "class": "PortlayerAccelerator", "deepspeeds": True, "name": "gcu:1", "collective": "eccl",
        "exported": ["ECCL", "TOPS"], "launcher": {"TOPS_VISIBLE_DEVICES": "2,3"}, "tensor": "gcu",
        "count": 8, "fp64": False, "fp16": True,
    }  # fmt: skip


def test_deepspeed_refuses_musa_by_name(stand_in_device):
    """Why portlayer supplies one: DeepSpeed stops at import when told DS_ACCELERATOR=musa (docs/strategies.md)."""
    env = {**environment("musa"), "DS_ACCELERATOR": "musa"}
    result = run_python("import deepspeed", env=env)
    assert result.returncode != 0
    assert "ValueError: DS_ACCELERATOR must be one of ['cuda', 'cpu', 'xpu', 'npu'" in result.stderr


def without_cann(code: str, env: dict) -> subprocess.CompletedProcess:
    """`code` in an environment with ASCEND_HOME_PATH removed, which run_python cannot do (it only adds)."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, timeout=HUNG_S
    )


def test_deepspeeds_npu_accelerator_needs_cann_s_environment(stand_in_device):
    """DeepSpeed's npu op builders read ASCEND_HOME_PATH (CANN's set_env.sh sets it) when its communication
    starts, and stop with a KeyError without it; portlayer says so in one line before DeepSpeed starts."""
    env = {k: v for k, v in environment("npu").items() if k != "ASCEND_HOME_PATH"}
    builder = "from deepspeed.accelerator import get_accelerator; get_accelerator().create_op_builder('ShareMemCommBuilder')"
    deepspeed_alone = without_cann(builder, {**env, "DS_ACCELERATOR": "npu"})
    assert deepspeed_alone.stderr.strip().splitlines()[-1] == "KeyError: 'ASCEND_HOME_PATH'"

    result = without_cann(ON_CPU, env)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1].endswith(
        "DeepSpeed's npu accelerator needs ASCEND_HOME_PATH (CANN's set_env.sh sets it), which is unset"
    )
