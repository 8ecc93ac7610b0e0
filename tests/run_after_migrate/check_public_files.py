"""Run the migrated public files (public/, copied beside this script) on the target's device (the cpu, or
the stand-in npu/musa): their attention and norm code paths train a step or three and agree with plain torch
written from the same definition.

Run by test_public_library_files.py in a process of its own, with the target's environment, as
`check_public_files.py DEVICE_TYPE FILE...`; prints `loss <value>` lines and `ok <file>` per file, and fails
with a traceback otherwise.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent


def load(relative: str):
    spec = importlib.util.spec_from_file_location(relative.replace("/", "_")[:-3], HERE / relative)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def attention(q, k, v, causal=False):
    """Softmax attention over (B, H, S, D), the definition both libraries implement."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if causal:
        scores = scores.masked_fill(~torch.ones(scores.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
    return scores.softmax(-1) @ v


def train(module: torch.nn.Module, inputs: torch.Tensor, steps: int = 3) -> None:
    """A few SGD steps of a regression through `module`: its code path runs forward and backward."""
    optimizer = torch.optim.SGD(module.parameters(), lr=0.1)
    target = torch.randn_like(inputs)
    for _ in range(steps):
        loss = torch.nn.functional.mse_loss(module(inputs), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"loss {loss.item():.6f}")
        assert math.isfinite(loss.item())


def dinov2() -> None:
    module = load("dinov2/attention.py")
    assert module.XFORMERS_AVAILABLE is False  # the program's own fallback runs
    torch.manual_seed(0)
    block = module.MemEffAttention(dim=16, num_heads=4, qkv_bias=True)
    x = torch.randn(2, 5, 16)
    q, k, v = block.qkv(x).reshape(2, 5, 3, 4, 4).permute(2, 0, 3, 1, 4)
    expected = block.proj(attention(q, k, v).transpose(1, 2).reshape(2, 5, 16))
    assert torch.allclose(block(x), expected, atol=1e-5)
    train(block, x)


def wan() -> None:
    module = load("wan2_1/attention.py")
    assert not (module.FLASH_ATTN_2_AVAILABLE or module.FLASH_ATTN_3_AVAILABLE)
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 6, 4, 8, requires_grad=True) for _ in range(3))
    out = module.attention(q, k, v, causal=True, dtype=torch.float32)
    expected = attention(*(t.transpose(1, 2) for t in (q, k, v)), causal=True).transpose(1, 2)
    assert out.shape == (2, 6, 4, 8) and torch.allclose(out, expected, atol=1e-5)
    out.square().sum().backward()
    assert all(t.grad is not None and t.grad.isfinite().all() for t in (q, k, v))

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = torch.nn.Linear(32, 96)

        def forward(self, x):
            q, k, v = self.qkv(x).unflatten(-1, (3, 4, 8)).unbind(2)
            return module.attention(q, k, v, causal=True, dtype=torch.float32).flatten(2)

    train(Block(), torch.randn(2, 6, 32))


def fairseq() -> None:
    module = load("fairseq/layer_norm.py")
    assert module.has_fused_layernorm is False
    norm = module.LayerNorm(16)
    assert type(norm) is torch.nn.LayerNorm  # the program's own choice without apex
    x = torch.randn(3, 16)
    assert torch.allclose(module.Fp32LayerNorm(16)(x), norm(x), atol=1e-6)
    train(norm, x)


if __name__ == "__main__":
    device_type, names = sys.argv[1], sys.argv[2:]
    if device_type != "cpu":
        from portlayer.backends import BY_NAME

        importlib.import_module(BY_NAME[device_type].vendor_module)  # registers the device, as a port does
    # Every tensor and module the checks make, and the files' own, live on the device.
    torch.set_default_device(device_type)
    for name in names:
        globals()[name]()
        print(f"ok {name}")
