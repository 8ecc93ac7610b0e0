"""Ops that only show up because the recording ran on the cpu, mapped to the op the model called.

On another backend these calls would take that backend's own path (its fused attention kernel, or the
composite math fallback), so asking whether the target has the cpu kernel would be the wrong question.
"""

CPU_VARIANTS = {
    "aten::_scaled_dot_product_flash_attention_for_cpu": "aten::scaled_dot_product_attention",
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": "aten::scaled_dot_product_attention",
    # Asked by scaled_dot_product_attention to pick the cpu's kernel; a backend answers it for itself.
    "aten::_fused_sdp_choice": "aten::scaled_dot_product_attention",
}


def device_generic(op: str) -> str:
    return CPU_VARIANTS.get(op, op)


# Namespaces of ops that are not compute kernels: record_function's enter and exit (profiler), a fake
# tensor's metadata queries (prim::device), and collectives, which the collective backend (hccl, mccl)
# runs rather than an aten kernel (c10d::broadcast_ of DDP's buffers).
BOOKKEEPING_NAMESPACES = ("profiler::", "prim::", "c10d::")
