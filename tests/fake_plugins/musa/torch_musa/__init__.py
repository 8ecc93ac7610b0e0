"""Stand-in torch_musa for tests: registers "musa" and "mccl" like the real plugin; tensors compute on the cpu.

As in torch_musa, the package itself is `torch.musa`.
"""

import sys
import types

import torch
from fake_vendor import install
from fake_vendor.device_module import Vendor

__version__ = "0.0.0+fake"
# MTT S4000: 48 GB, compute capability 2.2 (MP_22).
install(
    sys.modules[__name__],
    Vendor("musa", "MTT S4000 (stand-in)", total_memory=48 * 2**30, capability=(2, 2)),
    collective="mccl",
    visible_env="MUSA_VISIBLE_DEVICES",
    module=sys.modules[__name__],
)

# torch_musa hangs its muDNN switches on torch.backends, as torch.backends.cudnn (allow_tf32 only).
mudnn = types.ModuleType("torch_musa.core.mudnn")
mudnn.allow_tf32 = False
sys.modules[mudnn.__name__] = mudnn
torch.backends.mudnn = mudnn
