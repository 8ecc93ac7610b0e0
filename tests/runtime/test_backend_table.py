import re
from pathlib import Path

import pytest

from portlayer.backends import BY_NAME, DIST_BACKEND_BY_DEVICE, IN_TREE, PROBE_ORDER
from portlayer.errors import PortlayerError
from portlayer.selection import select
from tests.accelerator import selected_without_accelerators

EXPECTED = {
    # name: (collective, visible-devices variable, vendor plugin)
    "cuda": ("nccl", "CUDA_VISIBLE_DEVICES", None),
    "npu": ("hccl", "ASCEND_RT_VISIBLE_DEVICES", "torch_npu"),
    "musa": ("mccl", "MUSA_VISIBLE_DEVICES", "torch_musa"),
    "xpu": ("xccl", "ZE_AFFINITY_MASK", None),
    "mlu": ("cncl", "MLU_VISIBLE_DEVICES", "torch_mlu"),
    # Intel Gaudi: accelerate utils/imports.py + utils/launch.py, DeepSpeed accelerator/hpu_accelerator.py.
    "hpu": ("hccl", "HABANA_VISIBLE_MODULES", "habana_frameworks.torch"),
    # Tecorigin: DeepSpeed accelerator/sdaa_accelerator.py + real_accelerator.py, accelerate state.py.
    "sdaa": ("tccl", "SDAA_VISIBLE_DEVICES", "torch_sdaa"),
    # Biren: DeepSpeed accelerator/supa_accelerator.py + real_accelerator.py.
    "supa": ("bccl", "SUPA_VISIBLE_DEVICES", "torch_supa"),
    # No variable selects their devices; a launcher's `env[visible_devices_env()] = …` must still work.
    "mps": ("gloo", "CUDA_VISIBLE_DEVICES", None),
    "cpu": ("gloo", "CUDA_VISIBLE_DEVICES", None),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_backend_has_one_record_with_its_collective_and_variables(name):
    backend = BY_NAME[name]
    assert (backend.dist_backend, backend.visible_devices_env, backend.vendor_module) == EXPECTED[name]
    assert backend.device_type == name
    assert backend.as_dict()["dist_backend"] == EXPECTED[name][0]


def test_the_readme_names_each_records_visible_devices_variable():
    # The README once said "—" for mps and cpu while their records named CUDA_VISIBLE_DEVICES.
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    table = readme.split("### Backends", 1)[1].split("\n\n", 2)[1]
    documented = {}
    for row in table.splitlines()[2:]:
        backend, _plugin, _collective, variable = (cell.strip() for cell in row.strip("|").split("|"))
        documented[backend.split()[0]] = re.match(r"[A-Z_]+", variable).group(0) if variable != "—" else None
    assert documented == {name: BY_NAME[name].visible_devices_env for name in EXPECTED}


def test_the_documented_probe_order_vendor_plugins_first_cpu_last():
    # README "Selection" and portlayer/backends/__init__.py document this order.
    expected = ["npu", "musa", "mlu", "hpu", "sdaa", "supa", "xpu", "cuda", "mps", "cpu"]
    assert [backend.name for backend in IN_TREE] == expected
    # Nothing out of tree is installed in the test environment: the table is the in-tree one.
    assert [backend.name for backend in PROBE_ORDER] == expected


def test_device_to_collective_table_is_not_torchs_per_character_map():
    # torch's register_backend(devices="musa") would map "m", "u", "s", "a"; portlayer's table maps words.
    assert DIST_BACKEND_BY_DEVICE["musa"] == "mccl"
    assert DIST_BACKEND_BY_DEVICE["hpu"] == "hccl" and DIST_BACKEND_BY_DEVICE["supa"] == "bccl"
    assert set(DIST_BACKEND_BY_DEVICE) == set(EXPECTED)


def test_only_cpu_is_not_an_accelerator():
    assert [b.name for b in PROBE_ORDER if not b.is_accelerator] == ["cpu"]


def test_gaudi_registers_its_collective_with_a_module_of_its_own_and_has_a_dispatch_key_of_its_own():
    hpu = BY_NAME["hpu"]
    # accelerate's is_hpu_available(init_hccl=True) imports it before init_process_group("hccl").
    assert hpu.collective_module == "habana_frameworks.torch.distributed.hccl"
    assert hpu.dispatch_key == "HPU"
    assert {BY_NAME[name].dispatch_key for name in ("npu", "musa", "mlu", "sdaa", "supa")} == {"PrivateUse1"}


def test_dtypes_each_vendor_lacks():
    # Gaudi's PyTorch support matrix: Float64 and Complex64 "No"; Ascend and Moore Threads: no float64 units.
    assert sorted(BY_NAME["hpu"].dtype_risks) == ["complex128", "complex64", "float64"]
    assert sorted(BY_NAME["npu"].dtype_risks) == ["complex128", "float64"]
    assert sorted(BY_NAME["musa"].dtype_risks) == ["complex128", "float64"]
    assert BY_NAME["cuda"].dtype_risks == {}


def test_each_vendors_counterpart_of_nvidia_smi():
    assert {name: BY_NAME[name].smi_command for name in ("npu", "musa", "hpu", "cuda")} == {
        "npu": "npu-smi info",
        "musa": "mthreads-gmi",
        "hpu": "hl-smi",
        "cuda": None,
    }


def test_deepspeeds_own_accelerator_for_each_backend():
    # DeepSpeed 0.19.8 accelerator/real_accelerator.py (SUPPORTED_ACCELERATOR_LIST): every backend but musa;
    # tests/strategies check the list against the installed DeepSpeed's.
    named = {backend.name: backend.deepspeed_accelerator for backend in IN_TREE}
    assert named == {name: (None if name == "musa" else name) for name in EXPECTED}


def test_the_variables_a_vendor_stack_reads_from_its_host():
    # DeepSpeed's npu op builders (op_builder/npu/builder.py) read ASCEND_HOME_PATH, which CANN's set_env.sh sets.
    assert {name: dict(BY_NAME[name].required_env) for name in EXPECTED if BY_NAME[name].required_env} == {
        "npu": {"ASCEND_HOME_PATH": "CANN's set_env.sh sets it"}
    }


def test_a_launcher_forwards_the_collectives_and_the_runtimes_variables_where_deepspeed_has_no_accelerator():
    # MCCL_* (the collective's NCCL-like settings) and MUSA_* (the runtime's), as DeepSpeed forwards NCCL_* on cuda.
    assert BY_NAME["musa"].launcher_env_prefixes == ("MCCL", "MUSA")


def test_a_plugin_named_by_a_dotted_module_whose_package_is_missing_is_reported_not_installed():
    # find_spec("habana_frameworks.torch") raises when habana_frameworks itself is missing.
    with pytest.raises(PortlayerError) as error:
        select("hpu")
    assert str(error.value) == (
        "backend 'hpu' needs the habana_frameworks.torch package, which is not installed "
        "(install Intel Gaudi's PyTorch packages (habana_frameworks), on a host with the Gaudi driver)"
    )


def test_every_plugin_is_probed_and_reported_missing_on_a_host_without_accelerators():
    details = {backend: detail for backend, (_, detail) in selected_without_accelerators()["probes"].items()}
    assert details["hpu"] == "habana_frameworks.torch is not installed"
    assert details["sdaa"] == "torch_sdaa is not installed"
    assert details["supa"] == "torch_supa is not installed"
