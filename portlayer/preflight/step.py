"""One training step, recorded below autograd, and checked against a target's kernels (`portlayer.preflight`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from portlayer.errors import PortlayerError
from portlayer.preflight.kernels import KernelSource, resolve
from portlayer.preflight.recording import Recorder, Recording
from portlayer.preflight.report import Report


def _loss(output: Any, loss_fn: Callable[[Any], torch.Tensor] | None) -> torch.Tensor:
    if loss_fn is not None:
        loss = loss_fn(output)
    elif isinstance(output, torch.Tensor):
        loss = output
    else:
        loss = getattr(output, "loss", None)
        if loss is None and isinstance(output, Mapping):
            loss = output.get("loss")
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        raise PortlayerError("cannot find a scalar loss in the model's output: pass loss_fn=lambda output: …")
    return loss


def record_step(model: torch.nn.Module, batch: Any, optimizer: torch.optim.Optimizer, *,
                loss_fn: Callable[[Any], torch.Tensor] | None = None,
                clip_grad_norm: float | None = None) -> Recording:
    """Run one training step (forward, backward, gradient clipping to `clip_grad_norm` if given, optimizer
    step, zero_grad) and record what it dispatches.

    `batch` is passed as `model(**batch)` when a mapping, `model(*batch)` when a tuple or list, else
    `model(batch)`. The loss is `loss_fn(output)`, else the output itself, its `.loss` or its "loss" entry.
    """
    model.train()
    with Recorder(model) as recorder:
        if isinstance(batch, Mapping):
            output = model(**batch)
        elif isinstance(batch, (tuple, list)):
            output = model(*batch)
        else:
            output = model(batch)
        loss = _loss(output, loss_fn)
        recorder.phase("backward")
        loss.backward()
        if clip_grad_norm is not None:
            recorder.phase("optimizer", scope="clip_grad_norm_")
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip_grad_norm)
        recorder.phase("optimizer", scope=f"{type(optimizer).__name__}.step")
        optimizer.step()
        optimizer.zero_grad()
    return recorder.recording


def check(model: torch.nn.Module, batch: Any, optimizer: torch.optim.Optimizer, target: str = "npu", *,
          kernels: str | Path | KernelSource | None = None,
          loss_fn: Callable[[Any], torch.Tensor] | None = None, clip_grad_norm: float | None = None) -> Report:
    """Record one training step and check each op against `target`'s kernels.

    `kernels`: a list file (exported with `export_kernels` on a machine with the plugin, or one op name a
    line), or a `KernelSource`; by default the dispatcher where the plugin is installed, else the list
    committed for the target.
    """
    source = kernels if isinstance(kernels, KernelSource) else resolve(target, kernels)
    recording = record_step(model, batch, optimizer, loss_fn=loss_fn, clip_grad_norm=clip_grad_norm)
    return Report.build(recording, source)
