"""`import portlayer.torch as torch` on the cpu backend: a CUDA script's lines run on the host."""

import re
import sys
from types import ModuleType

import pytest
import torch

import portlayer
from portlayer.dropin import cuda_module

CPU = torch.device("cpu")

# The names through which a CUDA script asks for a device (docs/dropin.md): the ones whose docs list a
# `device` argument, the device and stream types, amp, `load`'s map_location, and `cuda` itself.
RETARGETED = {
    *("Event", "Generator", "GradScaler", "Stream", "amp", "autocast", "cuda", "device", "load"),
    *("arange", "as_tensor", "asarray", "bartlett_window", "blackman_window", "empty", "empty_like"),
    *("empty_permuted", "empty_strided", "eye", "from_dlpack", "from_file", "full", "full_like"),
    *("get_device_module", "hamming_window", "hann_window", "kaiser_window", "linspace", "logspace"),
    *("normal", "ones", "ones_like", "rand", "rand_like", "randint", "randint_like", "randn", "randn_like"),
    *("randperm", "range", "scalar_tensor", "set_default_device", "sparse_bsc_tensor", "sparse_bsr_tensor"),
    *("sparse_compressed_tensor", "sparse_coo_tensor", "sparse_csc_tensor", "sparse_csr_tensor", "tensor"),
    *("tril_indices", "triu_indices", "zeros", "zeros_like"),
}


def documents_device(value) -> bool:
    doc = getattr(value, "__doc__", None)
    return isinstance(doc, str) and bool(
        re.search(r"^\s*device \(", doc, re.M) or "device=" in doc.split("\n\n")[0]
    )


def torch_own(held, current) -> bool:
    """Whether the drop-in holds torch's own object for a name. Read with getattr: a submodule torch loaded
    after the drop-in was made (torch._numpy) comes through its __getattr__; and torch may rewrap its own
    function later (importing torch._dynamo wraps torch.manual_seed), which the drop-in then holds unwrapped."""
    return held is current or getattr(current, "__wrapped__", None) is held


def test_is_a_real_module_holding_torchs_namespace(dropin):
    assert isinstance(dropin, ModuleType) and sys.modules["portlayer.torch"] is dropin
    assert dropin.nn is torch.nn and dropin.optim is torch.optim and dropin.distributed is torch.distributed
    assert (
        dropin.float32 is torch.float32
        and dropin.Tensor is torch.Tensor
        and dropin.__version__ == torch.__version__
    )
    from portlayer.torch import nn, no_grad

    assert nn is torch.nn and no_grad is torch.no_grad
    changed = {
        name
        for name, value in vars(torch).items()
        if not name.startswith("__") and not torch_own(getattr(dropin, name), value)
    }
    assert changed == {name for name in RETARGETED if hasattr(torch, name)}


def test_loads_what_torch_loads_lazily(dropin):
    assert dropin._dynamo is torch._dynamo
    with pytest.raises(AttributeError, match="portlayer.torch"):
        getattr(dropin, "no_such_name")  # noqa: B009


def test_every_torch_callable_taking_a_device_is_retargeted(dropin):
    taking_device = {
        name
        for name, value in vars(torch).items()
        if not name.startswith("_")
        and callable(value)
        and not isinstance(value, ModuleType)
        and documents_device(value)
    }
    assert taking_device, "the docstring scan found nothing: it no longer reads torch's docs"
    assert {name for name in taking_device if getattr(dropin, name) is getattr(torch, name)} == set()


def test_device_constructs_real_devices_of_the_active_type(dropin):
    for made in (dropin.device("cuda", 1), dropin.device("cuda:0"), dropin.device("cuda"), dropin.device(0)):
        assert type(made) is torch.device and made == CPU
    assert dropin.device("meta") == torch.device("meta")
    assert isinstance(torch.device("cpu"), dropin.device) and isinstance(dropin.device("cuda"), torch.device)
    assert not isinstance("cuda", dropin.device)


@pytest.mark.parametrize(
    "make",
    [
        lambda t: t.zeros(2, device="cuda:0"),
        lambda t: t.randn(2, 2, device=t.device("cuda", 1)),
        lambda t: t.arange(3, device="cuda"),
        lambda t: t.tensor([1.0], device="cuda"),
        lambda t: t.ones(1).cuda(),
        lambda t: t.ones(1).cuda(1),
        lambda t: t.ones(1).to("cuda:0"),
        lambda t: t.ones(1).to(device="cuda"),
        lambda t: t.ones(1).to(0),
        lambda t: t.ones(1).to("cuda", t.float64),
        lambda t: next(t.nn.Linear(2, 2).cuda().parameters()),
        lambda t: next(t.nn.Linear(2, 2).to("cuda:0").parameters()),
    ],
)
def test_cuda_devices_land_on_the_host(dropin, make):
    assert make(dropin).device == CPU


def test_generator_on_cuda_is_a_host_generator(dropin):
    generator = dropin.Generator(device="cuda")
    assert (
        generator.device == CPU
        and isinstance(generator, torch.Generator)
        and isinstance(generator, dropin.Generator)
    )


def test_default_device_cuda(dropin):
    dropin.set_default_device("cuda:0")
    try:
        assert torch.empty(1).device == CPU
    finally:
        torch.set_default_device(None)
        # torch 2.6 keeps None where get_default_device then looks for a device (fixed in 2.7): the worker's later
        # tests would fail there. Forgetting the setting, as a new thread has none, is the state before, on any torch.
        vars(torch._GLOBAL_DEVICE_CONTEXT).pop("device_context", None)


def test_torch_cuda_answers_for_the_active_backend_and_torch_cuda_still_tells_the_truth(dropin):
    assert dropin.cuda is not torch.cuda
    for name in portlayer.api.MIRRORED:
        ours = getattr(dropin.cuda, name)
        # Those taking a device first retarget the script's CUDA names before calling portlayer's.
        assert (ours.__wrapped__ if name in cuda_module.DEVICE_FIRST else ours) is getattr(portlayer, name)
    # On the cpu backend the questions answer as torch.cuda's do without CUDA; placement answers the cpu.
    assert not dropin.cuda.is_available() and dropin.cuda.device_count() == 0
    assert dropin.cuda.current_device() == 0
    dropin.cuda.set_device(dropin.device("cuda", 0))
    dropin.cuda.synchronize()
    with dropin.cuda.device(0):
        pass
    # Names portlayer and torch.cpu lack come from the real torch.cuda, which answers about CUDA.
    assert dropin.cuda.get_arch_list is torch.cuda.get_arch_list
    assert repr(dropin.cuda) == "<module 'portlayer.torch.cuda'>"


def test_amp_runs_on_the_host(dropin):
    a, b = torch.randn(2, 2), torch.randn(2, 2)
    with dropin.autocast("cuda", dtype=torch.bfloat16):
        assert torch.mm(a, b).dtype == torch.bfloat16
    with dropin.amp.autocast(device_type="cuda", dtype=torch.bfloat16):
        assert torch.mm(a, b).dtype == torch.bfloat16
    with dropin.cuda.amp.autocast(dtype=torch.bfloat16):
        assert torch.mm(a, b).dtype == torch.bfloat16
    assert isinstance(dropin.autocast("cuda"), torch.autocast)
    for scaler in (dropin.amp.GradScaler(), dropin.GradScaler("cuda"), dropin.cuda.amp.GradScaler()):
        assert isinstance(scaler, torch.amp.GradScaler) and scaler._device == "cpu"


@pytest.fixture
def cuda_checkpoint(tmp_path, monkeypatch):
    """A checkpoint whose storages are tagged cuda:0, as one saved on an NVIDIA machine is."""
    path = tmp_path / "cuda.pt"
    with monkeypatch.context() as patch:
        patch.setattr(torch.serialization, "location_tag", lambda storage: "cuda:0")
        torch.save({"weight": torch.arange(4.0)}, path)
    return path


def test_load_maps_cuda_checkpoints_to_the_host(dropin, cuda_checkpoint):
    # Plain torch puts the storages back on CUDA: on a GPU host there, elsewhere an error.
    if torch.cuda.is_available():
        assert torch.load(cuda_checkpoint)["weight"].device.type == "cuda"
    else:
        with pytest.raises(RuntimeError, match="CUDA"):
            torch.load(cuda_checkpoint)
    for map_location in (None, "cuda:0", dropin.device("cuda", 0), {"cuda:0": "cuda:1"}):
        loaded = dropin.load(cuda_checkpoint, map_location=map_location)
        assert torch.equal(loaded["weight"], torch.arange(4.0)) and loaded["weight"].device == CPU


def test_torch_jit_script_still_compiles_dropin_code(dropin):
    import scripted_with_dropin

    scripted = torch.jit.script(scripted_with_dropin.add_zeros)
    assert torch.equal(scripted(torch.ones(3)), torch.ones(3))


def test_init_process_group_nccl_becomes_gloo_and_ddp_takes_no_device_ids(dropin, tmp_path):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("nccl", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        assert dist.get_backend() == "gloo"
        assert dist.get_backend(dist.new_group(backend="nccl")) == "gloo"
        device = dropin.device("cuda", 0)
        model = DDP(dropin.nn.Linear(2, 1).cuda(), device_ids=[device], output_device=device)
        assert model.device_ids is None
        model(torch.ones(4, 2)).sum().backward()
    finally:
        dist.destroy_process_group()
