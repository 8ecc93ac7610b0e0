"""Dispatch to npu and musa through fake plugins that register with torch as the real ones do."""

import pytest

from portlayer.api import MIRRORED
from portlayer.backends import BY_NAME

# Calls every mirrored name with recognisable arguments, then prints what the plugin recorded.
CALL_EVERYTHING = """
import json, torch, portlayer
plugin = __import__(portlayer.backend().vendor_module)
portlayer.set_device(1)
portlayer.synchronize(1)
portlayer.manual_seed(11); portlayer.manual_seed_all(12); portlayer.seed(); portlayer.initial_seed()
portlayer.set_rng_state(portlayer.get_rng_state(1), 1)
portlayer.empty_cache()
held = torch.empty(1000, device=portlayer.device(1))  # 4000 bytes, the only tensor on device 1
figures = [portlayer.memory_allocated(1), portlayer.max_memory_allocated(1), portlayer.memory_reserved(1),
           portlayer.max_memory_reserved(1)]
portlayer.reset_peak_memory_stats(1); portlayer.mem_get_info(1)
portlayer.get_device_name(1); portlayer.get_device_properties(1); portlayer.get_device_capability(1)
portlayer.is_bf16_supported(); portlayer.is_available(); portlayer.device_count(); portlayer.current_device()
event = portlayer.Event(enable_timing=True); event.record()
stream = portlayer.Stream(priority=-1)
with portlayer.stream(stream): pass
portlayer.current_stream(); portlayer.default_stream(); portlayer.is_current_stream_capturing()
with portlayer.autocast(dtype=torch.float16):
    autocast_on = torch.is_autocast_enabled(portlayer.device_type())
print(json.dumps({
    "backend": portlayer.backend().as_dict(),
    "calls": [[name, [str(a) for a in args], {k: str(v) for k, v in kwargs.items()}] for name, args, kwargs in plugin.CALLS],
    "figures": figures,
    "device": str(portlayer.device()), "device_2": str(portlayer.device(2)),
    "ddp": portlayer.ddp_device_ids(torch.device(portlayer.device_type(), 1)),
    "ddp_list": portlayer.ddp_device_ids([0, "{}:1".format(portlayer.device_type())]),
    "autocast_on": autocast_on,
    "is_accelerator": [portlayer.is_accelerator(v) for v in (portlayer.device_type() + ":1", "cuda", "cpu",
                       torch.device("cpu"), torch.ones(1), 0)],
    "scaler_device": portlayer.GradScaler()._device,
    "env_at_import": plugin.ENV_AT_IMPORT,
}))
"""

VENDORS = {
    "npu": {"dist": "hccl", "visible": "ASCEND_RT_VISIBLE_DEVICES", "plugin": "torch_npu"},
    "musa": {"dist": "mccl", "visible": "MUSA_VISIBLE_DEVICES", "plugin": "torch_musa"},
}


@pytest.fixture(scope="module", params=sorted(VENDORS))
def vendor_run(request):
    from tests.processes import run_python

    result = run_python(
        CALL_EVERYTHING,
        # The stand-in host has 8 devices; CUDA_VISIBLE_DEVICES=4,5 shows two of them.
        env={
            "PORTLAYER_BACKEND": request.param,
            "CUDA_VISIBLE_DEVICES": "4,5",
            "NCCL_SOCKET_IFNAME": "ib0",
            "FAKE_NPU_DEVICE_COUNT": "8",
            "FAKE_MUSA_DEVICE_COUNT": "8",
            "NCCL_SOCKET_FAMILY": "AF_INET6",
        },
    )
    assert result.returncode == 0, result.stderr
    import json

    return request.param, json.loads(result.stdout.strip().splitlines()[-1])


def test_the_forced_vendor_backend_is_active(vendor_run):
    name, run = vendor_run
    assert run["backend"]["name"] == name
    assert run["backend"]["dist_backend"] == VENDORS[name]["dist"]
    assert run["backend"]["vendor_module"] == VENDORS[name]["plugin"]


def test_every_mirrored_name_reaches_the_vendor_module(vendor_run):
    name, run = vendor_run
    called = {call[0] for call in run["calls"]}
    # Less the names the backend answers itself (npu's get_device_capability: torch_npu returns None).
    answered_by_portlayer = set(BY_NAME[name].overrides) | BY_NAME[name].host_fallbacks
    assert set(MIRRORED) - answered_by_portlayer - called == set()


def test_arguments_pass_through_unchanged(vendor_run):
    _, run = vendor_run
    calls = [(name, args, kwargs) for name, args, kwargs in run["calls"]]
    assert ("set_device", ["1"], {}) in calls
    assert ("synchronize", ["1"], {}) in calls
    assert ("manual_seed", ["11"], {}) in calls
    assert ("manual_seed_all", ["12"], {}) in calls
    assert ("memory_allocated", ["1"], {}) in calls
    assert ("Event", [], {"enable_timing": "True"}) in calls
    assert ("Stream", [], {"priority": "-1"}) in calls
    # The stand-in device counts the bytes it holds and caches nothing: reserved is allocated.
    assert run["figures"] == [4000, 4000, 4000, 4000]


def test_devices_and_ddp_ids_are_of_the_vendor_type(vendor_run):
    name, run = vendor_run
    assert run["device"] == f"{name}:1"  # set_device(1) made 1 current
    assert run["device_2"] == f"{name}:2"
    assert run["ddp"] == [1]
    assert run["ddp_list"] == [0, 1]
    # On an accelerator "is this the accelerator?" answers truthfully; "cuda" is a CUDA script's word for it.
    assert run["is_accelerator"] == [True, True, False, False, False, True]


def test_amp_runs_on_the_vendor_device_type(vendor_run):
    name, run = vendor_run
    assert run["autocast_on"] is True
    assert run["scaler_device"] == name


def test_cuda_visible_devices_is_carried_over_before_the_plugin_loads(vendor_run):
    name, run = vendor_run
    assert run["env_at_import"][VENDORS[name]["visible"]] == "4,5"
    if name == "npu":
        assert run["env_at_import"]["HCCL_SOCKET_IFNAME"] == "ib0"
        assert run["env_at_import"]["HCCL_SOCKET_FAMILY"] == "AF_INET6"
    else:
        assert run["env_at_import"]["MCCL_SOCKET_IFNAME"] == "ib0"


PROBE = """
import json, portlayer
from portlayer import runtime
print(json.dumps({"backend": portlayer.backend().name, "reason": runtime.selection().reason,
                  "probes": [[p.backend, p.available, p.detail] for p in runtime.selection().probes]}))
"""


def test_probing_prefers_a_vendor_plugin_over_cuda_and_stops_at_the_first_with_a_device(in_fresh_process):
    run = in_fresh_process(PROBE)
    assert run["backend"] == "npu"
    assert run["probes"] == [["npu", True, "2 devices"]]
    assert in_fresh_process(PROBE, env={"FAKE_NPU_DEVICE_COUNT": "1"})["probes"] == [["npu", True, "1 device"]]


def test_a_plugin_that_sees_no_device_or_fails_to_load_is_skipped(in_fresh_process):
    # No CUDA device either, which the probe would find next on a GPU host.
    run = in_fresh_process(PROBE, env={"FAKE_NPU_DEVICE_COUNT": "0", "CUDA_VISIBLE_DEVICES": ""})
    assert run["probes"][0] == ["npu", False, "no device visible"]
    # torch has one privateuse1 slot: once torch_npu took it, torch_musa cannot register. The probe
    # reports that and moves on instead of crashing.
    musa = run["probes"][1]
    assert musa[:2] == ["musa", False] and musa[2].startswith("torch_musa failed to load (RuntimeError")
    assert run["backend"] == "cpu"


def test_collective_registered_by_the_plugin_initialises_under_portlayers_name(in_fresh_process):
    run = in_fresh_process(
        """
import json, torch.distributed as dist, portlayer
dist.init_process_group(portlayer.dist_backend(), init_method="tcp://127.0.0.1:29517", rank=0, world_size=1)
print(json.dumps({"backend": dist.get_backend()}))
dist.destroy_process_group()
""",
        env={"PORTLAYER_BACKEND": "musa"},
    )
    assert run["backend"] == "mccl"
