"""The training micro-batches of one rank, on its device, one ahead of the step that trains on them.

The loop asks for micro-batch `i` and, once `i`'s forward and backward are queued, stages `i + 1`: built on
the host, pinned where the backend has pinned memory, and copied without waiting. The host then prepares the
next batch while the device still works on this one, and never stops to wait for a copy.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import portlayer
from portlayer.train import data


@dataclass(frozen=True)
class MicroBatch:
    tensors: dict[str, torch.Tensor]  # on the device
    tokens: int  # the attention mask's ones, counted on the host before the copy


class MicroBatches:
    """Micro-batch `index` (0, 1, … over the whole run: step s, accumulation a is (s - 1) x accum + a) of `rank`."""

    def __init__(self, blocks: data.Blocks, order: data.Order, *, micro: int, rank: int, world_size: int,
                 seed: int, device: torch.device, total: int):  # fmt: skip
        self.blocks, self.order, self.seed = blocks, order, seed
        self.micro, self.rank, self.world_size = micro, rank, world_size
        self.device, self.total = device, total
        # Pinned host memory is the accelerator's: the cpu has none (pinning raises without an accelerator).
        self.pinned = portlayer.backend().is_accelerator
        self._staged: tuple[int, MicroBatch] | None = None

    def get(self, index: int) -> MicroBatch:
        if self._staged is not None and self._staged[0] == index:
            batch = self._staged[1]
            self._staged = None
            return batch
        return self._load(index)

    def stage(self, index: int) -> None:
        """Start micro-batch `index` on its way to the device (nothing past the run's last one)."""
        if index < self.total:
            self._staged = (index, self._load(index))

    def _load(self, index: int) -> MicroBatch:
        # Every rank's micro-batches of one accumulation step are consecutive in the run's order.
        first = index * self.micro * self.world_size + self.rank * self.micro
        host = data.train_batch(self.blocks, self.order, first, self.micro, self.seed)
        tokens = int(host["attention_mask"].numpy().sum())  # numpy's sum: no tensor read back, not even a host one
        if self.pinned:
            host = {name: tensor.pin_memory() for name, tensor in host.items()}
        tensors = {name: tensor.to(self.device, non_blocking=self.pinned) for name, tensor in host.items()}
        return MicroBatch(tensors, tokens)
