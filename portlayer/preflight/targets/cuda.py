"""NVIDIA GPUs under torch's CUDA build (torch 2.13's sources, cited per fact)."""

from portlayer.preflight.allocator import CACHING_ALLOCATOR
from portlayer.preflight.targets import EFFICIENT, FLASH, MATH, TORCH_AUTOCAST, FixedCost, Target

MiB = 1 << 20
HOPPER = (9, 0)


def attention(query, key, value, attn_mask, dropout_p, enable_gqa, capability) -> str:
    """The kernel torch's `select_sdp_backend` picks (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp):
    flash attention (or cuDNN's, first on sm90+ with cuDNN 9.15+, which saves the same: the output and a float32
    log-sum-exp per row) for fp16/bf16 without a mask, head dims equal and at most 256, on sm80+; else the
    memory-efficient kernel (any float type, masks too, head dims a multiple of 4 in fp32 and 8 in 16-bit,
    the same number of heads in query and key); else the math path."""
    import torch

    head = query.shape[-1]
    half = query.dtype in (torch.float16, torch.bfloat16)
    sm80 = capability is None or capability >= (8, 0)
    if half and attn_mask is None and sm80 and head == key.shape[-1] == value.shape[-1] <= 256:
        return FLASH
    alignment = 8 if half else 4  # minimum_gemm_alignment on tensor cores
    same_heads = query.shape[-3] == key.shape[-3]
    if head == key.shape[-1] and head % alignment == 0 and value.shape[-1] % alignment == 0 and same_heads:
        return EFFICIENT
    return MATH


def cublas_workspace(capability, deterministic: bool) -> int:
    """What cuBLAS binds to each thread that runs a GEMM, taken from the caching allocator and kept
    (aten/src/ATen/cuda/CublasHandlePool.cpp, `getChosenWorkspaceSize`): CUBLAS_WORKSPACE_CONFIG's size, by
    default ":4096:8" (32 MiB) on sm90 and newer and ":4096:2:16:8" (8 MiB + 128 KiB) before. portlayer's
    deterministic mode (the trainer's --parity) sets ":4096:8" (portlayer/backends/cuda.py)."""
    if deterministic or capability is None or capability >= HOPPER:
        return 8 * 4096 * 1024
    return 2 * 4096 * 1024 + 8 * 16 * 1024


def nccl_buffers(world_size: int, communicators: int) -> FixedCost:
    if world_size == 1:
        return FixedCost(0, "a one-rank communicator has no peer to buffer for")
    return FixedCost(None, "NCCL's buffers (NCCL_BUFFSIZE, 4 MiB per channel and peer for the Simple protocol, "
                           "plus LL and LL128) are allocated outside torch's allocator and depend on the "
                           "topology's channels: docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html")


TARGET = Target(
    name="cuda",
    tool="nvidia-smi",
    autocast=TORCH_AUTOCAST,
    attention=attention,
    attention_source="aten/src/ATen/native/transformers/cuda/sdp_utils.cpp, select_sdp_backend",
    blas_workspace=cublas_workspace,
    blas_workspace_source="aten/src/ATen/cuda/CublasHandlePool.cpp, getChosenWorkspaceSize",
    allocator=CACHING_ALLOCATOR,
    context=FixedCost(None, "CUDA's context has no published size (0.3-0.8 GB by CUDA version, GPU and "
                            "CUDA_MODULE_LOADING, as users report it): read it once with nvidia-smi beside an idle "
                            "process after torch.cuda.init()"),
    collective=nccl_buffers,
)
