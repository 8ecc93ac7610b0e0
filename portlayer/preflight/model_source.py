"""The model a preflight step trains: a preset of the reference trainer, or any HuggingFace `config.json`.

    source = from_config_file("qwen1.5-7b/config.json", batch_size=1, seq_len=2048)
    model = source.build(Training(precision="bf16", lora_r=8), layers=1)   # on the current device or mode

A config file is read offline (`AutoConfig.from_pretrained` on the file) and built as a masked LM where its
`architectures` says so, else as a causal LM, with torch's sdpa attention, as transformers trains it.
Its batch is token ids drawn from the vocabulary with a fixed seed, labels equal to the inputs: a causal LM's
step does not depend on which tokens they are.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from portlayer.errors import PortlayerError
from portlayer.precision import PRECISIONS

LAYERS = "num_hidden_layers"  # every HuggingFace config answers to it (gpt2 maps it onto n_layer)
DEFAULT_BATCH = 1  # per device, for a config file
DEFAULT_SEQ_LEN = 2048


@dataclass(frozen=True)
class Training:
    """How the model is trained: what preflight predicts per rank for."""

    precision: str = "fp32"  # "bf16"/"fp16": 16-bit weights and autocast, fp32 master weights in the optimizer
    strategy: str = "ddp"  # a name in portlayer.strategies
    nproc: int = 1  # the world size whose shards are predicted
    lora_r: int | None = None
    gradient_checkpointing: bool = False

    def describe(self) -> str:
        parts = [self.precision, f"{self.strategy} on {self.nproc} rank{'s' if self.nproc > 1 else ''}"]
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

    def with_layers(self, layers: int) -> ModelSource:
        config = copy.deepcopy(self.config)  # not from_dict: that validates (and warns) again
        setattr(config, LAYERS, layers)
        return replace(self, config=config)

    def build(self, training: Training, layers: int | None = None):
        """The model with `layers` decoder layers (all by default), set up for `training`: 16-bit weights,
        LoRA adapters, gradient checkpointing."""
        from portlayer.preflight.lora import apply_lora

        source = self if layers is None else self.with_layers(layers)
        dtype = PRECISIONS[training.precision].dtype
        model = source.model_class.from_config(source.config, dtype=dtype, attn_implementation="sdpa")
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


def published(preset):
    """The preset at its published size: tiny presets are defined by their overrides; a full-size preset's
    own overrides are the trainer's choices (its mixtral-8x7b keeps 1 of 32 layers) and are left out."""
    return preset if preset.name.endswith("-tiny") else replace(preset, config_overrides=())


def from_preset(name: str, *, batch_size: int | None, seq_len: int | None, overrides: Mapping[str, Any]):
    """A preset at its published size; `overrides` puts config fields back."""
    from portlayer.train import presets

    preset = published(presets.get_preset(name))
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
