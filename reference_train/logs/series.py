"""What every log reader returns: a `Series`, the values a training run logged, step by step.

    series = Collector(first_step=0).add(0, loss=Written("7.64")).add(1, loss=...).series(path, "csv")

Steps are numbered from 1 whatever the file did (`first_step=0`: the file counts from 0, and a note says it was
shifted). A step logged twice is resolved as TensorBoard does after a resumed run: the later values win, and a
note counts them; a step repeated with the same values (ms-swift 2.x writes every line twice) is one step.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from portlayer import PortlayerError
from portlayer.train.logs.numbers import EXACT, Resolution, resolution

# What a log may hold per step, in the order a report names them.
QUANTITIES = ("loss", "grad_norm", "lr")
LABELS = {"loss": "loss", "grad_norm": "gradient norm", "lr": "learning rate"}


class LogError(PortlayerError):
    """A log that cannot be read, or holds nothing to compare: one line naming the file and why."""


@dataclass(frozen=True)
class Point:
    step: int
    values: Mapping[str, float]  # the quantities logged at this step (NaN allowed: a diverged loss)

    def get(self, quantity: str) -> float | None:
        return self.values.get(quantity)


@dataclass(frozen=True)
class Series:
    path: str
    format: str  # what was read, as a report names it: "trainer_state.json", "Megatron-LM log", …
    points: tuple[Point, ...]  # in step order, numbered from 1
    # Whether a logged loss is the mean over the steps since the previous logged one (HuggingFace, Megatron's
    # text log) rather than that step's own.
    loss_is_interval_mean: bool = False
    resolutions: Mapping[str, Resolution] = field(default_factory=dict)  # per quantity: what the writing hides
    notes: tuple[str, ...] = ()  # what the reader did that a reader of the comparison must know
    run_file: dict | None = None  # the portlayer run file, when it is one: its metadata identify the experiment

    def quantities(self) -> tuple[str, ...]:
        """The quantities logged at one step at least, in `QUANTITIES` order."""
        return tuple(q for q in QUANTITIES if any(point.get(q) is not None for point in self.points))

    def resolution(self, quantity: str) -> Resolution:
        return self.resolutions.get(quantity, EXACT)

    def describe(self) -> str:
        """`trainer_state.json, steps 10-300 every 10` (for the notes of a comparison)."""
        steps = [point.step for point in self.points]
        gaps = {b - a for a, b in zip(steps, steps[1:])}
        every = "" if gaps <= {1} else f" every {gaps.pop()}" if len(gaps) == 1 else " at irregular intervals"
        return f"{self.format}, steps {steps[0]}-{steps[-1]}{every}"


class Collector:
    """Gathers a log's values in file order and makes the `Series`."""

    def __init__(self, first_step: int = 1):
        self.shift = 1 - first_step
        self.points: dict[int, dict[str, float]] = {}
        self.overwritten = 0

    def add(self, step: int, **values: float | None) -> Collector:
        """The values logged at `step` (as the file numbers it); None: not logged there. Quantities of one step
        may come from several lines; one logged again with another value is a resumed run's."""
        logged = {quantity: value for quantity, value in values.items() if value is not None}
        if not logged:
            return self
        point = self.points.setdefault(step + self.shift, {})
        if any(q in point and not _same(point[q], value) for q, value in logged.items()):
            self.overwritten += 1
        point.update(logged)
        return self

    def series(self, path: str, format: str, *, notes: tuple[str, ...] = (), **details) -> Series:
        if not self.points:
            raise LogError(f"{path}: a {format} with no step that logged a loss, gradient norm or learning rate")
        steps = sorted(self.points)
        if steps[0] < 1:
            raise LogError(f"{path}: step {steps[0] - self.shift} before the first step")
        said = list(notes)
        if self.shift:
            said.append(f"{path}: steps counted from 0 in the file, from 1 here")
        if self.overwritten:
            said.append(
                f"{path}: {self.overwritten} steps logged again with other values (a resumed run?): the later kept"
            )
        points = tuple(Point(step, self.points[step]) for step in steps)
        found = {q: resolution(p.values[q] for p in points if q in p.values) for q in QUANTITIES}
        details.setdefault("resolutions", found)
        return Series(path, format, points, notes=tuple(said), **details)


def _same(earlier: float, later: float) -> bool:
    return earlier == later or (math.isnan(earlier) and math.isnan(later))


def as_text(content: bytes | list) -> str | None:
    """A file's content as text, or None: a folder, or bytes that are not UTF-8 (a binary format's)."""
    if not isinstance(content, bytes):
        return None
    try:
        return content.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None


def text_of(path, content: bytes | list, label: str) -> str:
    """As `as_text`, for a reader the user chose with --format: a one-line error where it is no text."""
    text = as_text(content)
    if text is None:
        raise LogError(f"{path}: not a {label} (not a UTF-8 text file)")
    return text
