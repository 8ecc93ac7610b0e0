"""The model presets: published configs (kept in `configs/`, nothing downloaded) and `-tiny` variants.

    model = build_model(get_preset("gpt2-tiny"), seed=0)      # on the cpu, fp32, dropout zeroed
    batch = example_batch(get_preset("gpt2-tiny"))             # a real batch with labels

Tiny presets are the published architecture shrunk to 2 layers of width 64 over the local tokenizer's
2,048-token vocabulary: they train on a cpu in seconds and still move the loss (lr 1e-3, 5 warm-up steps).
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from portlayer import PortlayerError
from portlayer.train.tokenizer import VOCAB_SIZE

CONFIG_DIR = Path(__file__).parent / "configs"

# Config fields that are probabilities of dropping or perturbing activations, across model families:
# resid_pdrop, hidden_dropout_prob, attention_probs_dropout_prob, attention_dropout, layerdrop,
# drop_path_rate, router_jitter_noise, … Matched by name so new model families are covered too.
DROPOUT_FIELD = re.compile(r"(dropout|pdrop|drop_?path|layerdrop|jitter)", re.IGNORECASE)


@dataclass(frozen=True)
class Preset:
    name: str
    task: str  # "causal-lm" | "masked-lm"
    config_file: str  # under configs/
    per_device_batch: int
    seq_len: int
    lr: float
    warmup_steps: int
    # Applied over the published config, as (field, value) pairs.
    config_overrides: tuple[tuple[str, Any], ...] = ()
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    default_steps: int = 30

    @property
    def model_type(self) -> str:
        return base_config_dict(self)["model_type"]


_TINY_WIDTH = {"vocab_size": VOCAB_SIZE}
_TINY = {
    "gpt2": {**_TINY_WIDTH, "n_layer": 2, "n_embd": 64, "n_head": 4, "n_positions": 128, "n_ctx": 128},
    "bert": {
        **_TINY_WIDTH,
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "intermediate_size": 128,
        "max_position_embeddings": 128,
    },
    "mixtral": {
        **_TINY_WIDTH,
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 128,
        "num_local_experts": 4,
        "max_position_embeddings": 128,
        "bos_token_id": 0,
        "eos_token_id": 0,
    },
}


def _tiny(full: Preset, model_type: str, per_device_batch: int) -> Preset:
    return Preset(
        name=f"{full.name}-tiny",
        task=full.task,
        config_file=full.config_file,
        per_device_batch=per_device_batch,
        seq_len=64,
        lr=1e-3,
        warmup_steps=5,
        config_overrides=tuple(_TINY[model_type].items()),
        default_steps=30,
    )


# Published per-device batch sizes: bert-base-uncased 56, gpt2 16, mixtral-8x7B cut to one layer, 1.
_GPT2 = Preset("gpt2", "causal-lm", "gpt2.json", per_device_batch=16, seq_len=1024, lr=6e-4, warmup_steps=10)
_BERT = Preset(
    "bert-base-uncased",
    "masked-lm",
    "bert-base-uncased.json",
    per_device_batch=56,
    seq_len=128,
    lr=1e-4,
    warmup_steps=10,
)
_MIXTRAL = Preset(
    "mixtral-8x7b",
    "causal-lm",
    "mixtral-8x7b.json",
    per_device_batch=1,
    seq_len=1024,
    lr=1e-4,
    warmup_steps=10,
    config_overrides=(("num_hidden_layers", 1),),
)

PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in (
        _GPT2,
        _tiny(_GPT2, "gpt2", per_device_batch=8),
        _BERT,
        _tiny(_BERT, "bert", per_device_batch=8),
        _MIXTRAL,
        _tiny(_MIXTRAL, "mixtral", per_device_batch=4),
    )
}


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise PortlayerError(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}") from None


def base_config_dict(preset: Preset) -> dict:
    with open(CONFIG_DIR / preset.config_file, encoding="utf-8") as source:
        return json.load(source)


def _type_error(field: str, expected: Any, value: Any, source: str) -> str | None:
    """Why `value` cannot replace the config's current `expected` value, or None if it can."""
    if expected is None or value is None:
        return None
    if isinstance(expected, bool) or isinstance(value, bool):
        ok = isinstance(expected, bool) and isinstance(value, bool)
    elif isinstance(expected, float):
        ok = isinstance(value, (int, float)) and math.isfinite(value)
    elif isinstance(expected, int):
        ok = isinstance(value, int)
    else:
        ok = isinstance(value, type(expected))
    if ok:
        return None
    return f"{source}: {field} must be {type(expected).__name__}, got {type(value).__name__} {value!r}"


def apply_overrides(config, overrides: Mapping[str, Any], source: str) -> None:
    """Set config fields, refusing unknown names and values whose type differs from the field's."""
    for field, value in overrides.items():
        if not hasattr(config, field):
            raise PortlayerError(f"{source}: {config.model_type} config has no field {field!r}")
        problem = _type_error(field, getattr(config, field), value, source)
        if problem:
            raise PortlayerError(problem)
        if isinstance(getattr(config, field), float) and isinstance(value, int):
            value = float(value)  # JSON's 1 for a float field: what the user meant, and strict configs insist
        try:
            setattr(config, field, value)
        except (TypeError, ValueError) as exc:  # the config class's own validation
            raise PortlayerError(f"{source}: {field}: {str(exc).splitlines()[-1].strip()}") from None


def read_override_file(path: Path) -> dict:
    """`--override-config FILE.json`: a JSON object of config fields (checked against the config later)."""
    try:
        with open(path, encoding="utf-8") as source:
            overrides = json.load(source)
    except OSError as exc:
        raise PortlayerError(f"--override-config {path}: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PortlayerError(f"--override-config {path}: not valid JSON ({exc})") from None
    if not isinstance(overrides, dict):
        raise PortlayerError(f"--override-config {path}: expected a JSON object of config fields")
    return overrides


def zero_dropout(config) -> list[str]:
    """Set every dropout-like numeric field (sub-configs included) to 0; returns their dotted names."""
    found = []

    def visit(cfg, prefix: str) -> None:
        for field, value in sorted(vars(cfg).items()):
            if hasattr(value, "to_dict") and hasattr(value, "model_type"):
                visit(value, f"{prefix}{field}.")
            elif (
                DROPOUT_FIELD.search(field)
                and isinstance(value, (int, float))
                and not isinstance(value, bool)
            ):
                setattr(cfg, field, 0.0 if isinstance(value, float) else 0)
                found.append(prefix + field)

    visit(config, "")
    return found


# What parity mode's dropout-off cannot reach through the config: some model code calls
# `nn.functional.dropout(x, p=0.1, training=self.training)` with `p` written in the source. Inside
# `functional_dropout_off()` torch's functional dropouts (which `nn.Dropout` modules call too) return their
# input unchanged; the patch is process-wide while the block runs and undone on exit, and the trainer holds
# it for the whole parity run.
_FUNCTIONAL_DROPOUTS = ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout")


def _identity(input, *args, **kwargs):
    return input


@contextlib.contextmanager
def functional_dropout_off():
    import torch.nn.functional as F  # here, not at the top: the presets' names load without torch

    saved = {name: getattr(F, name) for name in _FUNCTIONAL_DROPOUTS if hasattr(F, name)}
    try:
        for name in saved:
            setattr(F, name, _identity)
        yield
    finally:
        for name, function in saved.items():
            setattr(F, name, function)


def build_config(
    preset: Preset,
    *,
    parity: bool = True,
    config_overrides: Mapping[str, Any] | None = None,
    model_name_or_path: str | None = None,
    trust_remote_code: bool = False,
    override_source: str = "config_overrides",
):
    """The model config and the dropout fields zeroed (empty unless `parity`)."""
    from transformers import AutoConfig

    if model_name_or_path:
        config = AutoConfig.from_pretrained(model_name_or_path, trust_remote_code=trust_remote_code)
    else:
        config_dict = base_config_dict(preset)
        config = AutoConfig.for_model(config_dict.pop("model_type"), **config_dict)
        apply_overrides(config, dict(preset.config_overrides), f"preset {preset.name}")
    apply_overrides(config, dict(config_overrides or {}), override_source)
    zeroed = zero_dropout(config) if parity else []
    return config, zeroed


def attention_implementation(parity: bool) -> str:
    """Eager attention in parity mode (the fused kernels differ by backend), else torch's sdpa without a mask for
    the trainer's whole blocks (reference_train/attention.py); preflight builds the same."""
    from portlayer.train import attention

    return "eager" if parity else attention.registered()


def model_class(task: str):
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

    return AutoModelForCausalLM if task == "causal-lm" else AutoModelForMaskedLM


def build_model(
    preset: Preset,
    *,
    seed: int = 0,
    parity: bool = True,
    config_overrides: Mapping[str, Any] | None = None,
    model_name_or_path: str | None = None,
    trust_remote_code: bool = False,
    config=None,
    attention: str | None = None,
):
    """The preset's model on the cpu in fp32, initialised from `seed` (or loaded from a checkpoint).

    Initialising on the cpu makes the weights bitwise the same on every backend. Parity mode zeroes the
    dropout fields and uses eager attention: the fused kernels differ by backend and some have no
    deterministic backward. `attention` names another of transformers' attention implementations.
    """
    import torch

    if config is None:
        config, _ = build_config(
            preset,
            parity=parity,
            config_overrides=config_overrides,
            model_name_or_path=model_name_or_path,
            trust_remote_code=trust_remote_code,
        )
    attention = attention or attention_implementation(parity)
    torch.manual_seed(seed)
    with torch.device("cpu"):
        if model_name_or_path:
            model = model_class(preset.task).from_pretrained(
                model_name_or_path,
                config=config,
                dtype=torch.float32,
                attn_implementation=attention,
                trust_remote_code=trust_remote_code,
            )
        else:
            model = model_class(preset.task).from_config(
                config,
                dtype=torch.float32,
                attn_implementation=attention,
                trust_remote_code=trust_remote_code,
            )
    return model


def example_batch(
    preset: Preset, *, batch_size: int | None = None, seq_len: int | None = None, seed: int = 0
):
    """The first training batch of a run with this preset: real token ids from the local corpus, with labels."""
    from portlayer.train import data

    blocks = data.load_blocks(preset.task, seq_len or preset.seq_len)
    order = data.Order(len(blocks.train), seed)
    return data.train_batch(blocks, order, 0, batch_size or preset.per_device_batch, seed)
