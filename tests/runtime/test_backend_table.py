import pytest

from portlayer.backends import BY_NAME, DIST_BACKEND_BY_DEVICE, PROBE_ORDER

EXPECTED = {
    # name: (collective, visible-devices variable, vendor plugin)
    "cuda": ("nccl", "CUDA_VISIBLE_DEVICES", None),
    "npu": ("hccl", "ASCEND_RT_VISIBLE_DEVICES", "torch_npu"),
    "musa": ("mccl", "MUSA_VISIBLE_DEVICES", "torch_musa"),
    "xpu": ("xccl", "ZE_AFFINITY_MASK", None),
    "mlu": ("cncl", "MLU_VISIBLE_DEVICES", "torch_mlu"),
    "mps": ("gloo", "CUDA_VISIBLE_DEVICES", None),
    "cpu": ("gloo", "CUDA_VISIBLE_DEVICES", None),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_backend_has_one_record_with_its_collective_and_variables(name):
    backend = BY_NAME[name]
    assert (backend.dist_backend, backend.visible_devices_env, backend.vendor_module) == EXPECTED[name]
    assert backend.device_type == name
    assert backend.as_dict()["dist_backend"] == EXPECTED[name][0]


def test_vendor_plugins_are_probed_before_cuda_and_cpu_comes_last():
    order = [backend.name for backend in PROBE_ORDER]
    assert order.index("npu") < order.index("cuda")
    assert order.index("musa") < order.index("cuda")
    assert order.index("mlu") < order.index("cuda")
    assert order[-1] == "cpu"
    assert sorted(order) == sorted(EXPECTED)


def test_device_to_collective_table_is_not_torchs_per_character_map():
    # torch's register_backend(devices="musa") would map "m", "u", "s", "a"; portlayer's table maps words.
    assert DIST_BACKEND_BY_DEVICE["musa"] == "mccl"
    assert set(DIST_BACKEND_BY_DEVICE) == set(EXPECTED)


def test_only_cpu_is_not_an_accelerator():
    assert [b.name for b in PROBE_ORDER if not b.is_accelerator] == ["cpu"]
