"""LoRA as peft applies it, for the memory it changes: the base model frozen, two small trainable matrices
beside each attention projection.

`apply_lora(model, r)` matches what `peft.get_peft_model(model, LoraConfig(r=r, lora_alpha=2 * r,
lora_dropout=0.0, target_modules=[...the attention projections...]))` builds: each targeted `nn.Linear`
keeps its frozen weight and adds `lora_A` (in -> r) and `lora_B` (r -> out), both without bias, in the
base layer's dtype; the output is `base(x) + lora_B(lora_A(x)) * alpha / r` (peft's `tuners/lora/layer.py`,
`Linear.forward`, with dropout 0: `nn.Identity`). Only the parameter counts and the tensors the forward
saves matter here, and those are peft's.
"""

from __future__ import annotations

import torch
from torch import nn

from portlayer.errors import PortlayerError

# The attention projections of the HuggingFace families: llama, qwen2, mistral, mixtral, … (q/k/v/o_proj)
# and bert (query/key/value).
ATTENTION_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "query", "key", "value")


class LoraLinear(nn.Module):
    def __init__(self, base: nn.Linear, r: int) -> None:
        super().__init__()
        self.base_layer = base
        self.lora_A = nn.Linear(base.in_features, r, bias=False, dtype=base.weight.dtype, device=base.weight.device)
        self.lora_B = nn.Linear(r, base.out_features, bias=False, dtype=base.weight.dtype,
                                device=base.weight.device)
        nn.init.zeros_(self.lora_B.weight)
        self.scaling = 2.0  # lora_alpha / r with lora_alpha = 2r

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base_layer(x) + self.lora_B(self.lora_A(x)) * self.scaling


def apply_lora(model: nn.Module, r: int) -> int:
    """Freeze `model` and wrap its attention projections with rank-`r` adapters; returns how many."""
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    targets = [(name, module) for name, module in model.named_modules()
               if isinstance(module, nn.Linear) and name.rpartition(".")[2] in ATTENTION_PROJECTIONS]
    if not targets:
        raise PortlayerError(f"--lora-r: no attention projection ({', '.join(ATTENTION_PROJECTIONS)}) in "
                             f"{type(model).__name__}")
    for name, module in targets:
        parent_name, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent_name), child, LoraLinear(module, r))
    return len(targets)
