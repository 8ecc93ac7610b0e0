"""The per-step records of a run, read from the device when they are logged, not at every step.

Reading a loss or a gradient norm makes the host wait for the device, and a host that waits at every step
leaves the device idle while it prepares the next one. So each step leaves its loss and norm on the device,
and a window of steps is read at once when the loop logs (a log line, a checkpoint, the end): one wait and
one collective for the whole window. A step's time is then its share of the window's time.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

import portlayer


@dataclass(frozen=True)
class PendingStep:
    step: int
    lr: float  # the learning rate the step trained with
    losses: torch.Tensor  # this rank's loss of each micro-batch, on the device
    tokens: int  # this rank's tokens
    grad_norm: torch.Tensor | float  # the total norm before clipping, the same on every rank
    peak_memory_bytes: int | None  # this rank's allocator peak so far; None without a device allocator


class StepWindow:
    """Steps trained since the last read, and when the first of them began."""

    def __init__(self, world, device: torch.device, grad_accum: int):
        self.world, self.device, self.grad_accum = world, device, grad_accum
        self.has_allocator = portlayer.backend().is_accelerator
        self.pending: list[PendingStep] = []
        self.began: float | None = None

    def add(self, began: float, step: int, lr: float, losses: torch.Tensor, tokens: int, grad_norm) -> None:
        """Step `step`, queued on the device from host time `began` (time.perf_counter) on."""
        if not self.pending:
            self.began = began
        # The caching allocator counts on the host as work is queued: its peak needs no wait for the device.
        peak = portlayer.max_memory_allocated(self.device) if self.has_allocator else None
        self.pending.append(PendingStep(step, lr, losses, tokens, grad_norm, peak))

    def read(self) -> list[dict]:
        """Wait for the device, then the window's records: loss averaged over ranks and micro-batches, tokens/s
        of all ranks, the largest peak of any rank, the learning rate, the gradient norm and the seconds."""
        if not self.pending:
            return []
        portlayer.synchronize()
        seconds = (time.perf_counter() - self.began) / len(self.pending)
        pending, self.pending = self.pending, []
        count = len(pending)
        summed = self.world.all_reduce([sum(p.losses.tolist()) for p in pending] + [p.tokens for p in pending])
        peaks = [None] * count
        if self.has_allocator:
            most = self.world.all_reduce([p.peak_memory_bytes for p in pending], op=dist.ReduceOp.MAX)
            peaks = [int(peak) for peak in most]
        records = []
        for p, loss, tokens, peak in zip(pending, summed[:count], summed[count:], peaks):
            norm = float(p.grad_norm)
            records.append({
                "step": p.step,
                # Only a pipeline's last stage computes the loss (the others record zeros).
                "loss": loss / self.grad_accum / (self.world.size // self.world.layout.pipeline),
                "tokens_per_s": tokens / self.world.layout.model_parallel / seconds,  # each copy's once, not per split
                "peak_memory_bytes": peak,
                "lr": p.lr,
                "grad_norm": norm if math.isfinite(norm) else None,  # an fp16 overflow the scaler skipped
                "seconds": seconds,
            })  # fmt: skip
        return records
