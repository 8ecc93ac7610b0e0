"""The attention rewrites (PL130-PL132), run: a call to flash-attn or xformers is migrated, the migrated code
is executed on the cpu, and its outputs and gradients are held to a reference written from each library's
documented semantics (neither library runs here).

flash-attn, Dao-AILab/flash-attention@0251105a2fb19d2957484b7f023cd8c115286ced:
- flash_attn/flash_attn_interface.py#L1156-L1215 (flash_attn_func's docstring): q (B, Sq, H, D), k/v
  (B, Sk, Hk, D); Q heads h*Hk//H.. share K/V head h // (H // Hk); `softmax_scale` defaults to 1/sqrt(D);
  causal aligned to the bottom right; "If the row of the mask is all zero, the output will be zero";
  window: query i attends to keys [i + Sk - Sq - left, i + Sk - Sq + right], -1 unbounded;
- #L1019-L1060 (qkvpacked: qkv (B, S, 3, H, D)), #L1078 (kvpacked: kv (B, Sk, 2, Hk, D)),
  #L1391-L1450 (varlen: q (total_q, H, D), `cu_seqlens` the sequences' offsets);
- csrc/flash_attn/flash_api.cpp#L427 `if (is_causal) { window_size_right = 0; }`;
- tests/test_flash_attn.py#L217-L300 (attention_ref: dropout keeps a probability and scales by 1/(1-p)).
xformers, facebookresearch/xformers@115df95feecf99f2a7d85ee64650921e0b9207ec:
- xformers/ops/fmha/__init__.py#L199-L240 (memory_efficient_attention's "Equivalent pytorch code":
  [B, M, H, K] in and out, scale 1/sqrt(K), `attn + attn_bias`, softmax, dropout `p`);
- xformers/ops/fmha/attn_bias.py#L118-L160 (LowerTriangularMask materialises `tril(ones, diagonal=0)`:
  top-left aligned).

Tolerance: the reference runs in float64; the migrated code in float32 may differ from it by float32
round-off, which each test measures as the float32 reference's own distance from the float64 one, and
allows 8 times. Measured over the 67 outputs and gradients below: at most 3.6 times (8.4e-7 absolute,
against a round-off of up to 6.8e-7).
"""

import math

import pytest
import torch

from portlayer.migrate.engine import TARGETS, migrate_source


def migrated(source: str, target: str = "torch") -> dict:
    """`source` migrated and executed: its namespace. The libraries are absent here, so running at all
    proves every use was rewritten and their imports removed."""
    result = migrate_source(source, target)
    assert not [d for d in result.diagnostics if d.code in ("PL230", "PL231")], result.diagnostics
    namespace: dict = {}
    exec(compile(result.code, "<migrated>", "exec"), namespace)
    return namespace


def flash_reference(q, k, v, *, causal=False, scale=None, window=(-1, -1)):
    """flash_attn_func as its docstring states it, one (batch, head, query) row at a time."""
    batch, length_q, heads, dim = q.shape
    length_k, heads_k = k.shape[1], k.shape[2]
    scale = 1 / math.sqrt(dim) if scale is None else scale
    left, right = window
    if causal:
        right = 0
    out = torch.zeros_like(q)
    for b in range(batch):
        for h in range(heads):
            group = h // (heads // heads_k)
            for i in range(length_q):
                keys = torch.arange(length_k)
                allowed = torch.ones(length_k, dtype=torch.bool)
                if right >= 0:
                    allowed &= keys <= i + length_k - length_q + right
                if left >= 0:
                    allowed &= keys >= i + length_k - length_q - left
                if not allowed.any():
                    continue  # an empty row gives zeros
                scores = (q[b, i, h] @ k[b, allowed, group].T) * scale
                out[b, i, h] = torch.softmax(scores, -1) @ v[b, allowed, group]
    return out


def close(portable, reference32, reference64):
    """`portable` (float32) is as close to the float64 reference as float32 arithmetic gets there."""
    roundoff = (reference32.double() - reference64).abs().max().item()
    error = (portable.double() - reference64).abs().max().item()
    assert error <= 8 * roundoff + 1e-6, (error, roundoff)


def inputs(*shapes, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator, dtype=torch.float64) for shape in shapes]


def check_forward_and_backward(portable_fn, reference_fn, tensors):
    """Outputs, and gradients of a random projection of them, against the reference in float32 and float64."""
    results = {}
    for name, fn, dtype in (("portable", portable_fn, torch.float32), ("ref32", reference_fn, torch.float32),
                            ("ref64", reference_fn, torch.float64)):
        leaves = [t.detach().to(dtype).clone().requires_grad_() for t in tensors]
        out = fn(*leaves)
        weight = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
        (out * weight.to(dtype)).sum().backward()
        results[name] = (out.detach(), *[leaf.grad for leaf in leaves])
    for portable, ref32, ref64 in zip(results["portable"], results["ref32"], results["ref64"]):
        close(portable, ref32, ref64)


FLASH_CASES = [
    # (Sq, Sk, H, Hk, causal, scale, window)
    (6, 6, 4, 4, False, None, (-1, -1)),
    (6, 6, 4, 4, True, None, (-1, -1)),
    (3, 7, 4, 2, True, None, (-1, -1)),  # bottom-right: query 0 sees keys 0..4
    (7, 3, 4, 1, True, 0.3, (-1, -1)),  # rows 0..3 see no key: zeros; MQA
    (8, 8, 4, 2, False, None, (2, 1)),
    (5, 9, 2, 2, True, None, (3, 0)),
    (9, 5, 2, 1, False, 0.5, (1, -1)),
]


@pytest.mark.parametrize("case", FLASH_CASES, ids=str)
def test_flash_attn_func(case):
    length_q, length_k, heads, heads_k, causal, scale, window = case
    source = (
        "from flash_attn import flash_attn_func\n"
        "def attend(q, k, v):\n"
        f"    return flash_attn_func(q, k, v, softmax_scale={scale}, causal={causal}, window_size={window})\n"
    )
    attend = migrated(source)["attend"]
    q, k, v = inputs((2, length_q, heads, 8), (2, length_k, heads_k, 8), (2, length_k, heads_k, 8))
    check_forward_and_backward(
        attend, lambda q, k, v: flash_reference(q, k, v, causal=causal, scale=scale, window=window), [q, k, v])


def test_bottom_right_differs_from_sdpa_is_causal():
    """The trap itself: with Sq != Sk, SDPA's `is_causal` (top left) is not flash-attn's causal mask."""
    q, k, v = (t.float() for t in inputs((1, 3, 2, 8), (1, 7, 2, 8), (1, 7, 2, 8)))
    top_left = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True).transpose(1, 2)
    assert not torch.allclose(top_left, flash_reference(q, k, v, causal=True), atol=1e-3)


@pytest.mark.parametrize("target", TARGETS)
def test_packed_forms_and_layout(target):
    """qkv- and kv-packed calls; the result keeps flash-attn's (B, S, H, D) layout, contiguous, so the
    caller's `.view(B, S, H * D)` still works; the same code on every target."""
    source = (
        "from flash_attn import flash_attn_qkvpacked_func, flash_attn_kvpacked_func\n"
        "def self_attend(qkv, causal):\n"
        "    out = flash_attn_qkvpacked_func(qkv, 0.0, causal=causal)\n"
        "    return out.view(out.size(0), out.size(1), -1)\n"
        "def cross_attend(q, kv):\n"
        "    return flash_attn_kvpacked_func(q, kv, causal=True)\n"
    )
    namespace = migrated(source, target)
    (qkv,) = inputs((2, 5, 3, 4, 8))
    for causal in (False, True):
        check_forward_and_backward(
            lambda qkv, causal=causal: namespace["self_attend"](qkv, causal),
            lambda qkv, causal=causal: flash_reference(*qkv.unbind(2), causal=causal).flatten(2), [qkv])
    q, kv = inputs((2, 3, 4, 8), (2, 6, 2, 2, 8))
    check_forward_and_backward(namespace["cross_attend"],
                               lambda q, kv: flash_reference(q, *kv.unbind(2), causal=True), [q, kv])


@pytest.mark.parametrize("causal", [False, True])
def test_varlen_attends_within_each_packed_sequence(causal):
    source = (
        "from flash_attn import flash_attn_varlen_func\n"
        "def attend(q, k, v, cu_q, cu_k):\n"
        f"    return flash_attn_varlen_func(q, k, v, cu_q, cu_k, 4, 5, causal={causal})\n"
    )
    attend = migrated(source)["attend"]
    cu_q = torch.tensor([0, 3, 4, 8], dtype=torch.int32)
    cu_k = torch.tensor([0, 5, 7, 10], dtype=torch.int32)
    q, k, v = inputs((8, 4, 8), (10, 2, 8), (10, 2, 8))

    def reference(q, k, v):
        pieces = [flash_reference(q[None, a:b], k[None, c:d], v[None, c:d], causal=causal)[0]
                  for a, b, c, d in zip(cu_q[:-1], cu_q[1:], cu_k[:-1], cu_k[1:])]
        return torch.cat(pieces)

    check_forward_and_backward(lambda q, k, v: attend(q, k, v, cu_q, cu_k), reference, [q, k, v])
    # No attention across a packed boundary: changing the last sequence's keys leaves the first's output.
    q, k, v = (t.float() for t in (q, k, v))
    changed = k.clone()
    changed[7:] += 1
    assert torch.equal(attend(q, k, v, cu_q, cu_k)[:3], attend(q, changed, v, cu_q, cu_k)[:3])


def xformers_reference(q, k, v, *, causal=False, scale=None):
    """memory_efficient_attention's documented "equivalent pytorch code", for [B, M, H, K] inputs."""
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    attn = (q * scale).transpose(1, 2) @ k.transpose(1, 2).transpose(-2, -1)
    if causal:  # LowerTriangularMask: tril(ones, diagonal=0), as -inf outside
        attn = attn.masked_fill(~torch.ones(attn.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
    return (attn.softmax(-1) @ v.transpose(1, 2)).transpose(1, 2).contiguous()


@pytest.mark.parametrize("shape", [(2, 5, 3, 8), (2, 5, 8), (2, 5, 2, 3, 8)], ids=["BMHK", "BMK", "BMGHK"])
def test_xformers_memory_efficient_attention(shape):
    source = (
        "import xformers.ops as xops\n"
        "def causal(q, k, v):\n"
        "    return xops.memory_efficient_attention(q, k, v, attn_bias=xops.LowerTriangularMask())\n"
        "def scaled(q, k, v):\n"
        "    return xops.memory_efficient_attention(q, k, v, None, 0.0, 0.25)\n"
    )
    namespace = migrated(source)

    def reference(q, k, v, **options):
        if q.dim() == 3:  # [B, M, K] is H=1
            return xformers_reference(q[:, :, None], k[:, :, None], v[:, :, None], **options)[:, :, 0]
        if q.dim() == 5:  # [B, M, G, H, K]: the groups are more heads
            flat = [t.flatten(2, 3) for t in (q, k, v)]
            return xformers_reference(*flat, **options).unflatten(2, q.shape[2:4])
        return xformers_reference(q, k, v, **options)

    tensors = inputs(shape, shape, shape)
    check_forward_and_backward(namespace["causal"], lambda *t: reference(*t, causal=True), tensors)
    check_forward_and_backward(namespace["scaled"], lambda *t: reference(*t, scale=0.25), tensors)


def test_dropout_passes_through_and_only_in_training():
    """flash-attn applies `dropout_p` whenever it is non-zero, as SDPA does: the caller's
    `if self.training else 0.0` is kept. Kept probabilities are scaled by 1/(1-p) (attention_ref), so the
    mean over many draws is the output without dropout."""
    source = (
        "import torch\n"
        "from flash_attn import flash_attn_func\n"
        "class Attention(torch.nn.Module):\n"
        "    def forward(self, q, k, v):\n"
        "        return flash_attn_func(q, k, v, 0.5 if self.training else 0.0, causal=True)\n"
    )
    module = migrated(source)["Attention"]()
    q, k, v = (t.float() for t in inputs((1, 4, 2, 8), (1, 4, 2, 8), (1, 4, 2, 8)))
    expected = flash_reference(q, k, v, causal=True)
    module.eval()
    assert torch.allclose(module(q, k, v), expected, atol=1e-6)
    module.train()
    torch.manual_seed(0)
    draws = module(*(t.expand(4000, -1, -1, -1) for t in (q, k, v)))  # 4000 independent draws at once
    assert not torch.allclose(draws[0], expected, atol=1e-3)  # dropout is applied in training
    # The standard error of the mean is below 0.02 here; 0.08 is four of them.
    assert (draws.mean(0) - expected).abs().max() < 0.08


def test_sdp_kernel_choice_keeps_a_kernel_every_device_has():
    source = (
        "import torch\n"
        "def attend(q, k, v, mask):\n"
        "    with torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False, enable_mem_efficient=False):\n"
        "        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask), "
        "torch.backends.cuda.math_sdp_enabled()\n"
    )
    attend = migrated(source)["attend"]
    q, k, v = (t.float() for t in inputs((1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8)))
    mask = torch.ones(4, 4, dtype=torch.bool).tril()
    out, math_enabled = attend(q, k, v, mask)
    assert math_enabled
    expected = torch.softmax((q @ k.transpose(-2, -1) / math.sqrt(8)).masked_fill(~mask, float("-inf")), -1) @ v
    assert torch.allclose(out, expected, atol=1e-5)
