"""The stand-in npu / musa device behaves as the vendor's does where training code can tell.

One fresh interpreter per vendor (torch's PrivateUse1 slot is renamed once per process) runs the checks
below and prints what it saw. Expected values are worked out by hand: a float32 element is 4 bytes, a
GradScaler multiplies the loss by its scale, and so on.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.example_reference import REPO
from tests.fake_device import VENDORS, environment
from tests.processes import HUNG_S

CHECKS = r"""
import io, json, sys, time
import torch

vendor = sys.argv[1]
plugin = __import__(f"torch_{vendor}")
module = getattr(torch, vendor)
out = {}

# Devices: set_device takes an int, a "npu:1" string and a torch.device; tensors land where asked.
out["count"] = module.device_count()
module.set_device(f"{vendor}:1"); by_string = module.current_device()
module.set_device(torch.device(vendor, 0)); by_device = module.current_device()
module.set_device(1); by_int = module.current_device()
out["set_device"] = [by_string, by_device, by_int]
out["default_placement"] = str(torch.ones(1, device=vendor).device)
try:
    module.set_device("cuda:0")
except ValueError:
    out["wrong_type_refused"] = True
module.set_device(0)

# Memory: the bytes the device holds.
before = module.memory_allocated(0)
held = torch.empty(1024, device=f"{vendor}:0")          # 4096 bytes
after = module.memory_allocated(0)
del held
out["memory"] = [after - before, module.memory_allocated(0) - before, module.max_memory_allocated(0) - before]
module.reset_peak_memory_stats(0)
out["peak_after_reset"] = module.max_memory_allocated(0) - module.memory_allocated(0)
free, total = module.mem_get_info(0)
out["mem_get_info"] = total - free == module.memory_allocated(0)

# RNG: each device has its own generator; seeding and state round trips reproduce the draws.
module.manual_seed(5); first = torch.rand(4, device=vendor)
module.manual_seed(5); again = torch.rand(4, device=vendor)
state = module.get_rng_state(); third = torch.rand(4, device=vendor)
module.set_rng_state(state); fourth = torch.rand(4, device=vendor)
cpu_state = torch.get_rng_state(); torch.rand(4, device=vendor)
out["rng"] = [torch.equal(first, again), torch.equal(third, fourth), torch.equal(cpu_state, torch.get_rng_state())]

# Events time host-synchronous work in milliseconds.
start, end = module.Event(enable_timing=True), module.Event(enable_timing=True)
start.record(); time.sleep(0.05); end.record(); end.synchronize(); module.synchronize()
out["event_ms"] = start.elapsed_time(end)

# Pinned host memory, as the vendors have it: a cpu tensor that reports pinned.
pinned = torch.ones(4).pin_memory()
out["pinned"] = [pinned.device.type, pinned.is_pinned(), torch.ones(4).is_pinned()]
out["pinned_copy"] = pinned.to(vendor, non_blocking=True).sum().item()
loader = torch.utils.data.DataLoader(torch.arange(8.0), batch_size=4, pin_memory=True)
out["loader_pinned"] = all(batch.is_pinned() for batch in loader)

# Autocast: matmuls in the lower precision, softmax kept in fp32, per torch's CUDA lists.
x, w = torch.randn(2, 3, device=vendor), torch.randn(4, 3, device=vendor)
seen = []
for dtype in (torch.bfloat16, torch.float16):
    with torch.autocast(device_type=vendor, dtype=dtype):
        seen += [str(torch.nn.functional.linear(x, w).dtype), str(torch.softmax(x, -1).dtype)]
out["autocast"] = seen
out["amp_dtypes"] = [str(d) for d in module.get_amp_supported_dtype()]

# GradScaler: the loss is scaled by init_scale, unscale_ brings the gradient back, an inf skips the
# step and halves the scale.
weight = torch.nn.Parameter(torch.tensor([1.0, 2.0], device=vendor))
optimizer = torch.optim.SGD([weight], lr=0.5)
scaler = torch.amp.GradScaler(vendor, init_scale=1024.0)
scaler.scale((weight * torch.tensor([3.0, 4.0], device=vendor)).sum()).backward()
scaled = weight.grad.tolist()
scaler.unscale_(optimizer); unscaled = weight.grad.tolist()
scaler.step(optimizer); scaler.update()
optimizer.zero_grad()
(weight * float("inf")).sum().backward()
scaler.step(optimizer); scaler.update()
out["scaler"] = [scaled, unscaled, weight.tolist(), scaler.get_scale()]

# Checkpoints: saved from device 1, loaded where map_location says (or back where they were).
buffer = io.BytesIO()
torch.save({"w": torch.arange(3.0, device=f"{vendor}:1")}, buffer)
placed = []
for location in (None, f"{vendor}:0", "cpu", {f"{vendor}:1": f"{vendor}:0"}):
    buffer.seek(0)
    loaded = torch.load(buffer, map_location=location)["w"]
    placed.append([str(loaded.device), loaded.tolist()])
out["load"] = placed
# Kernels that write into an out= tensor they must first resize (mse_loss does, inside).
a, zeros = torch.arange(4.0, device=vendor).reshape(4, 1), torch.zeros(4, 1, device=vendor)
out["mse_loss"] = torch.nn.functional.mse_loss(a, zeros).item()
grown = torch.empty(0, device=vendor)
torch.add(a, 1, out=grown)
out["out_resized"] = [list(grown.shape), str(grown.device), grown.flatten().tolist()]
# An LSTM steps through the fused cell on an accelerator (aten picks it for privateuse1): same as the cpu.
torch.manual_seed(0)
lstm, inputs = torch.nn.LSTM(4, 8), torch.randn(5, 2, 4)
lstm(inputs)[0].sum().backward()
expected = [p.grad.clone() for p in lstm.parameters()]
lstm.zero_grad()
on_device = lstm.to(vendor)
on_device(inputs.to(vendor))[0].sum().backward()
out["lstm_grad_error"] = max((p.grad.cpu() - e).abs().max().item() for p, e in zip(on_device.parameters(), expected))
print(json.dumps(out))
"""


def run_checks(vendor: str, env: dict | None = None) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", CHECKS, vendor],
        capture_output=True, text=True, env={**environment(vendor), **(env or {})}, cwd=REPO, timeout=HUNG_S,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module", params=sorted(VENDORS))
def device(request, stand_in_device):
    return request.param, run_checks(request.param)


def test_set_device_takes_int_string_and_device(device):
    vendor, seen = device
    assert seen["count"] == 2
    assert seen["set_device"] == [1, 0, 1]
    assert seen["default_placement"] == f"{vendor}:1"  # "npu" alone means the current device
    assert seen["wrong_type_refused"]


def test_memory_statistics_count_the_bytes_the_device_holds(device):
    _, seen = device
    assert seen["memory"] == [4096, 0, 4096]
    assert seen["peak_after_reset"] == 0
    assert seen["mem_get_info"]


def test_rng_is_per_device_and_reproducible(device):
    _, seen = device
    assert seen["rng"] == [True, True, True]


def test_events_time_in_milliseconds(device):
    _, seen = device
    assert 45 <= seen["event_ms"] < 2000


def test_pin_memory_gives_pinned_host_tensors(device):
    _, seen = device
    assert seen["pinned"] == ["cpu", True, False]
    assert seen["pinned_copy"] == 4.0
    assert seen["loader_pinned"]


def test_autocast_lowers_matmuls_and_keeps_softmax_in_fp32(device):
    _, seen = device
    assert seen["autocast"] == ["torch.bfloat16", "torch.float32", "torch.float16", "torch.float32"]
    assert seen["amp_dtypes"] == ["torch.float16", "torch.bfloat16"]


def test_grad_scaler_scales_unscales_and_skips_an_inf_step(device):
    _, seen = device
    scaled, unscaled, weight, scale = seen["scaler"]
    assert scaled == [3.0 * 1024, 4.0 * 1024]
    assert unscaled == [3.0, 4.0]
    assert weight == [1.0 - 0.5 * 3.0, 2.0 - 0.5 * 4.0]  # the first step ran, the inf step did not
    assert scale == 512.0


def test_torch_load_honours_map_location(device):
    vendor, seen = device
    values = [0.0, 1.0, 2.0]
    assert seen["load"] == [
        [f"{vendor}:1", values],
        [f"{vendor}:0", values],
        ["cpu", values],
        [f"{vendor}:0", values],
    ]


def test_kernels_that_resize_their_out_tensor(device):
    vendor, seen = device
    assert seen["mse_loss"] == (0 + 1 + 4 + 9) / 4
    assert seen["out_resized"] == [[4, 1], f"{vendor}:0", [1.0, 2.0, 3.0, 4.0]]


def test_an_lstm_trains_through_the_fused_cell_as_on_the_cpu(device):
    _, seen = device
    assert seen["lstm_grad_error"] < 1e-5


@pytest.mark.parametrize("vendor", sorted(VENDORS))
def test_the_visible_devices_variable_narrows_the_devices_as_on_the_vendor(vendor, stand_in_device):
    visible = VENDORS[vendor].visible_devices_env
    code = (
        "import json, sys, torch; plugin = __import__(f'torch_{sys.argv[1]}'); m = getattr(torch, sys.argv[1]);"
        "print(json.dumps([m.device_count(), str(torch.ones(1, device=sys.argv[1]).device)]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, vendor],
        capture_output=True, text=True, env={**environment(vendor), visible: "1"}, cwd=REPO, timeout=HUNG_S,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [1, f"{vendor}:0"]


def test_doctor_on_the_stand_in_npu_reports_the_vendor_devices_hccl_and_a_passing_check(stand_in_device):
    result = subprocess.run(
        [sys.executable, "-m", "portlayer", "doctor"],
        capture_output=True, text=True, env=environment("npu"), cwd=REPO, timeout=HUNG_S,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    lines = {line[:13].strip(): line[13:] for line in result.stdout.splitlines()}
    assert lines["backend"] == "npu  (first backend in the probe order that sees a device)"
    assert lines["devices"] == "2: [0] Ascend910B (stand-in), [1] Ascend910B (stand-in)"
    assert lines["vendor"] == "torch_npu 0.0.0+fake"
    assert lines["collective"] == "hccl (available in this torch build)"
    assert lines["check"].startswith("ok: 256x256 matmul on npu:0, max abs error vs host 0.0e+00")
