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


# A launch script that sets every variable the README's table names.
NVIDIA_LAUNCH = {
    "CUDA_VISIBLE_DEVICES": "2,3",
    "NCCL_SOCKET_IFNAME": "eth0",
    "NCCL_SOCKET_FAMILY": "AF_INET6",
    "NCCL_BUFFSIZE": "8388608",
    "NCCL_IB_HCA": "mlx5_0",
    "NCCL_IB_DISABLE": "1",
    "NCCL_P2P_DISABLE": "1",
    "NCCL_DEBUG": "INFO",
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
}

# What each backend adds to NVIDIA_LAUNCH: the README's table "CUDA and NCCL variables keep working".
ADDED = {
    "npu": {
        "ASCEND_RT_VISIBLE_DEVICES": "2,3",
        "HCCL_SOCKET_IFNAME": "eth0",
        "HCCL_SOCKET_FAMILY": "AF_INET6",
        "HCCL_BUFFSIZE": "8",  # 8388608 bytes = 8 MiB
        "PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True",
    },
    "musa": {
        "MUSA_VISIBLE_DEVICES": "2,3",
        "MCCL_SOCKET_IFNAME": "eth0",
        "MCCL_SOCKET_FAMILY": "AF_INET6",
        "MCCL_BUFFSIZE": "8388608",
        "MCCL_IB_HCA": "mlx5_0",
        "MCCL_IB_DISABLE": "1",
        "MCCL_P2P_DISABLE": "1",
        "MCCL_DEBUG": "INFO",
        "PYTORCH_MUSA_ALLOC_CONF": "expandable_segments:True",
    },
    "mlu": {"MLU_VISIBLE_DEVICES": "2,3", "CNCL_SOCKET_IFNAME": "eth0"},
    "xpu": {"ZE_AFFINITY_MASK": "2,3"},
    "cuda": {},
    "mps": {},
    "cpu": {},
}


@pytest.mark.parametrize("name", sorted(ADDED))
def test_each_backend_gets_exactly_the_variables_the_readme_lists(name):
    environ = dict(NVIDIA_LAUNCH)
    applied = environment.translate(BY_NAME[name], environ)
    assert environ == {**NVIDIA_LAUNCH, **ADDED[name]}
    assert {variable.target: variable.value for variable in applied} == ADDED[name]
    sources = {variable.target: variable.source for variable in applied}
    for target, source in sources.items():
        assert source.split("_", 1)[1] == target.split("_", 1)[1] or source == "CUDA_VISIBLE_DEVICES" or (
            source == "PYTORCH_CUDA_ALLOC_CONF" and target == f"PYTORCH_{name.upper()}_ALLOC_CONF")


@pytest.mark.parametrize("name", ["npu", "musa"])
def test_allocator_settings_only_cuda_reads_are_not_carried_over(name):
    # torch_musa stops on `backend:cudaMallocAsync`, where it ignores PYTORCH_CUDA_ALLOC_CONF: keep ignoring it.
    environ = {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128,backend:cudaMallocAsync"}
    assert environment.translate(BY_NAME[name], environ) == ()
    assert list(environ) == ["PYTORCH_CUDA_ALLOC_CONF"]


@pytest.mark.parametrize(
    ("nccl_bytes", "hccl_mib"),
    [("1", "1"), ("0", "1"), ("1048576", "1"), ("1048577", "2"), (str(4 * 2**20 + 1), "5")],
)
def test_nccl_buffsize_in_bytes_becomes_hccl_buffsize_in_mib_rounded_up(nccl_bytes, hccl_mib):
    environ = {"NCCL_BUFFSIZE": nccl_bytes}
    environment.translate(BY_NAME["npu"], environ)
    assert environ["HCCL_BUFFSIZE"] == hccl_mib


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
