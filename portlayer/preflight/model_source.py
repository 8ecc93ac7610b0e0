"""The model a preflight step trains: a preset of the reference trainer, or any HuggingFace `config.json`.

    source = from_config_file("qwen1.5-7b/config.json", batch_size=1, seq_len=2048)
    model = source.build(Training(precision="bf16", lora_r=8), layers=1)   # on the current device or mode

A preset name is the trainer's model (`portlayer.train.presets`: mixtral-8x7b keeps 1 of its 32 layers);
`NAME-published` is a preset at its published size, where the trainer's cuts it (mixtral-8x7b-published: all
32 layers). A config file is read offline (`AutoConfig.from_pretrained` on the file) and built as a masked LM
where its `architectures` says so, else as a causal LM. Either is built as the trainer builds it: torch's sdpa
attention, or under `--parity` eager attention with the dropout fields zeroed (`presets.build_config`,
`presets.attention_implementation`). A config file's batch is token ids drawn from the vocabulary with a
fixed seed, labels equal to the inputs: a causal LM's step does not depend on which tokens they are.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from portlayer.errors import PortlayerError
from portlayer.precision import FP32, PRECISIONS
from portlayer.strategies.layout import Layout

LAYERS = "num_hidden_layers"  # every HuggingFace config answers to it (gpt2 maps it onto n_layer)
DEFAULT_BATCH = 1  # per device, for a config file
DEFAULT_SEQ_LEN = 2048


PUBLISHED = "-published"  # a preset's name with it: the preset at its published size


@dataclass(frozen=True)
class Training:
    """How the model is trained: what preflight predicts per rank for, in the trainer's terms."""

    precision: str = "fp32"  # the trainer's --precision: bf16/fp16 run the forward under autocast to that type
    strategy: str = "ddp"  # a name in portlayer.strategies
    nproc: int = 1  # the world size whose shards are predicted
    lora_r: int | None = None
    gradient_checkpointing: bool = False
    # The weights' and gradients' dtype; 16-bit keeps an fp32 master copy in the optimizer (the ZeRO paper's
    # mixed precision) and runs the forward under autocast to it. The trainer's weights are fp32.
    weights: str = "fp32"
    parity: bool = False  # the trainer's --parity: dropout off, eager attention
    grad_accum: int = 1  # micro-batches per optimizer step (a pipeline's micro-batches)
    layout: Layout = Layout()  # how the model is split over the ranks (--tp, --sp, --pp); data parallel over the rest

    def __post_init__(self) -> None:
        if PRECISIONS[self.weights].autocast and self.precision not in (FP32.name, self.weights):
            raise PortlayerError(f"--weights {self.weights} with --precision {self.precision}: the forward "
                                 f"computes in one 16-bit type (drop --precision, or give the same)")

    @property
    def autocast(self) -> str:
        """The precision the forward runs in: the weights' 16-bit type, else --precision."""
        return self.weights if PRECISIONS[self.weights].autocast else self.precision

    def describe(self) -> str:
        parts = [self.precision if self.weights == FP32.name else f"{self.weights} weights",
                 f"{self.strategy} on {self.nproc} rank{'s' if self.nproc > 1 else ''}"]
        if self.layout.splits:
            parts[-1] += f" ({self.layout.describe()}, {self.layout.data_parallel(self.nproc)} data parallel)"
        if self.grad_accum > 1:
            parts.append(f"{self.grad_accum} micro-batches")
        if self.parity:
            parts.append("parity (eager attention, no dropout)")
        if self.lora_r:
            parts.append(f"LoRA r={self.lora_r}")
        if self.gradient_checkpointing:
            parts.append("gradient checkpointing")
        return ", ".join(parts)


@dataclass(frozen=True)
class ModelSource:
    name: str  # the preset's name or the config file's path
    config: Any  # the HuggingFace config at full size
    model_class: Any  # a transformers Auto class (`from_config`)
    batch: Mapping[str, Any]  # real tensors (their values are kept through the fake step)
    lr: float = 1e-4
    weight_decay: float = 0.01
    max_grad_norm: float | None = 1.0

    @property
    def layers(self) -> int:
        return int(getattr(self.config, LAYERS))

    def build(self, training: Training, layers: int | None = None):
        """The model with `layers` decoder layers (all by default), set up for `training` as the trainer sets
        it up (parity: dropout fields zeroed, eager attention), and with 16-bit weights, LoRA adapters,
        gradient checkpointing."""
        from portlayer.preflight.lora import apply_lora
        from portlayer.train import presets

        config = copy.deepcopy(self.config)  # not from_dict: that validates (and warns) again
        if layers is not None:
            setattr(config, LAYERS, layers)
        if training.parity:
            presets.zero_dropout(config)
        model = self.model_class.from_config(config, dtype=PRECISIONS[training.weights].dtype,
                                             attn_implementation=presets.attention_implementation(training.parity))
        if training.lora_r:
            apply_lora(model, training.lora_r)
        if training.gradient_checkpointing:
            model.config.use_cache = False  # what checkpointing needs (transformers says so when it switches it)
            # Not reentrant: the reentrant form gives no gradient to adapters behind frozen inputs.
            not_reentrant = {"use_reentrant": False}
            if hasattr(model, "activation_checkpointing_enable"):  # its new name; the old one warns where both exist
                model.activation_checkpointing_enable(activation_checkpointing_kwargs=not_reentrant)
            else:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=not_reentrant)
        return model


def preset_names() -> list[str]:
    """What --preset takes: the trainer's presets, and `NAME-published` for each the trainer cuts."""
    from portlayer.train import presets

    names = list(presets.PRESETS)
    return names + [name + PUBLISHED for name, preset in presets.PRESETS.items() if _cut(preset)]


def _cut(preset) -> bool:
    # Tiny presets are defined by their overrides; a full-size preset's are the trainer's own cuts.
    return bool(preset.config_overrides) and not preset.name.endswith("-tiny")


def get_preset(name: str):
    """The trainer's preset of that name; `NAME-published` that preset without the trainer's cuts."""
    from portlayer.train import presets

    base = name.removesuffix(PUBLISHED)
    preset = presets.PRESETS.get(base)
    if preset is None or (name != base and not _cut(preset)):
        raise PortlayerError(f"unknown preset {name!r}; choose from {', '.join(preset_names())}")
    return preset if name == base else replace(preset, name=name, config_overrides=())


def from_preset(name: str, *, batch_size: int | None, seq_len: int | None, overrides: Mapping[str, Any]):
    """A preset, as the trainer builds it; `overrides` sets config fields, as the trainer's --override-config."""
    from portlayer.train import presets

    preset = get_preset(name)
    config, _ = presets.build_config(preset, parity=False, config_overrides=dict(overrides),
                                     override_source="--override")
    batch = presets.example_batch(preset, batch_size=batch_size or preset.per_device_batch,
                                  seq_len=seq_len or preset.seq_len)
    return ModelSource(name, config, presets.model_class(preset.task), batch, preset.lr, preset.weight_decay,
                       preset.max_grad_norm)


def from_config_file(path: str | Path, *, batch_size: int | None, seq_len: int | None,
                     overrides: Mapping[str, Any]) -> ModelSource:
    import torch
    import transformers

    from portlayer.train import presets

    try:
        config = transformers.AutoConfig.from_pretrained(str(path))
    except (OSError, ValueError, KeyError) as exc:
        raise PortlayerError(f"--config {path}: not a HuggingFace config.json ({str(exc).splitlines()[0]})") \
            from None
    presets.apply_overrides(config, dict(overrides), "--override")
    if not hasattr(config, LAYERS) or not hasattr(config, "vocab_size"):
        raise PortlayerError(f"--config {path}: no {LAYERS} or vocab_size: not a transformer language model")
    architecture = (getattr(config, "architectures", None) or ["ForCausalLM"])[0]
    model_class = presets.model_class("masked-lm" if architecture.endswith("ForMaskedLM") else "causal-lm")
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, config.vocab_size, (batch_size or DEFAULT_BATCH, seq_len or DEFAULT_SEQ_LEN),
                        generator=generator)
    return ModelSource(str(path), config, model_class, {"input_ids": ids, "labels": ids.clone()})
