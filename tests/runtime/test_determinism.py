import os

import pytest
import torch

from portlayer.backends import BY_NAME
from portlayer.determinism import set_deterministic


@pytest.fixture(autouse=True)
def restore_torch_flags():
    cudnn = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    yield
    torch.use_deterministic_algorithms(False)
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = cudnn


def test_cuda_sets_the_cublas_workspace_and_cudnn_flags(monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    torch.backends.cudnn.benchmark = True
    set_deterministic(BY_NAME["cuda"], True)
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert torch.are_deterministic_algorithms_enabled()
    assert torch.backends.cudnn.deterministic is True
    assert torch.backends.cudnn.benchmark is False


def test_npu_asks_hccl_for_deterministic_reductions(monkeypatch):
    monkeypatch.delenv("HCCL_DETERMINISTIC", raising=False)
    set_deterministic(BY_NAME["npu"], True)
    assert os.environ["HCCL_DETERMINISTIC"] == "true"


def test_a_value_the_user_set_is_kept(monkeypatch):
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
    set_deterministic(BY_NAME["cuda"], True)
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"


def test_warn_only_is_passed_to_torch():
    set_deterministic(BY_NAME["cpu"], True, warn_only=True)
    assert torch.is_deterministic_algorithms_warn_only_enabled()
