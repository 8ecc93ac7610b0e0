"""What the data flow knows about ints given as devices, seen through migrate: where a `device = 0` is
reported, and which `device_ids` lists are lists of ints (their items converted) and which are not
(their items reported, PL412)."""

from __future__ import annotations

import pytest
from portlayer.migrate.engine import migrate_source


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


def test_a_rank_given_to_a_collective_as_its_source_is_not_a_device():
    # Only the `device=` keyword of a torch call is a device: `src=rank` names a process, not a GPU.
    source = (
        "import torch\nimport torch.distributed as dist\nrank = 0\nt = torch.ones(2)\n"
        "dist.broadcast(t, src=rank)\ntorch.cuda.synchronize()\n"
    )
    result = migrate_source(source, "neutral")
    assert "dist.broadcast(t, src=rank)" in result.code
    assert [d.code for d in result.diagnostics] == []
