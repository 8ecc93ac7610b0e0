"""Whether DeepSpeed has an accelerator of its own for a device: the backend record says
(`Backend.deepspeed_accelerator`). Where it has none (musa), its `get_accelerator()` and its launcher do not find
the device. Read by the trainer's ZeRO strategies (deepspeed_accelerator.py) and by migrate's DeepSpeed rules,
so it imports nothing heavy."""

from __future__ import annotations

from portlayer import backends


def lacks(vendor: str | None) -> bool:
    """A vendor target's device that DeepSpeed has no accelerator for (None: neutral or torch, never)."""
    return vendor is not None and backends.BY_NAME[vendor].deepspeed_accelerator is None
