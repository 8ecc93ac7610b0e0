"""Huawei Ascend under torch_npu (its sources, cited per fact)."""

from portlayer.preflight.allocator import CACHING_ALLOCATOR
from portlayer.preflight.targets import NEWER_THAN_VENDORS, TORCH_AUTOCAST, FixedCost, Target, fused_in_16_bit

# CANN reads HCCL_BUFFSIZE in MB; each communicator holds two buffers of it, one to send and one to receive
# (hiascend.com, CANN 8.0 environment variables, HCCL_BUFFSIZE: default 200).
HCCL_BUFFSIZE = 200 << 20


def hccl_buffers(world_size: int, communicators: int) -> FixedCost:
    if world_size == 1:
        return FixedCost(0, "a one-rank job initialises no HCCL communicator buffers")
    return FixedCost(communicators * 2 * HCCL_BUFFSIZE,
                     f"2 x HCCL_BUFFSIZE (200 MB) for each of {communicators} communicator(s), outside the caching "
                     "allocator (hiascend.com, CANN environment variables, HCCL_BUFFSIZE)")


TARGET = Target(
    name="npu",
    tool="npu-smi",
    autocast=TORCH_AUTOCAST.without(
        NEWER_THAN_VENDORS, source="torch_npu, torch_npu/csrc/aten/AutoCastOps.cpp (AutocastPrivateUse1): torch's lists less "
               "linalg_vecdot, rms_norm, vdot and upsampling"),
    attention=fused_in_16_bit,
    attention_source="torch_npu's fused attention (npu_fusion_attention) takes fp16 and bf16; assumed to serve "
                     "sdpa in those types, the math path otherwise (not verified on a device)",
    blas_workspace=lambda capability, deterministic: 0,
    blas_workspace_source="CANN's operator workspaces come from torch_npu's NPUWorkspaceAllocator, outside the "
                          "caching allocator's statistics, of no published size: not counted",
    allocator=CACHING_ALLOCATOR,
    context=FixedCost(None, "no published size of CANN's context and workspace: read it once with npu-smi beside "
                            "an idle process after torch.npu.init()"),
    collective=hccl_buffers,
)
