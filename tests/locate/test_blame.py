"""The rule that names one module among the flagged ones: the first with no flagged module inside it."""

from __future__ import annotations

import pytest

from portlayer.train.locate.report import Row, blame

# <model> ─ block ─ norm
#         │       └ mlp
#         └ head
TREE = [("<model>", None), ("block", 0), ("norm", 1), ("mlp", 1), ("head", 0)]


def rows(*flagged: str) -> list[Row]:
    return [Row(key, "Module", 0, parent, None, None, None, flagged=key in flagged) for key, parent in TREE]


@pytest.mark.parametrize(
    "flagged, named",
    [
        ((), None),
        (("<model>", "block", "norm"), "norm"),  # containers explained by the module inside them
        (("<model>", "block"), "block"),  # no flagged child: the fault is in the block's own code
        (("<model>", "block", "mlp", "head"), "mlp"),  # the first in execution order
        (("<model>", "block", "norm", "mlp"), "norm"),
        (("<model>",), "<model>"),
    ],
)
def test_blame(flagged, named):
    culprit = blame(rows(*flagged))
    assert (None if culprit is None else TREE[culprit][0]) == named
