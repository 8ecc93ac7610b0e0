"""Stand-in torch_npu for tests: registers "npu" and "hccl" like the real plugin; tensors compute on the cpu."""

import sys

from fake_vendor import install
from fake_vendor.device_module import Vendor

__version__ = "0.0.0+fake"
# Ascend 910B: 64 GB of HBM; torch_npu's get_device_capability returns None (CANN has no such concept).
install(
    sys.modules[__name__],
    Vendor("npu", "Ascend910B (stand-in)", total_memory=64 * 2**30, capability=None),
    collective="hccl",
    visible_env="ASCEND_RT_VISIBLE_DEVICES",
)


def npu_fusion_attention(*args, **kwargs):
    """Imported by transformers whenever torch_npu is installed; the fused kernel exists only on Ascend."""
    raise NotImplementedError("npu_fusion_attention is an Ascend kernel; the stand-in device does not have it")


def _autoload():
    """torch's `torch.backends` entry point (tests/fake_plugins/autoload/npu): importing this module, which
    `import torch` does to find this function, already registered the device; as torch_npu's own."""
