"""Tiny models for the locate tests, and faults that only the device side (dtype < float64) suffers.

A fault defined in the model's own code would hit the float64 oracle too; a wrong device kernel does
not. `on_device_only` reproduces the latter: the module computes `fault` unless it runs in float64.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from transformers import GPT2Config, GPT2LMHeadModel


def tiny_gpt2(seed: int = 0) -> tuple[nn.Module, dict]:
    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=96, n_positions=16, n_embd=32, n_layer=2, n_head=2,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    model = GPT2LMHeadModel(config)
    ids = torch.randint(0, config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(seed))
    return model, {"input_ids": ids, "labels": ids}


class MLPWithLoss(nn.Module):
    """Not a HuggingFace model: a plain module whose forward returns its loss."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.LayerNorm(16), nn.Linear(16, 4))

    def forward(self, x, y):
        return F.mse_loss(self.body(x), y)


def tiny_mlp() -> tuple[nn.Module, tuple]:
    torch.manual_seed(0)
    return MLPWithLoss(), (torch.randn(5, 8), torch.randn(5, 4))


def on_device_only(module: nn.Module, fault) -> nn.Module:
    """Make `module` compute `fault(module, *args)` wherever its first input is not float64."""
    exact = type(module)

    class Faulty(exact):
        def forward(self, x, *args, **kwargs):
            if x.dtype == torch.float64:
                return exact.forward(self, x, *args, **kwargs)
            return fault(self, x, *args, **kwargs)

    Faulty.__name__ = exact.__name__
    module.__class__ = Faulty
    return module


def wrong_eps(ln: nn.LayerNorm, x):
    return F.layer_norm(x, ln.normalized_shape, ln.weight, ln.bias, ln.eps * 100)


def conv1d_in_bf16(conv, x):
    """HF's Conv1D (GPT-2's linear layer) computed in bfloat16 and cast back."""
    out = torch.addmm(conv.bias.bfloat16(), x.reshape(-1, x.size(-1)).bfloat16(), conv.weight.bfloat16())
    return out.to(x.dtype).reshape(*x.shape[:-1], conv.nf)


class _ScaledGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * 1.01


def backward_off_by_one_percent(ln: nn.LayerNorm, x):
    """Exact forward; the gradient passed back to the input is 1% too large."""
    return F.layer_norm(_ScaledGrad.apply(x), ln.normalized_shape, ln.weight, ln.bias, ln.eps)


@pytest.fixture(autouse=True)
def one_thread():
    """These models are tiny: one intra-op thread is fastest, and keeps a shared machine's cores free."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def clean_gpt2():
    """For `--model tests.locate.models:clean_gpt2`."""
    return tiny_gpt2()


def gpt2_with_wrong_eps():
    model, batch = tiny_gpt2()
    on_device_only(model.transformer.h[1].ln_2, wrong_eps)
    return model, batch


def gpt2_with_two_faults():
    """Two faulty modules: locate must name the first one to run (block 0's ln_1), not the later one."""
    model, batch = tiny_gpt2()
    on_device_only(model.transformer.h[0].ln_1, wrong_eps)
    on_device_only(model.transformer.h[1].ln_2, wrong_eps)
    return model, batch
