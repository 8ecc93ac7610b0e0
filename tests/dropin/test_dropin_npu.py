"""The drop-in on a (fake) Ascend NPU: CUDA names reach torch_npu and hccl, torch itself stays untouched.

One fresh interpreter runs a CUDA script's lines through `import portlayer.torch as torch` with the
stand-in torch_npu plugin; factories and `.to()` are caught by a TorchFunctionMode that records the device
torch receives, and `torch.cuda.*` by the plugin's own call log. (Training on the stand-in device, for
real, is tests/fake_device/.)
"""

import pytest

from tests.processes import fresh_process_json

SCRIPT = r"""
import json, os, tempfile
import torch as real
torch_before, cuda_before = dict(vars(real)), dict(vars(real.cuda))

import portlayer.torch as torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.overrides import TorchFunctionMode
import torch_npu

class Recorded(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.__name__ not in ("zeros", "randn", "to"):
            return func(*args, **kwargs)
        self.seen.append([func.__name__, [str(a) for a in (*args, *kwargs.values()) if isinstance(a, (str, real.device))]])
        return args[0] if func.__name__ == "to" else None

out = {
    "torch_changed": [n for n, v in torch_before.items() if vars(real).get(n) is not v],
    "torch_cuda_changed": [n for n, v in cuda_before.items() if vars(real.cuda).get(n) is not v],
    "devices": [str(d) for d in (torch.device("cuda", 1), torch.device("cuda:0"), torch.device("cuda"), torch.device(1))],
}
tensor, module = real.ones(1), real.nn.Linear(1, 1)
with Recorded() as recorded:
    torch.zeros(2, device="cuda:1")
    torch.randn(2, device=torch.device("cuda", 0))
    tensor.to("cuda:0"); tensor.to(device="cuda"); tensor.cuda(); tensor.cuda(1)
    module.cuda(); module.to("cuda:1")
out["dispatched"] = recorded.seen

torch_npu.CALLS.clear()
torch.cuda.set_device(1)
torch.cuda.synchronize()
torch.cuda.manual_seed(3)
torch.cuda.memory_allocated(torch.device("cuda", 1))
torch.cuda.empty_cache()
out["device_module_calls"] = [[name, [str(a) for a in args]] for name, args, kwargs in torch_npu.CALLS]
out["vendor_only_name"] = torch.cuda.is_initialized is torch_npu.npu.is_initialized
out["is_available"] = [torch.cuda.is_available(), real.cuda.is_available()]
out["amp"] = [torch.autocast("cuda").device, torch.amp.autocast("cuda").device, torch.cuda.amp.autocast().device,
              torch.amp.GradScaler()._device, torch.cuda.amp.GradScaler()._device]

dist.init_process_group("nccl", init_method="file://" + os.path.join(tempfile.mkdtemp(), "store"), rank=0, world_size=1)
out["collectives"] = [dist.get_backend(), dist.get_backend(dist.new_group(backend="nccl"))]
try:  # the fake cannot hold parameters, so DDP stops at its check, naming the devices it was given
    DDP(real.nn.Linear(1, 1), device_ids=[torch.device("cuda", 1)], output_device="cuda:1")
except ValueError as error:
    out["ddp_error"] = str(error)
dist.destroy_process_group()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def npu():
    # An Ascend host: its two npu devices and no CUDA one (on a GPU host, torch.cuda would answer for the GPU).
    # The vendor's own variable wins over the CUDA one portlayer would carry over.
    hosts = {"CUDA_VISIBLE_DEVICES": "", "ASCEND_RT_VISIBLE_DEVICES": "0,1"}
    return fresh_process_json(SCRIPT, env={"PORTLAYER_BACKEND": "npu", **hosts})


def test_torch_and_torch_cuda_are_left_as_they_were(npu):
    assert npu["torch_changed"] == [] and npu["torch_cuda_changed"] == []
    assert npu["is_available"] == [True, False]


def test_device_objects_are_npu_devices(npu):
    assert npu["devices"] == ["npu:1", "npu:0", "npu", "npu:1"]


def test_factories_to_and_cuda_send_npu_devices_to_torch(npu):
    assert npu["dispatched"] == [
        ["zeros", ["npu:1"]],
        ["randn", ["npu:0"]],
        ["to", ["npu:0"]],
        ["to", ["npu"]],
        ["to", ["npu"]],  # tensor.cuda(): the current device
        ["to", ["npu:1"]],
        ["to", ["npu"]],  # module.cuda(): weight and bias
        ["to", ["npu"]],
        ["to", ["npu:1"]],
        ["to", ["npu:1"]],
    ]


def test_torch_cuda_calls_reach_torch_npu(npu):
    assert npu["device_module_calls"] == [
        ["device_count", []],  # set_device checks the index is visible first (portlayer/rank_device.py)
        ["set_device", ["1"]],
        ["synchronize", []],
        ["manual_seed", ["3"]],
        ["memory_allocated", ["npu:1"]],
        ["empty_cache", []],
    ]
    assert npu["vendor_only_name"]


def test_amp_runs_on_npu(npu):
    assert npu["amp"] == ["npu"] * 5


def test_nccl_becomes_hccl_and_ddp_gets_npu_devices(npu):
    assert npu["collectives"] == ["hccl", "hccl"]
    assert "device_ids [device(type='npu', index=1)], output_device npu:1" in npu["ddp_error"]
