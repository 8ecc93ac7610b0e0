"""The table both `locate` and `diff` print, and the rule that names the module to blame.

A module is *flagged* when its own error is beyond tolerance (how "own" is measured differs: `locate`
re-runs it on exact inputs, `diff` compares its output's divergence with its inputs'). The module named
is the first flagged one, in execution order, that has no flagged module inside it: a block whose layer
norm is wrong is flagged too, but its error is explained by the layer norm.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from portlayer.train.locate.error import Error
from portlayer.train.locate.sides import Side


@dataclass
class Row:
    key: str
    module_type: str
    depth: int
    parent: int | None
    output: Error | None  # this side's outputs against the reference side's, as the run went
    grad: Error | None  # the same for the gradients of its outputs and of its own parameters
    basis: float | None  # the figure the blame rests on (locate: own error; diff: input error)
    flagged: bool = False
    reason: str = ""  # why it is flagged, in words
    note: str = ""


def blame(rows: list[Row]) -> int | None:
    """Index of the first flagged row with no flagged row nested inside it, or None when none is flagged."""
    explained = [False] * len(rows)
    # Children come after their parent in execution (call) order, so one backward sweep suffices.
    for i in reversed(range(len(rows))):
        parent = rows[i].parent
        if parent is not None and (rows[i].flagged or explained[i]):
            explained[parent] = True
    return next((i for i, row in enumerate(rows) if row.flagged and not explained[i]), None)


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf"
    return f"{value:.2e}"


def _cos(error: Error | None) -> str:
    if error is None or math.isnan(error.cos):
        return "-"
    return f"{error.cos:.9f}"


def render(rows: list[Row], culprit: int | None, own_header: str) -> str:
    """The rows as an aligned text table in execution order; `*` marks flagged rows, `<<` the culprit."""
    header = ("#", "module", "type", "max_abs", "rel", "cos", "grad_rel", own_header, "")
    lines = [header]
    for i, row in enumerate(rows):
        mark = "<< first divergence" if i == culprit else ("*" if row.flagged else "")
        if row.note:
            mark = f"{mark} ({row.note})".strip()
        lines.append(
            (
                str(i),
                "  " * row.depth + row.key,
                row.module_type,
                _num(row.output.max_abs if row.output else None),
                _num(row.output.rel if row.output else None),
                _cos(row.output),
                _num(row.grad.rel if row.grad else None),
                _num(row.basis),
                mark,
            )
        )
    widths = [max(len(line[c]) for line in lines) for c in range(len(header))]
    left = {1, 2, 8}
    return "\n".join(
        "  ".join(
            cell.ljust(w) if c in left else cell.rjust(w) for c, (cell, w) in enumerate(zip(line, widths))
        ).rstrip()
        for line in lines
    )


@dataclass
class LocateReport:
    """The outcome of `locate` (device vs oracle) or `diff` (dump A vs dump B)."""

    sides: list[tuple[str, Side]]  # (label, side); the first is the reference
    losses: list[float]  # one per side
    tolerance: float
    rows: list[Row]
    basis_header: str
    # Divergence that no row accounts for (diff: gradients that diverge with no module to blame).
    unattributed: str | None = None
    culprit: int | None = field(init=False)

    def __post_init__(self) -> None:
        self.culprit = blame(self.rows)

    @property
    def diverged(self) -> bool:
        return self.culprit is not None or self.unattributed is not None

    @property
    def culprit_name(self) -> str | None:
        return None if self.culprit is None else self.rows[self.culprit].key

    def summary(self) -> str:
        if self.culprit is None and self.unattributed:
            return self.unattributed
        if self.culprit is None:
            return f"no divergence: every module within {self.tolerance:.2e}"
        row = self.rows[self.culprit]
        return f"first divergence: {row.key} ({row.module_type}): {row.reason}"

    def render(self) -> str:
        width = max(len(label) for label, _ in self.sides) + 1
        lines = [f"{label + ':':<{width}} {side.describe()}" for label, side in self.sides]
        lines.append(
            f"{'loss:':<{width}} "
            + "  ".join(f"{label} {loss:.9g}" for (label, _), loss in zip(self.sides, self.losses))
        )
        lines += ["", render(self.rows, self.culprit, self.basis_header), "", self.summary()]
        return "\n".join(lines)
