"""What each CUDA name becomes, per backend (records from the backend table; no plugin needed)."""

import pytest
import torch

from portlayer.backends import BY_NAME
from portlayer.dropin.retarget import Retarget

cpu, xpu, cuda = (Retarget(BY_NAME[name]) for name in ("cpu", "xpu", "cuda"))


@pytest.mark.parametrize(
    "retarget, given, expected",
    [
        (xpu, "cuda", "xpu"),
        (xpu, "cuda:1", "xpu:1"),
        (xpu, torch.device("cuda", 3), torch.device("xpu", 3)),
        (xpu, torch.device("cuda"), torch.device("xpu")),
        (xpu, 2, 2),  # a bare index already means the accelerator
        (xpu, "cpu", "cpu"),
        (xpu, "cudagraph", "cudagraph"),
        (cpu, "cuda:1", "cpu"),
        (cpu, torch.device("cuda", 1), torch.device("cpu")),
        (cpu, 1, torch.device("cpu")),
        (cpu, "meta", "meta"),
        (cuda, "cuda:1", "cuda:1"),
        (cuda, 1, 1),
    ],
)
def test_devices(retarget, given, expected):
    assert retarget.any(given) == expected
    assert retarget.any(retarget.any(given)) == expected


@pytest.mark.parametrize(
    "retarget, given, expected",
    [
        (xpu, "nccl", "xccl"),
        (xpu, "NCCL", "xccl"),
        (xpu, "cpu:gloo,cuda:nccl", "cpu:gloo,xpu:xccl"),
        (cpu, "nccl", "gloo"),
        (cpu, "cpu:gloo,cuda:nccl", "cpu:gloo"),
        (cpu, "gloo", "gloo"),
        (cpu, None, None),
        (xpu, "hccl", "hccl"),
        (cuda, "nccl", "nccl"),
    ],
)
def test_collectives(retarget, given, expected):
    assert retarget.dist_backend(given) == expected


def test_ddp_device_arguments():
    assert cpu.ddp_devices([torch.device("cuda", 0)]) is None and cpu.ddp_devices(0) is None
    assert xpu.ddp_devices([torch.device("cuda", 1)]) == [torch.device("xpu", 1)]
    assert xpu.ddp_devices([1]) == [1] and xpu.ddp_devices("cuda:1") == "xpu:1"
    assert cuda.ddp_devices([0]) == [0]


def test_init_process_group_device_id():
    assert cpu.dist_device(torch.device("cuda", 0)) is None and cpu.dist_device(None) is None
    assert xpu.dist_device(torch.device("cuda", 2)) == torch.device("xpu", 2)


@pytest.mark.parametrize("given, expected", [(None, "xpu"), (1, "xpu:1"), ("cuda:2", "xpu:2")])
def test_dot_cuda_argument(given, expected):
    assert xpu.destination(given) == torch.device(expected)


def test_nothing_to_retarget_on_cuda():
    from portlayer.dropin import torch_names as retargeted

    assert retargeted.names(cuda) == {}
    assert not any(cuda.wants(value) for value in ("cuda:0", torch.device("cuda", 1), 0))
