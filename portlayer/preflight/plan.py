"""A preset's training step at its published size, without computing it, and what would make it fit.

    step = fake_preset_step(Shape("mixtral-8x7b", batch_size=1, seq_len=1024,
                                  overrides={"num_hidden_layers": 32}))
    step.memory.total, step.recording.ops

The model is the published one: a full-size preset's own config overrides are the trainer's choices (its
mixtral-8x7b keeps 1 of the 32 layers) and are left out here; `overrides` puts them back. The step is the
reference trainer's on a device: DDP per rank, AdamW and gradient clipping with the
foreach kernels torch picks on an accelerator (cuda, npu, musa), autocast for bf16/fp16. Not parity mode:
dropout and the fused attention stay as training normally runs them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from portlayer import PortlayerError
from portlayer.preflight.devices import format_bytes
from portlayer.preflight.fake_step import FakeStep, Memory, run_fake_step
from portlayer.preflight.shadow import DataDependentError

LAYERS = "num_hidden_layers"  # every preset's config answers to it (gpt2 maps it onto n_layer)


@dataclass(frozen=True)
class Shape:
    preset: str
    batch_size: int | None = None  # None: the preset's published per-device batch
    seq_len: int | None = None  # None: the preset's
    overrides: Mapping[str, Any] = field(default_factory=dict)
    precision: str = "fp32"
    ddp: bool = True

    def describe(self, config) -> str:
        layers = getattr(config, LAYERS, None)
        return (f"{self.preset}, batch {self.batch_size} x {self.seq_len} tokens, {layers} layers, "
                f"{self.precision}{', DDP' if self.ddp else ''}")


def parse_override(text: str) -> tuple[str, Any]:
    """`name=value`, the value read as JSON where it can be (1, 0.1, true), else as a string."""
    name, equals, raw = text.partition("=")
    if not equals or not name.strip():
        raise PortlayerError(f"--override {text!r}: expected FIELD=VALUE, e.g. num_hidden_layers=1")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return name.strip(), value


def resolved(shape: Shape) -> Shape:
    from portlayer.train import presets

    preset = presets.get_preset(shape.preset)
    return replace(shape, batch_size=shape.batch_size or preset.per_device_batch,
                   seq_len=shape.seq_len or preset.seq_len)


def published(preset):
    """The preset at its published size: tiny presets are defined by their overrides, full ones are not."""
    return preset if preset.name.endswith("-tiny") else replace(preset, config_overrides=())


def fake_preset_step(shape: Shape, *, measure_memory: bool = True,
                     progress: Callable[[str], None] | None = None) -> tuple[FakeStep, Any]:
    """The step of `shape` (resolved), recorded and measured with fake tensors; and the model config."""
    import torch

    from portlayer.train import presets

    preset = published(presets.get_preset(shape.preset))
    config, _ = presets.build_config(preset, parity=False, config_overrides=dict(shape.overrides),
                                     override_source="--override")
    batch = presets.example_batch(preset, batch_size=shape.batch_size, seq_len=shape.seq_len)

    def make_optimizer(model):
        # foreach: what torch picks for parameters on an accelerator (cuda, xpu and the vendors' device).
        return torch.optim.AdamW(model.parameters(), lr=preset.lr, weight_decay=preset.weight_decay,
                                 foreach=True)

    try:
        step = run_fake_step(lambda: presets.build_model(preset, parity=False, config=config), batch,
                             make_optimizer=make_optimizer, clip_grad_norm=preset.max_grad_norm,
                             precision=shape.precision, ddp=shape.ddp, measure_memory=measure_memory,
                             progress=progress)
    except DataDependentError as exc:
        raise PortlayerError(f"{shape.preset}: {exc}") from None
    return step, config


@dataclass(frozen=True)
class Suggestion:
    option: str  # what to pass, e.g. "--override num_hidden_layers=1"
    memory: int | None  # predicted peak with it, when computed
    fits: bool
    why: str

    def describe(self) -> str:
        predicted = f"{format_bytes(self.memory)}, " if self.memory is not None else ""
        verdict = "fits" if self.fits else "still does not fit"
        return f"{self.option}: {predicted}{verdict} ({self.why})"


def suggestions(shape: Shape, config, memory: Memory, capacity: int,
                measure: Callable[[Shape], Memory]) -> list[Suggestion]:
    """What would bring the step within `capacity`, where portlayer knows: fewer layers, a smaller batch,
    bf16 autocast. `measure(shape)` runs another fake step; each suggestion says how it was found."""
    found = []
    layers = getattr(config, LAYERS, None)
    if isinstance(layers, int) and layers > 1:
        one = measure(replace(shape, overrides={**shape.overrides, LAYERS: 1}))
        per_layer = (memory.total - one.total) / (layers - 1)
        most = layers if per_layer <= 0 else int((capacity - one.total) // per_layer) + 1
        if one.total > capacity:
            found.append(Suggestion(f"--override {LAYERS}=1", one.total, False, "one layer is already too much"))
        else:
            most = max(1, min(most, layers - 1))
            found.append(Suggestion(
                f"--override {LAYERS}={most}", one.total + round(per_layer * (most - 1)), True,
                f"{format_bytes(round(per_layer))} a layer, measured at 1 and {layers} layers"))
    if shape.batch_size > 1:
        one = measure(replace(shape, batch_size=1))
        per_sample = (memory.total - one.total) / (shape.batch_size - 1)
        most = shape.batch_size if per_sample <= 0 else int((capacity - one.total) // per_sample) + 1
        most = max(1, min(most, shape.batch_size - 1))
        predicted = one.total + round(per_sample * (most - 1))
        found.append(Suggestion(f"--batch-size {most}", predicted, predicted <= capacity,
                                f"{format_bytes(round(per_sample))} a sample, measured at 1 and {shape.batch_size}"))
    if shape.precision == "fp32":
        if memory.phase == "optimizer":
            found.append(Suggestion("--precision bf16", None, False,
                                    "would not help: the peak is in the optimizer step, where autocast keeps the "
                                    "fp32 parameters, gradients, AdamW state and DDP buckets as they are"))
        else:
            bf16 = measure(replace(shape, precision="bf16")).total
            found.append(Suggestion("--precision bf16", bf16, bf16 <= capacity, "autocast, measured"))
    return found
