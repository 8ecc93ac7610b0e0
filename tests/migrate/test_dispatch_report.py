"""PL411's message quotes the chain's test as written, on one line, whatever its layout: the reader finds
the chain by it."""

from __future__ import annotations

import pytest

from portlayer.migrate.engine import migrate_source

TAIL = "    torch.npu.set_device(0)\nelse:\n    torch.cuda.set_device(0)\n"


@pytest.mark.parametrize(
    ("test", "quoted"),
    [
        ("is_npu_available()", "is_npu_available()"),
        # Over three lines, with a multi-byte character before it: columns are UTF-8 byte offsets.
        (
            "(is_npu_available()\n        and rank >= 0\n        and name != 'µ')",
            "is_npu_available() and rank >= 0 and name != 'µ'",
        ),
    ],
    ids=["one-line", "multi-line"],
)
def test_the_dispatch_report_quotes_the_chains_test(test, quoted):
    source = f"import torch\nname = 'µ'\nif {test}:\n{TAIL}"
    result = migrate_source(source, "neutral")
    assert result.code == source
    (diagnostic,) = result.diagnostics
    assert diagnostic.code == "PL411"
    assert diagnostic.message.endswith(f"(`if {quoted}`)")
