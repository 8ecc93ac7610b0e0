"""Fake torch_npu for tests: registers "npu" and "hccl" like the real plugin, records device calls."""

import sys

from fake_vendor import install

__version__ = "0.0.0+fake"
install(sys.modules[__name__], "npu", "hccl", "Ascend910B (fake)")
