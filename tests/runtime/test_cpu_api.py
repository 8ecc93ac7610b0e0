"""The runtime API on the cpu backend: every name works and does the documented sensible thing."""

import time

import pytest
import torch

import portlayer
from portlayer.api import BOUND

pytestmark = pytest.mark.usefixtures("cpu_backend")


def test_every_api_name_is_bound_on_the_module():
    for name in BOUND:
        # default_generators is torch.cuda's tuple of generators, not a function.
        assert callable(getattr(portlayer, name)) or name == "default_generators", name
    assert set(BOUND) <= set(dir(portlayer))


def test_identity_of_the_backend():
    assert portlayer.backend().name == "cpu"
    assert portlayer.device_type() == "cpu"
    assert portlayer.dist_backend() == "gloo"
    assert portlayer.visible_devices_env() == "CUDA_VISIBLE_DEVICES"
    assert portlayer.device_module() is torch.cpu


def test_device_is_a_real_torch_device_without_index_on_cpu():
    assert portlayer.device() == torch.device("cpu")
    assert portlayer.device(3) == torch.device("cpu")
    assert isinstance(portlayer.device(), torch.device)
    assert torch.ones(1, device=portlayer.device()).device.type == "cpu"


def test_questions_answer_as_torch_cuda_does_without_cuda_while_placement_answers_the_cpu():
    # torch.cuda on a host without CUDA: is_available() False, device_count() 0 (the lead's decision,
    # docs/migrate.md "Meaning"), so a program's own cpu fallback runs.
    assert portlayer.is_available() is False
    assert portlayer.device_count() == 0
    assert portlayer.device_type() == "cpu" and portlayer.device(0) == torch.device("cpu")
    assert portlayer.dist_backend() == "gloo"
    for value in ("cuda", "cuda:0", "cpu", torch.device("cpu"), torch.ones(1), 0, None):
        assert portlayer.is_accelerator(value) is False, value


def test_device_queries_answer_like_torch_cuda_does():
    assert portlayer.current_device() == 0
    portlayer.set_device(0)
    portlayer.synchronize()
    assert portlayer.get_device_name()
    assert portlayer.get_device_capability() == (0, 0)
    assert portlayer.get_device_properties().total_memory > 0
    assert portlayer.is_bf16_supported() is True


def test_ddp_device_ids_are_none_on_cpu_as_ddp_requires():
    assert portlayer.ddp_device_ids(0) is None
    assert portlayer.ddp_device_ids(torch.device("cpu")) is None


def test_rng_calls_seed_the_generator_the_device_uses():
    portlayer.manual_seed(123)
    first = torch.rand(4, device=portlayer.device())
    portlayer.manual_seed_all(123)
    assert torch.equal(first, torch.rand(4, device=portlayer.device()))
    assert portlayer.initial_seed() == 123
    state = portlayer.get_rng_state()
    again = torch.rand(4)
    portlayer.set_rng_state(state)
    assert torch.equal(again, torch.rand(4))
    assert isinstance(portlayer.seed(), int)


def test_memory_statistics_are_zero_and_host_memory_is_reported():
    assert portlayer.memory_allocated() == 0
    assert portlayer.max_memory_allocated(portlayer.device()) == 0
    assert portlayer.memory_reserved() == portlayer.max_memory_reserved() == 0
    portlayer.reset_peak_memory_stats()
    portlayer.empty_cache()
    free, total = portlayer.mem_get_info()
    assert 0 < free <= total


def test_events_time_work_in_milliseconds():
    start, end = portlayer.Event(enable_timing=True), portlayer.Event(enable_timing=True)
    start.record()
    time.sleep(0.02)
    end.record()
    end.synchronize()
    # Milliseconds: 20 ms of sleep, not 0.02 (seconds) nor 20,000 (microseconds), however late a busy machine
    # wakes the sleeper.
    assert 15 <= start.elapsed_time(end) < 10_000


def test_event_without_timing_refuses_to_time_like_cuda():
    start, end = portlayer.Event(), portlayer.Event()
    start.record()
    end.record()
    with pytest.raises(RuntimeError, match="enable_timing"):
        start.elapsed_time(end)


def test_streams_are_usable_ordering_handles():
    side = portlayer.Stream()
    side.wait_stream(portlayer.current_stream())
    with portlayer.stream(side):
        result = torch.ones(2) * 2
    portlayer.default_stream().synchronize()
    assert side.query() is True
    assert torch.equal(result, torch.full((2,), 2.0))


def test_autocast_runs_matmul_in_the_requested_dtype_on_the_device():
    a = torch.randn(8, 8, device=portlayer.device())
    with portlayer.autocast(dtype=torch.bfloat16):
        assert (a @ a).dtype == torch.bfloat16
    with portlayer.autocast(enabled=False):
        assert (a @ a).dtype == torch.float32
    assert isinstance(portlayer.autocast(), torch.autocast)


def test_autocast_works_as_a_decorator():
    @portlayer.autocast(dtype=torch.bfloat16)
    def product(x):
        return x @ x

    assert product(torch.randn(4, 4)).dtype == torch.bfloat16


def test_grad_scaler_scales_and_steps_on_the_device():
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = portlayer.GradScaler(init_scale=8.0)
    before = model.weight.detach().clone()
    loss = model(torch.ones(2, 4)).sum()
    assert scaler.scale(loss).item() == pytest.approx(8 * loss.item())
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    assert not torch.equal(before, model.weight)
    assert isinstance(scaler, torch.amp.GradScaler)


def test_set_deterministic_switches_torch_and_back():
    try:
        portlayer.set_deterministic(True)
        assert torch.are_deterministic_algorithms_enabled()
    finally:
        portlayer.set_deterministic(False)
    assert not torch.are_deterministic_algorithms_enabled()


def test_after_binding_the_package_drops_its_lazy_getattr():
    # CPython specialises attribute lookups only on modules without __getattr__: once every name is
    # bound, `portlayer.synchronize` must be a plain module attribute hit.
    import portlayer as package

    assert "__getattr__" not in vars(package)
    # The drop-in's patching names are the package's own functions, not names bound from the drop-in.
    assert {"patch", "unpatch", "patched"} <= set(vars(package))


def test_activating_the_active_backend_again_keeps_every_bound_function():
    before = {name: getattr(portlayer, name) for name in BOUND}
    portlayer.activate("cpu")
    assert {name: getattr(portlayer, name) for name in BOUND} == before
    assert all(getattr(portlayer, name) is function for name, function in before.items())


def test_set_deterministic_turns_it_on_by_default_and_off_on_request():
    try:
        portlayer.set_deterministic()
        assert torch.are_deterministic_algorithms_enabled()
        assert not torch.is_deterministic_algorithms_warn_only_enabled()
        portlayer.set_deterministic(False)
        assert not torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(False)


def test_a_launcher_can_write_the_visible_devices_variable_on_the_host(monkeypatch):
    # What callers do with the answer: index the environment. On the host it selects nothing, and no
    # alias carries it anywhere.
    from portlayer import environment

    monkeypatch.setenv(portlayer.visible_devices_env(), "0")
    assert portlayer.device(0) == torch.device("cpu")
    assert [alias.target for alias in environment.aliases(portlayer.backend())] == []
