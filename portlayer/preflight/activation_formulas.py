"""Activation memory of a transformer layer in closed form: Korthikanti et al., "Reducing Activation Recomputation
in Large Transformer Models" (MLSys 2023, arXiv:2205.05198), section 4.

s sequence length, b micro-batch, h hidden size, a attention heads, t tensor-parallel size, L layers; bytes:

    eq. (1), §4.1    no parallelism                 sbh (34 + 5as/h)
    eq. (2), §4.2.1  tensor parallel                sbh (10 + 24/t + 5as/(ht))
    eq. (3), §4.2.2  tensor and sequence parallel   sbh/t (34 + 5as/h)
    eq. (4), §4.2.3  the first pipeline stage under 1F1B holds p micro-batches of its L/p layers, L layers'
                     worth whatever p:              sbhL/t (34 + 5as/h)   (with sequence parallel)

The paper counts 16-bit activations and 1-byte dropout masks, tensor by tensor (§4.1): per layer, the inputs of
the two layer norms (4sbh), of the QKV and of the first MLP matmul (2sbh each), the two dropout masks after
attention and the MLP (sbh each): 10sbh outside the split matmuls; Q, K and V (6sbh), the output projection's
input (2sbh), the GeLU's input and the second MLP matmul's (8sbh each): 24sbh inside; the softmax output (2as²b),
its dropout mask (as²b) and the dropout's output (2as²b): 5as²b, inside. `layer_bytes` is that count with the
element size, dropout and attention kernel as parameters, so that it can be held to a step that differs from
the paper's only there (fp32 activations; no dropout in parity mode; a fused attention kernel, which saves no
s x s tensor): the paper's equations are its value at the defaults (tested).
"""

from __future__ import annotations

from dataclasses import dataclass

EAGER, FUSED = "eager", "fused"


@dataclass(frozen=True)
class Activations:
    """What a layer's saved tensors are made of: the paper's assumptions by default."""

    element: int = 2  # bytes of an activation (the paper: fp16)
    dropout: bool = True  # 1-byte masks after attention and the MLP, and the attention probabilities' dropout
    attention: str = EAGER  # EAGER: the s x s softmax output kept (and its dropout's); FUSED: none (flash, efficient)


PAPER = Activations()


def layer_bytes(s: int, b: int, h: int, a: int, t: int = 1, sequence_parallel: bool = False,
                saved: Activations = PAPER) -> float:
    """One layer's activations per rank for one micro-batch, counted as the paper's §4.1 counts them."""
    sbh, e = s * b * h, saved.element
    masks = 2 * sbh if saved.dropout else 0  # 1 byte an element
    outside = 2 * e * sbh + 2 * e * sbh + masks  # the layer norms' inputs; QKV's and the MLP's input; masks
    inside = 12 * e * sbh  # Q, K, V; the projection's input; GeLU's input; the second MLP matmul's input
    scores = a * s * s * b
    attention = 0
    if saved.attention == EAGER:
        attention = e * scores + ((1 + e) * scores if saved.dropout else 0)  # softmax; its mask and output
    return outside / (t if sequence_parallel else 1) + (inside + attention) / t


def no_parallelism(s: int, b: int, h: int, a: int) -> float:
    """Eq. (1)."""
    return s * b * h * (34 + 5 * a * s / h)


def tensor_parallel(s: int, b: int, h: int, a: int, t: int) -> float:
    """Eq. (2)."""
    return s * b * h * (10 + 24 / t + 5 * a * s / (h * t))


def sequence_parallel(s: int, b: int, h: int, a: int, t: int) -> float:
    """Eq. (3)."""
    return s * b * h / t * (34 + 5 * a * s / h)


def first_pipeline_stage(s: int, b: int, h: int, a: int, t: int, layers: int) -> float:
    """Eq. (4): under 1F1B the first stage holds `p` micro-batches of `layers / p` layers each."""
    return s * b * h * layers / t * (34 + 5 * a * s / h)
