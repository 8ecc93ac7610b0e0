"""The targets' kernel models: autocast lists read back from the installed torch, the attention kernel CUDA
picks, the BLAS workspaces, the runtime's fixed costs."""

import re
from pathlib import Path

import pytest
import torch

from portlayer.preflight.targets import CUDNN_CONVOLUTIONS, EFFICIENT, FLASH, MATH, TORCH_AUTOCAST, get_target
from portlayer.preflight.targets.cuda import cublas_workspace

MiB = 1 << 20
HEADER = Path(torch.__file__).parent / "include" / "ATen" / "autocast_mode.h"
# TORCH_AUTOCAST is torch 2.13's lists, the pinned torch's: read back from the installed torch where it is that one.
# Another torch has other lists (torch 2.11, a GPU host's on 2026-11-27: no rms_norm among the fp32 ops, the
# Dimname overloads of softmax, cumsum, prod and sum still listed), which the lists do not claim to be.
LISTS_OF = (2, 13)
OF_THE_INSTALLED_TORCH = pytest.mark.skipif(
    not LISTS_OF <= torch.__version__ < (LISTS_OF[0], LISTS_OF[1] + 1),
    reason=f"torch {'.'.join(map(str, LISTS_OF))}'s autocast lists, read back from that torch; this is {torch.__version__}",
)
# Registered for AutocastCUDA by a build with cuDNN alone (aten/src/ATen/native/cudnn/AutocastRNN.cpp; seen on
# torch 2.11+cu130, absent from the cpu wheel): cuDNN's RNN, which the fake step never reaches (it runs the cpu's).
CUDNN_RNN = {"_cudnn_rnn"}


def test_the_lists_say_which_torch_they_are():
    assert TORCH_AUTOCAST.source.startswith(f"torch {'.'.join(map(str, LISTS_OF))}, ")


def header_list(macro: str) -> set[str]:
    """The ops a `#define AT_FORALL_…(_)` list of the installed torch's autocast header names."""
    body = re.search(rf"#define {macro}\(_\)(.*?)\n\n", HEADER.read_text(), re.S).group(1)
    return {".".join(part.strip() for part in entry.split(",")) for entry in re.findall(r"_\(([^()]*)\)", body)}


@pytest.mark.parametrize(("macro", "policy"), [
    ("AT_FORALL_LOWER_PRECISION_FP", "lower_precision"),
    ("AT_FORALL_FP32", "fp32"),
    ("AT_FORALL_FP32_SET_OPT_DTYPE", "fp32_set_opt_dtype"),
    ("AT_FORALL_PROMOTE", "promote"),
])  # fmt: skip
@OF_THE_INSTALLED_TORCH
def test_torchs_lists_are_the_installed_torchs(macro, policy):
    cuda_only = CUDNN_CONVOLUTIONS if policy == "lower_precision" else set()
    assert header_list(macro) | cuda_only == getattr(TORCH_AUTOCAST, policy)


@OF_THE_INSTALLED_TORCH
def test_every_op_cudas_autocast_has_a_kernel_for_is_in_a_list_and_no_other():
    registered = {name.removeprefix("aten::")
                  for name in torch._C._dispatch_get_registrations_for_dispatch_key("AutocastCUDA")}
    assert registered - CUDNN_RNN == TORCH_AUTOCAST.ops


def test_the_cpus_lists_are_not_cudas():
    # What makes the cpu's autocast the wrong model of a device's (docs/preflight.md lists them).
    cpu = {name.removeprefix("aten::")
           for name in torch._C._dispatch_get_registrations_for_dispatch_key("AutocastCPU")}
    for op in ("softmax.int", "log_softmax.int", "layer_norm", "native_layer_norm", "pow.Tensor_Scalar"):
        assert op not in cpu and TORCH_AUTOCAST.policy(op) in ("fp32", "fp32_set_opt_dtype")


@pytest.mark.parametrize("backend", ["npu", "musa"])
def test_the_vendors_keep_the_policies_a_transformers_step_meets(backend):
    lists = get_target(backend).autocast
    assert lists.policy("mm") == lists.policy("addmm") == lists.policy("bmm") == "lower_precision"
    assert lists.policy("softmax.int") == lists.policy("log_softmax.int") == "fp32_set_opt_dtype"
    assert lists.policy("layer_norm") == lists.policy("pow.Tensor_Scalar") == lists.policy("nll_loss") == "fp32"
    assert lists.policy("rms_norm") is None  # newer than their copies of torch's lists
    assert lists.source


def test_a_backend_without_a_model_of_its_own_gets_cudas():
    assert get_target("mlu").name == "cuda" and get_target("npu").name == "npu"


def qkv(dtype=torch.float32, heads=(12, 12), head_dim=64):
    with torch.device("meta"):
        query = torch.empty(2, heads[0], 128, head_dim, dtype=dtype)
        key = torch.empty(2, heads[1], 128, head_dim, dtype=dtype)
    return query, key, key


@pytest.mark.parametrize(("dtype", "mask", "capability", "heads", "head_dim", "kernel"), [
    (torch.bfloat16, None, (9, 0), (12, 12), 64, FLASH),
    (torch.float16, None, (8, 0), (12, 12), 128, FLASH),
    (torch.bfloat16, None, (7, 5), (12, 12), 64, EFFICIENT),  # flash needs sm80
    (torch.bfloat16, "mask", (9, 0), (12, 12), 64, EFFICIENT),  # flash takes no mask
    (torch.bfloat16, None, (9, 0), (12, 12), 512, EFFICIENT),  # flash's head dim is at most 256
    (torch.float32, None, (9, 0), (12, 12), 64, EFFICIENT),  # flash is 16-bit only
    (torch.float32, None, (9, 0), (12, 12), 66, MATH),  # efficient wants a multiple of 4 in fp32
    (torch.float32, None, (9, 0), (32, 8), 64, MATH),  # grouped heads: efficient needs them equal
    (torch.bfloat16, None, (9, 0), (32, 8), 64, FLASH),  # flash takes grouped heads
])  # fmt: skip
def test_cuda_picks_the_attention_kernel_torch_picks(dtype, mask, capability, heads, head_dim, kernel):
    query, key, value = qkv(dtype, heads, head_dim)
    attn_mask = torch.empty(2, 1, 128, 128, dtype=torch.bool, device="meta") if mask else None
    assert get_target("cuda").attention(query, key, value, attn_mask, 0.1, False, capability) == kernel


def test_a_vendors_fused_attention_is_16_bit_only():
    npu = get_target("npu")
    assert npu.attention(*qkv(torch.bfloat16), None, 0.1, False, None) == FLASH
    assert npu.attention(*qkv(torch.float32), None, 0.1, False, None) == MATH


def test_cublas_binds_32_mib_a_thread_from_hopper_on_or_when_deterministic_and_8_mib_before():
    assert cublas_workspace((9, 0), False) == cublas_workspace((10, 0), False) == 32 * MiB
    assert cublas_workspace((8, 0), False) == 2 * 4096 * 1024 + 8 * 16 * 1024
    assert cublas_workspace((8, 0), True) == 32 * MiB  # portlayer's deterministic mode: CUBLAS_WORKSPACE_CONFIG=:4096:8
    assert get_target("npu").blas_workspace((9, 0), False) == 0  # not counted: no published figure


def test_collective_buffers_are_cited_or_left_out():
    npu, cuda = get_target("npu"), get_target("cuda")
    assert npu.collective(1, 2).bytes == cuda.collective(1, 2).bytes == 0
    assert npu.collective(8, 2).bytes == 2 * 2 * 200 * MiB  # 2 x HCCL_BUFFSIZE per communicator
    assert cuda.collective(8, 2).bytes is None and "NCCL_BUFFSIZE" in cuda.collective(8, 2).source
    assert cuda.context.bytes is None and "nvidia-smi" in cuda.context.source
