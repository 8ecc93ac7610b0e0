"""The noise band: how far the training itself carries the differences a correct port introduces, step by step.

    band = measure_band([series_a, series_b, series_c])     # reference runs of one experiment
    verdict = judge(comparison, band)                        # within the band, or the first step that left it

A correct port computes the same training with other rounding (another device's kernels, another reduction
order); training amplifies that rounding, slowly in fp32, fast in bf16 and after a loss spike. Two or more
reference runs that differ only that way (`parity band --preset P` trains them from initial weights moved by
one ulp, docs/parity.md "The noise band"; `--runs` takes a user's own) show how far apart correct runs drift:
at each step and for each quantity the spread of the references (largest minus smallest, relative), carried
forward as the largest seen so far (noise grows; one step where the references agree by chance is no
evidence of a narrower band) and widened by `FACTOR`. A comparison is within the band where
|run - baseline| <= width * |baseline| + what the two logs' rounding hides, with the width never below the
precision's own rounding (`FLOOR`).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from portlayer import PortlayerError
from portlayer.atomic import write_atomic
from portlayer.train.logs import QUANTITIES, Series
from portlayer.train.runfile import read_json

SCHEMA = "portlayer.parity.band/1"

# The committed bands of the tiny presets (`<preset>.<precision>.json`), package data of portlayer.train.
BANDS = Path(str(resources.files("portlayer.train").joinpath("bands")))

# How much wider than the references' spread the band is: a correct port is one more draw of the same noise,
# and two or three references undersample it. Measured (docs/parity.md "The noise band"): the correct ports
# seen (the H200 against the cpu, fp32 and bf16) used at most 21% of the band; every wrong port of
# tests/trainer/test_wrong_ports.py left it within 4 steps, the mildest (clipping removed) 1.9-fold.
FACTOR = 4.0
# The narrowest band per precision, relative: the difference one step's rounding makes when nothing has been
# amplified, with a margin (a loss computed by two correct implementations, the H200 against the cpu, tiny
# presets: fp32 3.1e-8 to 9.4e-8 at step 1; bf16 0 to 6.0e-5 at step 1, and up to 2.3e-4 at a later step for
# bert-base-uncased-tiny, whose masked-LM loss averages few tokens: evaluation noise of the two devices' bf16
# kernels that does not grow, which the one-ulp references do not show, since autocast rounds their weights to
# the same bf16 values). The learning rate is no computed quantity: a schedule gives the same numbers everywhere,
# up to one float32 rounding where a framework keeps it in float32.
# A gradient norm is a sum of squares over every weight, which a sharded strategy reduces in its own order (per
# shard, then over ranks; DeepSpeed in its own engine): against ddp's it moved by up to 9.2e-6 in fp32 while the
# losses stayed at 7e-8 (bert-base-uncased-tiny under zero3, mixtral-8x7b-tiny under fsdp2 5.5e-6).
FLOOR = {
    "fp32": {"loss": 1e-6, "grad_norm": 2e-5},
    "bf16": {"loss": 5e-4, "grad_norm": 1e-4},
    "fp16": {"loss": 1e-4, "grad_norm": 1e-4},
}
LR_FLOOR = 2.0**-23
# Where no precision is known (logs of another program): the widest.
UNKNOWN_PRECISION = "bf16"
# The metadata of portlayer run files a band measured from them keeps: what it can be used for.
EXPERIMENT_FIELDS = ("config_hash", "global_batch", "seq_len", "lr", "warmup_steps", "schedule_steps", "precision")


class BandError(PortlayerError):
    """A band file that cannot be read, references that cannot make one, or a band for another experiment."""


@dataclass(frozen=True)
class Band:
    widths: Mapping[int, Mapping[str, float]]  # step -> quantity -> relative half-width, FACTOR included
    precision: str | None  # the precision the references trained in, where they say
    experiment: Mapping | None  # preset and EXPERIMENT_FIELDS, where the references are portlayer run files
    references: tuple[str, ...]  # what it was measured from (files, or the perturbed runs)
    factor: float = FACTOR

    @property
    def steps(self) -> int:
        return max(self.widths)

    def width(self, step: int, quantity: str) -> float | None:
        return self.widths.get(step, {}).get(quantity)

    def floor(self, quantity: str) -> float:
        if quantity == "lr":
            return LR_FLOOR
        return FLOOR[self.precision or UNKNOWN_PRECISION][quantity]


def measure_band(references: list[Series], factor: float = FACTOR, references_named: tuple[str, ...] = ()) -> Band:
    """The band of reference runs of one experiment (two at least), over the steps they all logged."""
    if len(references) < 2:
        raise BandError("a band needs two reference runs at least: their differences are what it measures")
    by_step = [{point.step: point for point in series.points} for series in references]
    steps = sorted(set.intersection(*(set(points) for points in by_step)))
    if not steps:
        raise BandError("the reference runs have no step in common")
    widths: dict[int, dict[str, float]] = {step: {} for step in steps}
    for quantity in QUANTITIES:
        largest = 0.0
        for step in steps:
            values = [points[step].get(quantity) for points in by_step]
            if any(value is None for value in values):
                continue
            largest = max(largest, _spread(values))
            widths[step][quantity] = factor * largest
    return Band(
        widths,
        _precision(references),
        _experiment(references),
        references_named or tuple(series.path for series in references),
        factor,
    )


def _spread(values: list[float]) -> float:
    """(largest - smallest) / |middle value|; a reference whose loss is NaN makes the band infinite there."""
    if any(math.isnan(value) for value in values):
        return math.inf
    middle = sorted(values)[len(values) // 2]
    spread = max(values) - min(values)
    return 0.0 if spread == 0 else spread / abs(middle) if middle else math.inf


def _precision(references: list[Series]) -> str | None:
    found = {series.run_file["metadata"]["precision"] for series in references if series.run_file}
    if len(found) > 1:
        raise BandError(f"the reference runs trained in different precisions ({', '.join(sorted(found))})")
    return found.pop() if found else None


def _experiment(references: list[Series]) -> dict | None:
    """What the references share as portlayer run files; None where any is another program's log. References
    of different experiments make no band: their differences would be the experiments'."""
    if not all(series.run_file for series in references):
        return None
    described = [_describe(series.run_file) for series in references]
    for series, description in zip(references[1:], described[1:]):
        differing = [field for field in description if description[field] != described[0][field]]
        if differing:
            raise BandError(
                f"{series.path} is another experiment than {references[0].path}: it differs in {differing[0]}"
            )
    return described[0]


def _describe(run: dict) -> dict:
    return {"preset": run["preset"], **{field: run["metadata"][field] for field in EXPERIMENT_FIELDS}}


def check_fits(band: Band, baseline: Series) -> None:
    """Refuse a band measured for another experiment than the baseline's, where both are portlayer's (another
    preset, precision, learning rate …): its noise is not the baseline's. The run under test may differ in its
    settings: a port with another learning rate is what the band is there to catch."""
    if band.experiment is None or baseline.run_file is None:
        return
    described = _describe(baseline.run_file)
    for field, expected in band.experiment.items():
        if described[field] != expected:
            raise BandError(
                f"the band was measured for another experiment: {field} {expected!r}, the baseline's {described[field]!r}"
            )


def write_band(path: os.PathLike, band: Band) -> None:
    document = {
        "schema": SCHEMA,
        "factor": band.factor,
        "precision": band.precision,
        "experiment": band.experiment,
        "references": list(band.references),
        # JSON has no infinity: an unbounded width (a reference that diverged) is null.
        "steps": [
            {"step": step, **{q: (w if math.isfinite(w) else None) for q, w in band.widths[step].items()}}
            for step in sorted(band.widths)
        ],
    }
    write_atomic(Path(path), json.dumps(document, indent=1) + "\n")


def read_band(path: os.PathLike) -> Band:
    document = read_json(Path(path), BandError, missing="no such band file")
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        raise BandError(f"{path}: not a band file (schema {SCHEMA!r}); make one with `portlayer parity band`")
    try:
        widths = {
            int(entry["step"]): {
                q: math.inf if entry[q] is None else float(entry[q]) for q in QUANTITIES if q in entry
            }
            for entry in document["steps"]
        }
        return Band(
            widths,
            document["precision"],
            document["experiment"],
            tuple(document["references"]),
            float(document["factor"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise BandError(f"{path}: a band file with a bad entry ({exc!r})") from None


# The order a divergence names the quantities that left the band at one step: causes before effects (a step's
# learning rate moves the next step's loss; its gradient norm is taken from the loss it reports).
CAUSES_FIRST = ("lr", "grad_norm", "loss")


@dataclass(frozen=True)
class Excursion:
    """One quantity at one step: how much of the band the run's distance from the baseline used."""

    step: int
    quantity: str
    baseline: float
    run: float
    allowed: float  # the largest |run - baseline| within the band here

    @property
    def used(self) -> float:
        """|run - baseline| / allowed: above 1 is out of the band (a NaN on one side only: infinitely out)."""
        if math.isnan(self.baseline) or math.isnan(self.run):
            return 0.0 if math.isnan(self.baseline) and math.isnan(self.run) else math.inf
        difference = abs(self.run - self.baseline)
        if difference == 0:
            return 0.0
        return difference / self.allowed if self.allowed else math.inf


@dataclass(frozen=True)
class BandVerdict:
    band: Band
    excursions: tuple[Excursion, ...]  # every step and quantity both sides logged and the band covers
    unjudged: tuple[int, ...]  # compared steps past the band's last step

    @property
    def within(self) -> bool:
        return self.first_out is None

    @property
    def first_out(self) -> tuple[int, tuple[Excursion, ...]] | None:
        """(the first step where a quantity left the band, those quantities causes first), or None."""
        out = [excursion for excursion in self.excursions if excursion.used > 1]
        if not out:
            return None
        step = min(excursion.step for excursion in out)
        found = [excursion for excursion in out if excursion.step == step]
        return step, tuple(sorted(found, key=lambda excursion: CAUSES_FIRST.index(excursion.quantity)))

    def quantities(self) -> tuple[str, ...]:
        """The quantities judged, in `QUANTITIES` order."""
        judged = {excursion.quantity for excursion in self.excursions}
        return tuple(quantity for quantity in QUANTITIES if quantity in judged)

    def worst(self, quantity: str) -> Excursion | None:
        """The step where `quantity` came closest to the band's edge (or went furthest past it)."""
        mine = [excursion for excursion in self.excursions if excursion.quantity == quantity]
        return max(mine, key=lambda excursion: excursion.used) if mine else None


def judge(comparison, band: Band) -> BandVerdict:
    """Hold every compared step of `comparison` (compare.Comparison) to `band`."""
    baseline, run = comparison.baseline, comparison.run
    check_fits(band, baseline)
    excursions, unjudged = [], []
    for delta in comparison.steps:
        if delta.step > band.steps:
            unjudged.append(delta.step)
            continue
        for quantity in QUANTITIES:
            expected, actual = delta.baseline_values.get(quantity), delta.run_values.get(quantity)
            width = band.width(delta.step, quantity)
            if width is None and quantity == "lr":
                width = 0.0  # a schedule has no noise: the references needed no lr to say so
            if expected is None or actual is None or width is None:
                continue
            allowed = (
                max(width, band.floor(quantity)) * abs(expected)
                + baseline.resolution(quantity).of(expected)
                + run.resolution(quantity).of(actual)
            )
            excursions.append(Excursion(delta.step, quantity, expected, actual, allowed))
    return BandVerdict(band, tuple(excursions), tuple(unjudged))
