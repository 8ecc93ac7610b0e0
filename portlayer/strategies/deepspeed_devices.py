"""Which devices DeepSpeed has an accelerator of its own for (deepspeed/accelerator/real_accelerator.py,
SUPPORTED_ACCELERATOR_LIST, DeepSpeed 0.19.8; tests/strategies check it against DeepSpeed's): where it has none
(musa), its `get_accelerator()` and its launcher do not find the device. Read by the trainer's ZeRO strategies
(deepspeed_accelerator.py) and by migrate's DeepSpeed rules, so it imports nothing heavy."""

from __future__ import annotations

DEEPSPEED_ACCELERATORS = frozenset({"cuda", "cpu", "xpu", "npu", "mps", "hpu", "mlu", "sdaa", "supa", "klxpu"})


def lacks(vendor: str | None) -> bool:
    """A vendor target's device that DeepSpeed has no accelerator for (None: neutral or torch, never)."""
    return vendor is not None and vendor not in DEEPSPEED_ACCELERATORS
