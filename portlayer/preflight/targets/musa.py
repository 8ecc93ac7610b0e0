"""Moore Threads GPUs under torch_musa (its sources, cited per fact)."""

from portlayer.preflight.allocator import CACHING_ALLOCATOR
from portlayer.preflight.targets import (
    CUDNN_CONVOLUTIONS,
    NEWER_THAN_VENDORS,
    TORCH_AUTOCAST,
    FixedCost,
    Target,
    fused_in_16_bit,
)


def mccl_buffers(world_size: int, communicators: int) -> FixedCost:
    if world_size == 1:
        return FixedCost(0, "a one-rank communicator has no peer to buffer for")
    return FixedCost(None, "MCCL's buffers have no published size")


TARGET = Target(
    name="musa",
    tool="mthreads-gmi",
    autocast=TORCH_AUTOCAST.without(
        NEWER_THAN_VENDORS | CUDNN_CONVOLUTIONS | {"_convolution.deprecated", "logsumexp"},
        source="torch_musa, torch_musa/csrc/amp/autocast_mode.cpp (AutocastPrivateUse1): torch's lists less "
               "cuDNN's convolutions, _convolution.deprecated, linalg_vecdot, logsumexp, rms_norm, vdot and "
               "upsampling"),
    attention=fused_in_16_bit,
    attention_source="assumed as torch_npu's: a fused kernel in fp16 and bf16, the math path otherwise "
                     "(not verified on a device)",
    blas_workspace=lambda capability, deterministic: 0,
    blas_workspace_source="muBLAS's workspace has no published size: not counted",
    allocator=CACHING_ALLOCATOR,
    context=FixedCost(None, "no published size of MUSA's context"),
    collective=mccl_buffers,
)
