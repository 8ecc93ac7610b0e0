"""Ops that only show up because of where the recording ran, mapped to the op the model called.

The cpu's own attention kernels, and the kernels `target_kernels` runs to stand for the target's choice (CUDA's
flash and memory-efficient attention also stand for a vendor's fused kernel, torch_npu's
`npu_fusion_attention`): the target answers `scaled_dot_product_attention` with a kernel of its own, so asking
whether it has the stand-in's kernel would be the wrong question.
"""

SDPA = "aten::scaled_dot_product_attention"
DEVICE_VARIANTS = {
    **dict.fromkeys(("aten::_scaled_dot_product_flash_attention_for_cpu",
                     "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
                     "aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_flash_attention_backward",
                     "aten::_scaled_dot_product_efficient_attention",
                     "aten::_scaled_dot_product_efficient_attention_backward"), SDPA),
    # Asked by scaled_dot_product_attention to pick the cpu's kernel; a backend answers it for itself.
    "aten::_fused_sdp_choice": SDPA,
}


def device_generic(op: str) -> str:
    return DEVICE_VARIANTS.get(op, op)


# Namespaces of ops that are not compute kernels: record_function's enter and exit (profiler), a fake
# tensor's metadata queries (prim::device), and collectives, which the collective backend (hccl, mccl)
# runs rather than an aten kernel (c10d::broadcast_ of DDP's buffers; tensor parallel's functional
# all-reduces and their waits, _c10d_functional::). The recording lists the collectives apart.
BOOKKEEPING_NAMESPACES = ("profiler::", "prim::", "c10d::", "_c10d_functional::")
