"""Fake torch_musa for tests: registers "musa" and "mccl" like the real plugin, records device calls."""

import sys

from fake_vendor import install

__version__ = "0.0.0+fake"
install(sys.modules[__name__], "musa", "mccl", "MTT S4000 (fake)")
