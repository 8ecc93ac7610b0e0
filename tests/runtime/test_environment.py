import pytest

from portlayer import environment
from portlayer.backends import BY_NAME
from portlayer.errors import PortlayerError


def test_cuda_visible_devices_carries_over_to_the_vendor_variable():
    environ = {"CUDA_VISIBLE_DEVICES": "2,3"}
    applied = environment.translate(BY_NAME["npu"], environ)
    assert environ["ASCEND_RT_VISIBLE_DEVICES"] == "2,3"
    assert applied == (
        environment.AppliedVariable("ASCEND_RT_VISIBLE_DEVICES", "2,3", "CUDA_VISIBLE_DEVICES"),
    )


def test_the_vendor_variable_set_by_the_user_wins():
    environ = {"CUDA_VISIBLE_DEVICES": "2,3", "MUSA_VISIBLE_DEVICES": "0"}
    assert environment.translate(BY_NAME["musa"], environ) == ()
    assert environ["MUSA_VISIBLE_DEVICES"] == "0"


def test_nccl_settings_map_to_hccl_with_unit_conversion():
    environ = {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_BUFFSIZE": str(4 * 2**20 + 1), "NCCL_DEBUG": "INFO"}
    environment.translate(BY_NAME["npu"], environ)
    assert environ["HCCL_SOCKET_IFNAME"] == "eth0"
    assert environ["HCCL_BUFFSIZE"] == "5"  # bytes rounded up to MiB
    assert not any(name.startswith("HCCL_DEBUG") for name in environ)


def test_nccl_settings_map_to_mccl_by_prefix():
    environ = {"NCCL_IB_HCA": "mlx5_0", "NCCL_DEBUG": "WARN"}
    environment.translate(BY_NAME["musa"], environ)
    assert environ["MCCL_IB_HCA"] == "mlx5_0"
    assert environ["MCCL_DEBUG"] == "WARN"


def test_cuda_and_cpu_translate_nothing():
    for name in ("cuda", "cpu"):
        environ = {"CUDA_VISIBLE_DEVICES": "1", "NCCL_SOCKET_IFNAME": "eth0"}
        assert environment.translate(BY_NAME[name], environ) == ()
        assert environ == {"CUDA_VISIBLE_DEVICES": "1", "NCCL_SOCKET_IFNAME": "eth0"}


def test_undo_removes_exactly_what_was_set():
    environ = {"CUDA_VISIBLE_DEVICES": "1", "NCCL_SOCKET_IFNAME": "eth0"}
    environment.undo(environment.translate(BY_NAME["npu"], environ), environ)
    assert environ == {"CUDA_VISIBLE_DEVICES": "1", "NCCL_SOCKET_IFNAME": "eth0"}


def test_a_value_that_cannot_be_converted_is_a_one_line_error():
    with pytest.raises(PortlayerError, match="NCCL_BUFFSIZE='4M' cannot be carried over to HCCL_BUFFSIZE"):
        environment.translate(BY_NAME["npu"], {"NCCL_BUFFSIZE": "4M"})
