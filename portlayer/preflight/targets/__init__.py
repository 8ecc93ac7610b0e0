"""What the target's own kernels and runtime do differently from the cpu's, one small file per backend.

    target = get_target("cuda")
    target.autocast.policy("softmax.int")        # "fp32_set_opt_dtype": softmax of a bf16 input returns fp32
    target.attention(query, key, value, None, 0.1, False, (9, 0))   # "efficient", "flash" or "math"
    target.blas_workspace((9, 0), deterministic=False)              # bytes per thread

The fake step runs on the cpu, so on its own it takes the cpu's paths: the cpu's autocast op lists, the cpu's
choice of attention kernel (the math path, S×S weights kept, whenever dropout is on), dropout as float32 noise.
A device takes others (`target_kernels` puts these in the cpu's place for the step). Each fact names its
source; docs/preflight.md lists them side by side with the cpu's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from portlayer.preflight.allocator import AllocatorRules

Capability = tuple[int, int] | None  # a CUDA device's compute capability; None where it means nothing


@dataclass(frozen=True)
class AutocastLists:
    """Which ops autocast casts, and how (the policies of ATen/autocast_mode.h, `CastPolicy`)."""

    lower_precision: frozenset  # inputs cast to the 16-bit type
    fp32: frozenset  # inputs cast to float32
    fp32_set_opt_dtype: frozenset  # dtype=float32 unless given (softmax of a bf16 input returns float32)
    promote: frozenset  # inputs cast to the widest floating type among them
    # ops without a dtype argument run through their overload that has one, with float32
    fp32_append_dtype: tuple[tuple[str, str], ...] = (("norm.Scalar", "norm.ScalarOpt_dtype"),
                                                      ("norm.ScalarOpt_dim", "norm.ScalarOpt_dim_dtype"))
    banned: frozenset = frozenset({"binary_cross_entropy"})  # refused under autocast
    source: str = ""

    def policy(self, op: str) -> str | None:
        for name in ("lower_precision", "fp32", "fp32_set_opt_dtype", "promote", "banned"):
            if op in getattr(self, name):
                return name
        return "fp32_append_dtype" if op in dict(self.fp32_append_dtype) else None

    @property
    def ops(self) -> frozenset:
        return (self.lower_precision | self.fp32 | self.fp32_set_opt_dtype | self.promote | self.banned
                | frozenset(dict(self.fp32_append_dtype)))

    def without(self, ops: set, source: str) -> AutocastLists:
        """These lists less `ops`: a vendor's copy of torch's."""
        return AutocastLists(self.lower_precision - ops, self.fp32 - ops, self.fp32_set_opt_dtype - ops,
                             self.promote - ops, self.fp32_append_dtype, self.banned, source)


_UPSAMPLE = frozenset({
    "upsample_nearest1d", "_upsample_nearest_exact1d", "upsample_nearest2d", "_upsample_nearest_exact2d",
    "upsample_nearest3d", "_upsample_nearest_exact3d", "upsample_linear1d", "upsample_bilinear2d",
    "_upsample_bilinear2d_aa", "upsample_trilinear3d", "upsample_bicubic2d", "_upsample_bicubic2d_aa"})

# Registered for AutocastCUDA alone, beside the shared lists (aten/src/ATen/autocast_mode.cpp).
CUDNN_CONVOLUTIONS = frozenset({"cudnn_convolution", "cudnn_convolution_transpose"})
# torch's own lists for CUDA: AT_FORALL_LOWER_PRECISION_FP, AT_FORALL_FP32, AT_FORALL_FP32_SET_OPT_DTYPE and
# AT_FORALL_PROMOTE of ATen/autocast_mode.h, torch 2.13, with cuDNN's convolutions (tests/preflight/test_targets.py
# reads them back from the installed torch's header and dispatcher).
TORCH_AUTOCAST = AutocastLists(
    lower_precision=frozenset({
        "_convolution.deprecated", "_convolution", "conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d",
        "conv_transpose2d.input", "conv_transpose3d.input", "convolution", "prelu", "addmm", "addmv", "addr",
        "matmul", "einsum", "mm", "mv", "linalg_vecdot", "linear", "addbmm", "baddbmm", "bmm", "chain_matmul",
        "linalg_multi_dot", "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell", "lstm_cell", "gru_cell",
        "rnn_tanh_cell", "rnn_relu_cell", "_scaled_dot_product_flash_attention", "scaled_dot_product_attention",
        *CUDNN_CONVOLUTIONS}),
    fp32=frozenset({
        "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal", "rsqrt",
        "sinh", "tan", "pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar", "softplus", "layer_norm",
        "native_layer_norm", "rms_norm", "group_norm", "frobenius_norm.dim", "nuclear_norm", "nuclear_norm.dim",
        "cosine_similarity", "poisson_nll_loss", "cosine_embedding_loss", "nll_loss", "nll_loss2d",
        "hinge_embedding_loss", "kl_div", "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss",
        "margin_ranking_loss", "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss",
        "multi_margin_loss", "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp",
        *_UPSAMPLE}),
    fp32_set_opt_dtype=frozenset({
        "prod", "prod.dim_int", "softmax.int", "log_softmax.int", "cumprod", "cumsum", "linalg_vector_norm",
        "linalg_matrix_norm", "linalg_matrix_norm.str_ord", "sum", "sum.dim_IntList"}),
    promote=frozenset({
        "addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "vdot", "grid_sampler", "index_put",
        "tensordot", "scatter_add"}),
    source="torch 2.13, aten/src/ATen/autocast_mode.h and .cpp (the AT_FORALL_* lists and cuDNN's convolutions, "
           "registered for AutocastCUDA)",
)
# What torch's lists have that the vendors' copies (written against an older torch) lack.
NEWER_THAN_VENDORS = frozenset({"linalg_vecdot", "rms_norm", "vdot", *_UPSAMPLE})


@dataclass(frozen=True)
class FixedCost:
    """Memory the runtime takes outside the caching allocator's tensors, per rank; None where no figure can be
    cited (then it is left out and the report says so)."""

    bytes: int | None
    source: str


# The cpu's and the targets' attention kernels: what `scaled_dot_product_attention` runs.
FLASH, EFFICIENT, MATH = "flash", "efficient", "math"
Attention = Callable[..., str]  # (query, key, value, attn_mask, dropout_p, enable_gqa, capability) -> kernel


@dataclass(frozen=True)
class Target:
    name: str  # the backend
    tool: str  # what shows a device's memory in use
    autocast: AutocastLists
    attention: Attention
    attention_source: str
    blas_workspace: Callable[[Capability, bool], int]  # (capability, deterministic) -> bytes per thread
    blas_workspace_source: str
    allocator: AllocatorRules
    context: FixedCost
    collective: Callable[[int, int], FixedCost]  # (world size, communicators) -> the collective library's buffers
    # torch's dropout takes the fused `native_dropout` (a one-byte mask) on an accelerator:
    # aten/src/ATen/native/Dropout.cpp, is_fused_kernel_acceptable (cuda, xpu, lazy, privateuseone).
    fused_dropout: bool = True
    # Threads that bind a BLAS workspace during a step: the one that runs the forward and the optimizer,
    # and the autograd engine's thread of the device, which runs the backward.
    blas_threads: int = 2


def get_target(backend: str) -> Target:
    """The kernel model of `backend`; cuda's for a backend without one of its own (the answer's `name` says
    which)."""
    from portlayer.preflight.targets import cuda, musa, npu

    targets = {module.TARGET.name: module.TARGET for module in (cuda, npu, musa)}
    return targets.get(backend, targets["cuda"])


def fused_in_16_bit(query, key, value, attn_mask, dropout_p, enable_gqa, capability) -> str:
    """A vendor's fused attention, which takes fp16 and bf16 only (torch_npu's `npu_fusion_attention`),
    saving the output and per-row softmax statistics: modelled as flash attention; the math path otherwise."""
    import torch

    return FLASH if query.dtype in (torch.float16, torch.bfloat16) else MATH
