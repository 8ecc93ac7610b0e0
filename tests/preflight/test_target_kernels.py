"""The target's kernels on the fake step's cpu tensors: its autocast lists and weight-copy cache, the attention
kernel it picks, its fused dropout; torch's own kernels back on exit."""

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

from portlayer.preflight.target_kernels import TargetKernels
from portlayer.preflight.targets import get_target


class Ops(TorchDispatchMode):
    """The aten ops dispatched, by name (not a fake tensor's metadata queries, nor autograd's detach)."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not func.name().startswith("prim::") and func.name() != "aten::detach":
            self.names.append(func.name())
        return func(*args, **(kwargs or {}))


@pytest.fixture
def fake():
    with FakeTensorMode():
        yield


def test_cudas_autocast_runs_softmax_layer_norm_and_pow_in_fp32_and_matmuls_in_bf16(fake):
    x = torch.randn(4, 16, requires_grad=True)
    weight = torch.nn.Parameter(torch.randn(16, 16))
    with TargetKernels(get_target("cuda")) as kernels, kernels.autocast(torch.bfloat16):
        y = F.linear(x, weight)
        dtypes = (y.dtype, y.softmax(-1).dtype, F.layer_norm(y, (16,)).dtype, y.pow(3).dtype, (y + y).dtype)
    assert dtypes == (torch.bfloat16, torch.float32, torch.float32, torch.float32, torch.bfloat16)


def test_the_cpus_autocast_is_back_after_the_step(fake):
    y = torch.randn(4, 16)
    with TargetKernels(get_target("cuda")):
        pass
    with torch.autocast("cpu", dtype=torch.bfloat16):
        # The cpu's lists: the matmul in bf16, softmax and pow left in the input's type.
        z = y @ y.t()
        assert (z.dtype, z.softmax(-1).dtype, z.pow(3).dtype) == (torch.bfloat16,) * 3


def test_a_weight_is_copied_to_16_bit_once_per_forward_and_let_go_at_its_end(fake):
    weight = torch.nn.Parameter(torch.randn(16, 16))
    x = torch.randn(4, 16)
    with TargetKernels(get_target("cuda")) as kernels:
        with Ops() as ops, kernels.autocast(torch.bfloat16):
            F.linear(x, weight)
            F.linear(x, weight)
        assert ops.names.count("aten::_to_copy") == 1 + 2  # the weight once, the (non-leaf) input each time
        assert kernels._casts == {}


def test_dropout_is_the_fused_kernel_with_a_one_byte_mask(fake):
    x = torch.randn(4, 16, requires_grad=True)
    with TargetKernels(get_target("cuda")), Ops() as ops:
        F.dropout(x, 0.1)
    assert ops.names == ["aten::native_dropout"]  # the cpu: empty_like, bernoulli_, div_, mul (float32 noise)
    with TargetKernels(get_target("cuda")), Ops() as ops:
        F.dropout(x, 0.0)  # drops nothing: aten's own path, the same on every device (a copy)
    assert ops.names == ["aten::clone"]


def test_attention_with_dropout_keeps_no_score_matrix_on_cuda(fake):
    query = torch.randn(2, 4, 256, 16, requires_grad=True)
    with TargetKernels(get_target("cuda"), (9, 0)), Ops() as ops:
        F.scaled_dot_product_attention(query, query, query, dropout_p=0.1, is_causal=True)
    assert ops.names == ["aten::_scaled_dot_product_efficient_attention"]  # fp32: memory-efficient
    with Ops() as ops:  # the cpu's own choice: with dropout, the math path and its S x S weights
        F.scaled_dot_product_attention(query, query, query, dropout_p=0.1, is_causal=True)
    assert "aten::_scaled_dot_product_efficient_attention" not in ops.names
    assert any(name.startswith("aten::_softmax") or name == "aten::_safe_softmax" for name in ops.names)


def test_attention_under_bf16_autocast_is_flash_attention(fake):
    query = torch.randn(2, 4, 256, 16, requires_grad=True)
    with TargetKernels(get_target("cuda"), (9, 0)) as kernels, kernels.autocast(torch.bfloat16), Ops() as ops:
        out = F.scaled_dot_product_attention(query, query, query, is_causal=True)
    assert "aten::_scaled_dot_product_flash_attention" in ops.names and out.dtype == torch.bfloat16
