"""What the data flow knows about ints given as devices, seen through migrate: where a `device = 0` is
reported, and which `device_ids` lists are lists of ints (their items converted) and which are not
(their items reported, PL412)."""

from __future__ import annotations

import ast

import pytest

from portlayer.migrate.engine import migrate_source
from portlayer.migrate.engine.dataflow import (
    IntNames,
    find_current_devices_held,
    find_device_strings,
    find_int_device_assignments,
    find_int_names,
)


def test_an_int_device_is_reported_at_its_own_column():
    # Three-space indentation: the column is the statement's offset + 1, whatever its parity.
    source = "import torch\nif True:\n   device = 0\n   x = torch.ones(2).to(device)\n   torch.cuda.synchronize()\n"
    result = migrate_source(source, "neutral")
    assert [(d.code, d.line, d.col) for d in result.diagnostics] == [("PL412", 3, 4)]


@pytest.mark.parametrize(
    ("value", "a_list_of_ints"),
    [
        ("list(range(2))", True),
        ("range(2)", True),
        ("[0, 1]", True),
        ("list(names)", False),
        ("len(names)", False),
        ("[]", False),
    ],
)
def test_only_a_provable_list_of_ints_has_its_items_converted(value, a_list_of_ints):
    source = (
        f"import torch\nnames = ['a']\ndevice_ids = {value}\nx = torch.ones(2).to(device_ids[0])\n"
        "torch.cuda.synchronize()\n"
    )
    result = migrate_source(source, "neutral")
    converted = "x = torch.ones(2).to(portlayer.device(device_ids[0]))" in result.code
    reported = [d.code for d in result.diagnostics] == ["PL412"]
    assert (converted, reported) == (a_list_of_ints, not a_list_of_ints)


@pytest.mark.parametrize(
    ("item", "converted"),
    [
        ("device_ids[0]", True),
        ("device_ids[0:1]", False),  # a slice is a list, not an index
        ("device_ids[0, 1]", False),  # two indices: not one item
    ],
)
def test_only_one_indexed_item_of_a_list_of_ints_is_a_device(item, converted):
    source = f"import torch\ndevice_ids = [0, 1]\nx = torch.ones(2).to({item})\ntorch.cuda.synchronize()\n"
    result = migrate_source(source, "neutral")
    assert (f".to(portlayer.device({item}))" in result.code) == converted
    assert [d.code for d in result.diagnostics] == ([] if converted else ["PL412"])


def test_an_attribute_list_of_gpu_indices_is_named_by_its_last_part():
    # `self.gpu_ids` holds GPU indices as `gpu_ids` does; nothing here proves them ints: reported.
    source = "import torch\nclass T:\n    def f(self, x):\n        return x.to(self.gpu_ids[0])\ntorch.cuda.synchronize()\n"
    assert [d.code for d in migrate_source(source, "neutral").diagnostics] == ["PL412"]


@pytest.mark.parametrize(
    ("lines_before", "statement"),
    [
        # Only the `device=` keyword of a torch call is a device: `src=rank` names a process, not a GPU.
        ("import torch.distributed as dist\nrank = 0\nt = torch.ones(2)\n", "dist.broadcast(t, src=rank)"),
        # `data=` sorts before `device`: a keyword is a device by its name exactly, not by where it sorts.
        ("local_rank = 0\n", "rank_tensor = torch.tensor(data=local_rank)"),
        # An item of a list of torch devices, not of GPU indices (`device_ids`, `gpu_ids`, `gpus`).
        ("local_rank = 0\ndevices = [torch.device('cuda', i) for i in range(2)]\n",
         "x = torch.ones(2).to(devices[local_rank])"),
        # The rule sees this file only: an index imported from elsewhere is that module's.
        ("from settings import local_rank\n", "x = torch.ones(2).to(local_rank)"),
    ],
)
def test_a_value_that_is_not_an_int_device_of_this_file_is_neither_converted_nor_reported(lines_before, statement):
    result = migrate_source(f"import torch\n{lines_before}{statement}\ntorch.cuda.synchronize()\n", "neutral")
    assert f"\n{statement}\n" in result.code
    assert [d.code for d in result.diagnostics] == []


def test_the_device_of_to_is_its_first_positional_argument():
    # `.to(device, dtype)`: the dtype after the index is not the device.
    source = "import torch\nlocal_rank = 0\nx = torch.ones(2).to(local_rank, torch.bfloat16)\ntorch.cuda.synchronize()\n"
    result = migrate_source(source, "neutral")
    assert "x = torch.ones(2).to(portlayer.device(local_rank), torch.bfloat16)" in result.code


def test_a_device_keyword_of_to_is_converted_once():
    # `.to(device=local_rank)` has no positional argument: the keyword is its one device, not also its first.
    source = "import torch\nlocal_rank = 0\nx = torch.ones(2).to(device=local_rank)\ntorch.cuda.synchronize()\n"
    result = migrate_source(source, "neutral")
    assert "x = torch.ones(2).to(device=portlayer.device(local_rank))" in result.code
    assert [change.code for change in result.changes].count("PL101") == 1


# What the data flow finds in a file, read directly (the rules above are what migrate makes of it).


def int_names(source: str) -> IntNames:
    return find_int_names(ast.parse(source))


def int_device_assignments(source: str) -> tuple[tuple[int, int, str], ...]:
    return find_int_device_assignments(ast.parse(source), source)


def device_strings(source: str) -> frozenset[int]:
    return find_device_strings(ast.parse(source), source)


@pytest.mark.parametrize(
    ("value", "holds"),
    [
        ("int(os.environ['LOCAL_RANK'])", "an int"),
        ("dist.get_rank()", "an int"),
        ("rank % torch.cuda.device_count()", "an int"),  # a remainder of an int is an int whatever divides it
        ("rank % n", "an int"),
        ("rank + offset", "neither"),  # a sum, difference or product is an int only when both sides are
        ("offset + rank", "neither"),
        ("rank * 2", "an int"),
        ("rank / 2", "neither"),
        ("os.environ['LOCAL_RANK']", "neither"),
        ("True", "neither"),
        ("0.0", "neither"),
        ("[rank, 1]", "a list of ints"),
        ("(0, 1)", "a list of ints"),
        ("[0, name]", "neither"),
        ("list(range(n))", "a list of ints"),
        ("list(a, b)", "neither"),
        ("sorted(range(2))", "neither"),
        ("ids.copy()", "neither"),
        ("list()", "neither"),  # empty: no item to give as a device
        ("enumerate(range(2))", "neither"),  # pairs, and not indexable
    ],
)
def test_what_a_value_makes_the_name_it_is_assigned_to_hold(value, holds):
    found = int_names(f"import os\nrank = int(os.environ['RANK'])\ngpu_id = {value}\n")
    held = "an int" if "gpu_id" in found.names else "a list of ints" if "gpu_id" in found.lists else "neither"
    assert held == holds


def test_a_chain_of_two_assignments_is_followed_whatever_their_order_in_the_file():
    # The tree is walked breadth-first: `self.device_id = self.gpu_id` is met before the deeper assignment that
    # makes `self.gpu_id` an int, which a second pass over the assignments catches.
    source = (
        "import os\nclass Trainer:\n    def __init__(self):\n        self.device_id = self.gpu_id\n"
        "    def setup(self):\n        if True:\n            self.gpu_id = int(os.environ['LOCAL_RANK'])\n"
    )
    assert {"self.gpu_id", "self.device_id"} <= int_names(source).names


def test_a_parameter_annotated_int_is_an_int():
    source = "def f(gpu_id: int, device_id: str, local_rank: float, rank, /, gpu: int, *, device_idx: int):\n    pass\n"
    assert int_names(source).names == {"gpu_id", "gpu", "device_idx"}


def test_an_annotated_assignment_is_followed():
    source = "import os\nclass T:\n    def f(self):\n        self.gpu_id: int = int(os.environ['LOCAL_RANK'])\n"
    assert int_names(source).names == {"self.gpu_id"}


def test_a_chained_assignment_makes_nothing_an_int():
    # `a = b = 0`: several targets; only a single target is followed.
    assert int_names("gpu_id = local_rank = 0\n").names == set()


def test_an_int_device_is_named_by_the_last_part_of_its_name():
    # `self.device_id = 0` holds a device; `device_settings.rank = 0` holds a rank, though its owner is named
    # for devices.
    source = (
        "import torch\nclass T:\n    def f(self, x, device_settings):\n        self.device_id = 0\n"
        "        device_settings.rank = 0\n        x.to(self.device_id)\n        x.to(device_settings.rank)\n"
    )
    assert int_device_assignments(source) == ((4, 9, "self.device_id"),)


def load_with(body: str) -> str:
    # The file names a `cuda:` device (strings are looked for only then), after the function's lines.
    return f"import torch\ndef load(path, i, kind):\n{body}DEFAULT_DEVICE = 'cuda:0'\n"


@pytest.mark.parametrize(
    ("body", "a_device_string"),
    [
        ("    loc = 'cuda:0'\n    return torch.load(path, map_location=loc)\n", True),
        ("    loc = 'cuda'\n    return torch.load(path, map_location=loc)\n", True),
        ("    loc = f'cuda:{i}'\n    return torch.load(path, map_location=loc)\n", True),
        ("    loc = f'cuda:{i}'\n    return torch.ones(2).to(loc, torch.bfloat16)\n", True),
        ("    loc = 'cuda:0'\n    model = torch.load(path, map_location=loc)\n    return model.to(loc)\n", True),
        ("    loc = 'cpu'\n    return torch.load(path, map_location=loc)\n", False),
        ("    loc = f'npu:{i}'\n    return torch.load(path, map_location=loc)\n", False),
        ("    loc = 'mps'\n    return torch.load(path, map_location=loc)\n", False),
        ("    loc = pick(i)\n    return torch.load(path, map_location=loc)\n", False),  # not a string here
        ("    loc = other = 'cuda:0'\n    return torch.load(path, map_location=loc)\n", False),  # two names
        ("    loc = f'{kind}:{i}'\n    return torch.load(path, map_location=loc)\n", False),
        ("    loc = f'{i}'\n    return torch.load(path, map_location=loc)\n", False),
        # Read somewhere else too: the string is more than a device there.
        ("    loc = 'cuda:0'\n    print(loc)\n    return torch.load(path, map_location=loc)\n", False),
        ("    loc = 'cuda:0'\n    loc = 'cuda:1'\n    return torch.load(path, map_location=loc)\n", False),
        ("    loc = 'cuda:0'\n    return path\n", False),  # never read
    ],
)
def test_a_cuda_string_read_only_as_a_device_is_a_device(body, a_device_string):
    assert device_strings(load_with(body)) == ({3} if a_device_string else set())


def test_a_cuda_string_of_the_module_itself_is_not_a_device_string():
    # Only a function's own names are followed: a module-level name may be read by any importer.
    source = "import torch\nDEVICE = 'cuda:0'\nstate = torch.load('state.pt', map_location=DEVICE)\n"
    assert device_strings(source) == set()


def test_a_device_held_as_an_int_from_a_call_is_reported_as_a_literal_is():
    # An int from `current_device()` is reported where the file holds nothing else about int devices (no
    # literal, no name like a GPU index): the file test for the walk looks for both.
    source = "import torch\ndevice = torch.cuda.current_device()\nx = torch.ones(2).to(device)\n"
    result = migrate_source(source, "neutral")
    assert [(d.code, d.line, d.col) for d in result.diagnostics] == [("PL412", 2, 1)]
    assert int_device_assignments(source.replace("current_device()", "current_device")) == ()


def test_a_gpu_index_the_codemod_converts_at_each_use_is_not_reported_where_it_is_assigned():
    # torchrun's habit: every `.to(device_id)` becomes the target's device, so nothing is left to warn about.
    source = ("import os\nimport torch\ndevice_id = int(os.environ['LOCAL_RANK'])\ntorch.cuda.synchronize()\n"
              "model = torch.nn.Linear(2, 2).to(device_id)\n")
    result = migrate_source(source, "neutral")
    assert result.diagnostics == () and "portlayer.device(device_id)" in result.code
    # `device = 0` under a name the codemod does not convert stays reported; a vendor maps an int itself.
    held = source.replace("device_id = int(os.environ['LOCAL_RANK'])", "device = 0").replace("(device_id)", "(device)")
    assert [d.code for d in migrate_source(held, "neutral").diagnostics] == ["PL412"]
    assert migrate_source(held, "npu").diagnostics == ()


@pytest.mark.parametrize(
    ("body", "held"),
    [
        ("device = torch.cuda.current_device()\n    return torch.zeros(1, device=device).to(device)", True),
        ("device = torch.cuda.current_device()\n    torch.cuda.set_device(device)\n    return torch.zeros(1, device=device)",
         False),  # also read as an index
        ("device = torch.cuda.current_device()\n    device = 1\n    return torch.zeros(1, device=device)", False),
        ("device = torch.cuda.current_device()", False),  # never read
        ("device = torch.cuda.current_device(0)\n    return torch.zeros(1, device=device)", False),
        ("device = get_accelerator().current_device()\n    return torch.zeros(1, device=device)", False),
    ],
)
def test_a_current_device_is_held_only_as_a_device_where_every_read_of_its_name_is_a_device(body, held):
    source = f"import torch\ndef f():\n    {body}\n"
    assert find_current_devices_held(ast.parse(source), source) == (frozenset({3}) if held else frozenset())
