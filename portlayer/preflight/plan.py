"""The model, batch and training a preflight answers for; a preset's whole step; what would make it fit.

    shape = Shape(config_path="qwen1.5-7b/config.json",
                  training=Training(precision="bf16", strategy="zero3", nproc=4, lora_r=8))
    prediction = predict(shape)          # per_rank.Prediction: memory per rank, the ops recorded
    step, config = fake_preset_step(Shape("mixtral-8x7b", batch_size=1, seq_len=1024))

The model is a preset at its published size (a full-size preset's own config overrides are the trainer's
choices, its mixtral-8x7b keeps 1 of the 32 layers, and are left out here; `overrides` puts them back) or a
HuggingFace config.json. The step is the reference trainer's on a device: AdamW and gradient clipping with
the foreach kernels torch picks on an accelerator (cuda, npu, musa), autocast for bf16/fp16. Not parity
mode: dropout and the fused attention stay as training normally runs them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from portlayer import PortlayerError
from portlayer.preflight.devices import format_bytes
from portlayer.preflight.fake_step import FakeStep, run_fake_step
from portlayer.preflight.model_source import LAYERS, ModelSource, Training, from_config_file, from_preset
from portlayer.preflight.shadow import DataDependentError


@dataclass(frozen=True)
class Shape:
    preset: str | None = None
    batch_size: int | None = None  # None: the preset's published per-device batch, 1 for a config file
    seq_len: int | None = None  # None: the preset's, 2048 for a config file
    overrides: Mapping[str, Any] = field(default_factory=dict)
    training: Training = Training()
    config_path: str | None = None  # a HuggingFace config.json instead of a preset

    @property
    def model(self) -> str:
        return self.config_path or self.preset

    def describe(self, source: ModelSource) -> str:
        batch = next(iter(source.batch.values())).shape
        return (f"{self.model}, batch {batch[0]} x {batch[1]} tokens, {source.layers} layers, "
                f"{self.training.describe()}")


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


def source(shape: Shape) -> ModelSource:
    read = from_config_file if shape.config_path else from_preset
    return read(shape.model, batch_size=shape.batch_size, seq_len=shape.seq_len, overrides=shape.overrides)


def predict(shape: Shape, progress: Callable[[str], None] | None = None, on=None):
    """The peak per rank of `shape`'s step and the ops it dispatches, `on` a target (`per_rank.predict`)."""
    from portlayer.preflight import per_rank

    try:
        return per_rank.predict(source(shape), shape.training, progress, on)
    except DataDependentError as exc:
        raise PortlayerError(f"{shape.model}: {exc}") from None


def fake_preset_step(shape: Shape, *, measure_memory: bool = True) -> tuple[FakeStep, Any]:
    """The whole step of a preset's `shape` as one DDP rank runs it, with fake tensors; and the model
    config (the benchmarks set this against a real step)."""
    model = source(shape)
    training = replace(shape.training, strategy="ddp")
    try:
        step = run_fake_step(lambda: model.build(training), model.batch,
                             make_optimizer=lambda m: _adamw(m, model), clip_grad_norm=model.max_grad_norm,
                             precision=training.autocast, ddp=True, measure_memory=measure_memory,
                             grad_accum=training.grad_accum)
    except DataDependentError as exc:
        raise PortlayerError(f"{shape.model}: {exc}") from None
    return step, model.config


def _adamw(model, source: ModelSource):
    import torch

    return torch.optim.AdamW(model.parameters(), lr=source.lr, weight_decay=source.weight_decay, foreach=True)


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


def suggestions(shape: Shape, layers: int, batch_size: int, memory: int, capacity: int,
                measure: Callable[[Shape], int]) -> list[Suggestion]:
    """What would bring the step within `capacity`, where portlayer knows: fewer layers, a smaller batch,
    gradient checkpointing, a 16-bit forward, 16-bit weights. `measure(shape)` predicts another step's figure
    held against the capacity; each suggestion says how it was found."""
    found = []
    if layers > 1:
        one = measure(replace(shape, overrides={**shape.overrides, LAYERS: 1}))
        per_layer = (memory - one) / (layers - 1)
        most = layers if per_layer <= 0 else int((capacity - one) // per_layer) + 1
        if one > capacity:
            found.append(Suggestion(f"--override {LAYERS}=1", one, False, "one layer is already too much"))
        else:
            most = max(1, min(most, layers - 1))
            found.append(Suggestion(
                f"--override {LAYERS}={most}", one + round(per_layer * (most - 1)), True,
                f"{format_bytes(round(per_layer))} a layer, measured at 1 and {layers} layers"))
    if batch_size > 1:
        one = measure(replace(shape, batch_size=1))
        per_sample = (memory - one) / (batch_size - 1)
        most = batch_size if per_sample <= 0 else int((capacity - one) // per_sample) + 1
        most = max(1, min(most, batch_size - 1))
        predicted = one + round(per_sample * (most - 1))
        found.append(Suggestion(f"--batch-size {most}", predicted, predicted <= capacity,
                                f"{format_bytes(round(per_sample))} a sample, measured at 1 and {batch_size}"))
    if not shape.training.gradient_checkpointing:
        recomputed = measure(replace(shape, training=replace(shape.training, gradient_checkpointing=True)))
        found.append(Suggestion("--gradient-checkpointing", recomputed, recomputed <= capacity,
                                "each layer's activations recomputed in the backward: predicted"))
    training = shape.training
    if training.autocast == "fp32":
        bf16 = measure(replace(shape, training=replace(training, precision="bf16")))
        found.append(Suggestion("--precision bf16", bf16, bf16 <= capacity,
                                "the forward under bf16 autocast, as the trainer runs it: predicted"))
    if training.weights == "fp32":
        bf16 = measure(replace(shape, training=replace(training, precision="fp32", weights="bf16")))
        found.append(Suggestion("--weights bf16", bf16, bf16 <= capacity,
                                "bf16 weights and gradients, fp32 master weights in the optimizer: predicted"))
    return found
