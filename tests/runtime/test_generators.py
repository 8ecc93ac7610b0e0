"""torch.cuda's generator plumbing for the active backend (portlayer/generators.py): `default_generators`,
`init` and `lazy_call`, which RNG trackers such as Megatron-LM's reach into, and the graph-capture question.
On the cpu they are torch's own generator, nothing to start and a call run at once; on a device module they
are its own, read when used."""

from types import SimpleNamespace

import pytest
import torch

import portlayer
from portlayer.backends import BY_NAME
from portlayer.generators import build


@pytest.mark.usefixtures("cpu_backend")
def test_on_the_cpu_the_one_generator_is_torchs_and_a_state_set_through_it_is_the_one_drawn_from():
    assert len(portlayer.default_generators) == 1
    generator = portlayer.default_generators[portlayer.current_device()]
    assert generator is torch.default_generator
    with torch.random.fork_rng(devices=[]):
        state = torch.manual_seed(3).get_state()
        expected = torch.rand(4)
        portlayer.init()
        portlayer.lazy_call(lambda: generator.set_state(state))
        assert torch.equal(torch.rand(4), expected)


@pytest.mark.usefixtures("cpu_backend")
def test_nothing_captures_a_graph_on_the_cpu():
    assert portlayer.is_current_stream_capturing() is False


def test_the_device_modules_tuple_is_read_when_indexed_as_torch_fills_it_only_at_start_up():
    module = SimpleNamespace(default_generators=())
    generators = build(BY_NAME["npu"], module)["default_generators"]
    assert len(generators) == 0
    started = (torch.Generator(), torch.Generator())
    module.default_generators = started  # what torch.cuda's start-up does to its module
    assert len(generators) == 2 and generators[1] is started[1] and list(generators) == list(started)


def test_a_module_that_queues_calls_keeps_its_own_queue_and_one_that_does_not_starts_the_device_first():
    calls = []
    queued = SimpleNamespace(_lazy_init=lambda: calls.append("init"), _lazy_call=lambda f, **kw: calls.append(f))
    api = build(BY_NAME["npu"], queued)
    assert api["lazy_call"] is queued._lazy_call and api["init"] is queued._lazy_init
    eager = SimpleNamespace(init=lambda: calls.append("init"))
    build(BY_NAME["npu"], eager)["lazy_call"](lambda: calls.append("ran"), seed=True)
    assert calls == ["init", "ran"]


def test_an_accelerator_without_generators_has_none_as_torch_cuda_before_start_up():
    assert build(BY_NAME["npu"], SimpleNamespace())["default_generators"] == ()


@pytest.mark.usefixtures("cpu_backend")
def test_the_drop_in_spells_them_as_torch_cuda_does_and_its_lazy_call_runs_where_torch_cudas_would_not():
    import portlayer.torch as dropin

    assert dropin.cuda.default_generators[0] is torch.default_generator
    assert dropin.cuda._lazy_init is portlayer.init and dropin.cuda.init is portlayer.init
    ran = []
    dropin.cuda._lazy_call(lambda: ran.append(True))
    assert ran == [True]
    assert dropin.cuda.is_current_stream_capturing() is False
