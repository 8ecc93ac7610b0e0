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
