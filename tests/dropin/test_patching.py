"""`portlayer.patch()` / `unpatch()` / `patched()`: explicit, idempotent, and undone exactly."""

import pkgutil
import warnings

import torch

import portlayer
from portlayer.dropin.patches import PATCHES
from tests.processes import run_python

_ABSENT = object()


def own_attributes():
    """What each patched owner holds itself (inherited attributes show as absent), by patch."""
    return {entry: vars(pkgutil.resolve_name(entry.owner)).get(entry.attribute, _ABSENT) for entry in PATCHES}


def test_the_table_names_only_objects_reached_without_portlayer_torch():
    assert sorted(entry.name for entry in PATCHES) == [
        "builtins.__import__",
        "torch.Tensor.cuda",
        "torch.Tensor.pin_memory",
        "torch.Tensor.to",
        "torch.distributed.destroy_process_group",
        "torch.distributed.init_process_group",
        "torch.distributed.new_group",
        "torch.nn.Module.cuda",
        "torch.nn.Module.to",
        "torch.nn.parallel.DistributedDataParallel.__init__",
        "warnings.showwarning",
    ]


def test_unpatch_restores_every_object_exactly(dropin):
    portlayer.unpatch()
    before = own_attributes()
    portlayer.patch()
    patched = own_attributes()
    assert all(patched[entry] is not before[entry] for entry in PATCHES)
    portlayer.unpatch()
    assert all(after is before[entry] for entry, after in own_attributes().items())
    # Tensor.cuda is inherited from TensorBase: unpatching removes the override rather than shadowing it.
    assert "cuda" not in vars(torch.Tensor) and torch.Tensor.cuda is torch._C.TensorBase.cuda
    portlayer.patch()


def test_patch_and_unpatch_are_idempotent(dropin):
    portlayer.patch()
    once = own_attributes()
    portlayer.patch()
    assert own_attributes() == once
    portlayer.unpatch()
    restored = own_attributes()
    portlayer.unpatch()
    assert own_attributes() == restored
    portlayer.patch()


def test_patched_restores_the_state_it_found(dropin):
    portlayer.unpatch()
    original = own_attributes()
    with portlayer.patched():
        assert torch.ones(1).to("cuda").device.type == "cpu"
        with portlayer.patched():
            pass
        assert torch.ones(1).cuda().device.type == "cpu"
    assert own_attributes() == original
    portlayer.patch()
    with portlayer.patched():
        pass
    assert own_attributes() != original


def test_unpatch_leaves_a_later_patch_alone(dropin):
    portlayer.patch()
    theirs = lambda self, *args, **kwargs: "theirs"  # noqa: E731
    ours = vars(torch.nn.Module)["to"]
    torch.nn.Module.to = theirs
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            portlayer.unpatch()
        assert vars(torch.nn.Module)["to"] is theirs
        [warning] = [each for each in caught if "torch.nn.Module.to" in str(each.message)]
        assert warning.filename == __file__  # points at the caller of unpatch()
    finally:
        torch.nn.Module.to = ours.__wrapped__
        portlayer.patch()


def from_portlayer(value) -> bool:
    return str(getattr(value, "__module__", None) or "").startswith("portlayer")


def test_torch_itself_is_not_patched(dropin):
    """Other libraries import torch: its namespace and torch.cuda hold no portlayer object, and
    `torch.cuda.is_available()` keeps telling the truth."""
    assert not [name for name, value in vars(torch).items() if from_portlayer(value)]
    assert not [name for name, value in vars(torch.cuda).items() if from_portlayer(value)]
    assert torch.cuda.is_available is not dropin.cuda.is_available
    # The answer of a process of this environment that never imported portlayer.
    untouched = run_python("import torch; print(torch.cuda.is_available())", fake_plugins=False)
    assert untouched.stdout.split() == [str(torch.cuda.is_available())]


def test_each_patch_wears_the_name_and_doc_of_what_it_replaces(dropin):
    # Applied afresh inside this test: pytest puts back its own `warnings.showwarning` after each test.
    portlayer.unpatch()
    portlayer.patch()
    for entry in PATCHES:
        replacement = vars(pkgutil.resolve_name(entry.owner))[entry.attribute]
        assert replacement.__name__ == entry.attribute, entry.name
        assert replacement.__doc__ == replacement.__wrapped__.__doc__, entry.name


def test_to_keeps_the_arguments_after_the_device(dropin):
    moved = torch.ones(2).to("cuda", torch.float64)
    assert (moved.device.type, moved.dtype) == ("cpu", torch.float64)
    moved = torch.ones(2).to("cuda:0", torch.float16, copy=True)
    assert (moved.device.type, moved.dtype) == ("cpu", torch.float16)
    assert torch.ones(2).to(dtype=torch.float64).dtype == torch.float64  # no device: nothing to retarget
    assert torch.ones(2).to(torch.float16, non_blocking=False).dtype == torch.float16
    assert torch.ones(2).to(device="cuda:0").device.type == "cpu"
    layer = torch.nn.Linear(2, 2).to("cuda", torch.float64)
    assert layer.weight.dtype == torch.float64 and layer.weight.device.type == "cpu"
