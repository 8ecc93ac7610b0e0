"""Compare two training runs step by step: is the second the same training as the first, up to rounding?

Pure logic, no I/O: `compare_logs(baseline, run, rtol)` takes two `Series` (as `logs.read_log` returns them:
portlayer run files or another program's logs) and returns a `Comparison`, or raises `IncomparableRuns` naming
why they cannot be compared. Two portlayer run files are first checked to be the same experiment, field by
field (`compare_runs` takes them as `runfile.read_run` returns them); other logs carry no such record, so only
their numbers are compared, at the steps both logged. The CLI, the table, the band's verdict
(`band.judge`) and the plot are built on top of it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

from portlayer.train.logs import Series
from portlayer.train.logs.portlayer_run import series_of_run

# fp32 cross-device parity is sharp (cpu vs H100: 1e-7 to 3e-6 relative), so the default tolerance sits a
# little above rounding and far below what TF32 or bf16 produce.
DEFAULT_RTOL = 1e-5

# What must be equal for two runs to be the same experiment. The world size is deliberately absent: DDP
# averages gradients over ranks, so 2 ranks x 4 and 1 rank x 8 train the same model up to rounding; the
# global batch (world size x per-device batch x accumulation) is what must match. The sequence length
# changes what each step trains on (and the loss a step reports), so it must match too.
COMPARABLE_FIELDS = (
    "preset",
    "config_hash",
    "data_checksum",
    "init_weights_checksum",
    "global_batch",
    "seq_len",
)

# Settings two comparable runs may differ in. They are compared anyway — a port that trains with another
# learning rate or with dropout on is what a parity check exists to catch — and the differences are named
# beside the verdict.
SETTING_FIELDS = (
    "lr",
    "warmup_steps",
    "precision",
    "tf32",
    "parity",
    "deterministic",
    "dropout_fields_zeroed",
    "strategy",
    "tensor_parallel",
    "sequence_parallel",
    "pipeline_parallel",
    "pipeline_schedule",
    "perturb_init",
)
# The settings that act through the learning rate: their effect starts where the recorded rates part.
LR_FIELDS = ("lr", "warmup_steps")
# The other settings that make a different training, from the first step: a divergence they may explain is
# not called real. Deterministic algorithms (and the way state is sharded) change only the order of
# reductions, rounding-level: a divergence between runs differing there is real.
TRAINING_FIELDS = ("precision", "tf32", "parity", "dropout_fields_zeroed")

# The data checksum covers every sample a run consumes, so runs of different lengths never share it. When
# only a common prefix of steps is compared, what makes the data instead must match: the corpus (None: the
# built-in one), the order's seed and the block length.
PREFIX_DATA_FIELDS = ("data", "seed", "seq_len")

# Upper ends of the relative loss errors measured with the same init, data and dropout off, over 30-50
# steps (docs/parity.md, "Tolerance and what an error means"): fp32 cpu vs H100 up to 2.9e-6, H100 TF32 vs fp32 up to 1e-3,
# bf16 autocast vs fp32 3e-4 to 1.2e-3.
ROUNDING_LIMIT = 1e-5
TF32_LIMIT = 1e-3
BF16_LIMIT = 1.2e-3

# How the ranks split the training: what state they shard, which matmuls they split.
LAYOUT_FIELDS = ("strategy", "tensor_parallel", "sequence_parallel", "pipeline_parallel", "pipeline_schedule")
# The relative loss error between two strategies on one device (ddp against fsdp2, zero1/2/3, tiny presets,
# 30 steps; docs/parity.md, "Across strategies") measured up to 7.3e-8, one float32 ulp of the loss: a sharded
# reduction sums the gradients in another order. Tensor parallel against ddp (--tp 2, bert and mixtral tiny, 2 and 4
# ranks) measured up to 1.1e-7: a row-split matmul sums its halves' partial products by an all-reduce; sequence and
# pipeline parallel (--sp, --pp 2, alone and with --tp, the tiny presets) up to 1.6e-7: the shared layers'
# gradients summed over stages, the micro-batches' by the schedule. The band is ten ulps; a cross-layout comparison
# keeps the default tolerance, and the verdict names the cause.
REDUCTION_ORDER_LIMIT = 1e-6

ROUNDING = "rounding-level"
REDUCTION_ORDER = "rounding: reduction order"
TF32 = "consistent with TF32"
BF16 = "consistent with bf16"
DIVERGENCE = "real divergence"
KNOWN_DIFFERENCE = "explained by a difference the runs record"
# The reduced-precision mode (as `reduced_precisions` names it) that each precision verdict points to.
PRECISION_OF = {TF32: "tf32", BF16: "bf16"}


class IncomparableRuns(ValueError):
    """The two runs are not the same experiment (or not usable at all); the message names why, in one line."""


@dataclass(frozen=True)
class StepDelta:
    step: int
    baseline_loss: float  # NaN where a side logged no loss at this step (then only the other quantities count)
    run_loss: float
    # Every quantity each side logged at this step (logs.QUANTITIES), the loss as compared: averaged over the
    # other side's logging interval where that side logs an interval's mean.
    baseline_values: Mapping[str, float] = dataclasses.field(default_factory=dict)
    run_values: Mapping[str, float] = dataclasses.field(default_factory=dict)

    @property
    def rel_error(self) -> float:
        error = abs(self.run_loss - self.baseline_loss) / abs(self.baseline_loss)
        # A NaN loss compares false with everything: count it as infinitely far, never as within tolerance.
        return math.inf if math.isnan(error) else error

    def error(self, quantity: str) -> float | None:
        """The relative error of a quantity both sides logged here (infinite for a NaN), None otherwise."""
        expected, actual = self.baseline_values.get(quantity), self.run_values.get(quantity)
        if expected is None or actual is None:
            return None
        if expected == actual:
            return 0.0
        error = abs(actual - expected) / abs(expected) if expected else math.inf
        return math.inf if math.isnan(error) else error


@dataclass(frozen=True)
class Comparison:
    baseline: Series
    run: Series
    rtol: float
    steps: tuple[StepDelta, ...]
    alignment_notes: tuple[str, ...] = ()  # how the steps of two logs were matched, when they are not run files

    @property
    def run_files(self) -> bool:
        """Whether both sides are portlayer run files: then their metadata say what each run was."""
        return self.baseline.run_file is not None and self.run.run_file is not None

    @property
    def lengths(self) -> tuple[int, int]:
        """How many steps the baseline and the run recorded (the comparison may cover fewer)."""
        return len(self.baseline.points), len(self.run.points)

    @property
    def length_note(self) -> str | None:
        """Said beside the verdict when not every recorded step was compared."""
        baseline_steps, run_steps = self.lengths
        if len(self.steps) == baseline_steps == run_steps:
            return None
        if not self.run_files:
            return (
                f"compared the {len(self.steps)} steps both logged ({self.baseline.describe()}; "
                f"{self.run.describe()})"
            )
        if baseline_steps == run_steps:
            return f"compared the first {len(self.steps)} of the {baseline_steps} steps both runs have"
        checked = ", ".join(PREFIX_DATA_FIELDS)
        return (
            f"compared the first {len(self.steps)} steps: the baseline has {baseline_steps}, the run {run_steps}"
            f" (their data checksums cover different lengths; {checked} were checked instead)"
        )

    @property
    def lr_parting(self) -> tuple[int, float, float] | None:
        """(step, baseline lr, run lr) at the first compared step whose recorded learning rate differs by more
        than the two logs' writing hides (a TensorBoard file keeps the rate as a float32)."""
        hides = self.baseline.resolution("lr").of, self.run.resolution("lr").of
        for delta in self.steps:
            expected, actual = delta.baseline_values.get("lr"), delta.run_values.get("lr")
            if expected is None or actual is None or math.isclose(expected, actual, rel_tol=1e-9):
                continue
            if abs(actual - expected) > hides[0](expected) + hides[1](actual):
                return delta.step, expected, actual
        return None

    @property
    def schedules_differ(self) -> bool:
        return self.run_files and _field(self.baseline, "schedule_steps") != _field(self.run, "schedule_steps")

    @property
    def schedule_note(self) -> str | None:
        """Where the learning rates part, when no lr setting the runs record explains it: schedules of other
        lengths (the cosine decays over its whole span), or a run that did not follow its own schedule."""
        parting = self.lr_parting
        if parting is None or any(field in LR_FIELDS for field, _, _ in self.setting_differences):
            return None
        step, expected, actual = parting
        said = f"the learning rate differs from step {step} (baseline {expected:.6g}, run {actual:.6g})"
        if self.schedules_differ:
            spans = _field(self.baseline, "schedule_steps"), _field(self.run, "schedule_steps")
            return f"{said}: the schedules span {spans[0]} and {spans[1]} steps"
        if not self.run_files:
            return said  # the logs record no schedule to say which side left it
        return f"{said} though both runs record the same schedule: the run did not follow it"

    @property
    def known_difference(self) -> tuple[int, str] | None:
        """(the first step whose loss it can change, what it is) for the earliest difference the two runs are
        known to have: a setting that makes another training (TRAINING_FIELDS, from step 1), or learning rates
        that part at step p because the lr settings or the schedules differ (the loss from step p + 1: a step's loss is
        measured before its update). None when the runs record no difference, or when the rates part
        without one (then nothing known explains it)."""
        differing = [field for field, _, _ in self.setting_differences]
        settings = [field for field in differing if field in TRAINING_FIELDS]
        if settings:
            return 1, f"the runs differ in {', '.join(settings)}"
        parting = self.lr_parting
        if parting is None or not (self.schedules_differ or any(field in LR_FIELDS for field in differing)):
            return None
        return parting[0] + 1, f"the learning rate differs from step {parting[0]}"

    @property
    def max_rel_error(self) -> float:
        return self.worst_step.rel_error

    @property
    def worst_step(self) -> StepDelta:
        # The first of equal maxima, so identical runs report step 1 rather than an arbitrary one.
        return max(self.loss_steps, key=lambda delta: delta.rel_error)

    @property
    def loss_steps(self) -> tuple[StepDelta, ...]:
        """The compared steps where both sides logged a loss (all of them, for two run files)."""
        return tuple(delta for delta in self.steps if "loss" in delta.baseline_values and "loss" in delta.run_values)

    @property
    def first_beyond(self) -> StepDelta | None:
        """The first step whose relative loss error exceeds rtol, or None when every step is within it."""
        return next((delta for delta in self.loss_steps if delta.rel_error > self.rtol), None)

    @property
    def within_tolerance(self) -> bool:
        return self.first_beyond is None

    @property
    def setting_differences(self) -> tuple[tuple[str, object, object], ...]:
        """(field, baseline value, run value) for each setting in which the two runs differ (none known
        unless both are run files)."""
        if not self.run_files:
            return ()
        return tuple(
            (field, _field(self.baseline, field), _field(self.run, field))
            for field in SETTING_FIELDS
            if _field(self.baseline, field) != _field(self.run, field)
        )

    @property
    def first_departure(self) -> StepDelta | None:
        """The first step whose error is beyond rounding: where the two trainings start to differ."""
        return next((delta for delta in self.loss_steps if delta.rel_error > ROUNDING_LIMIT), None)

    @property
    def verdict(self) -> str:
        cause = classify(
            self.max_rel_error,
            reduced_precisions(self.baseline, self.run),
            layouts_differ=self.run_files
            and any(_field(self.baseline, name) != _field(self.run, name) for name in LAYOUT_FIELDS),
        )
        # Never call a divergence real when a difference the runs record can explain it: the losses agreed
        # until that difference could first show.
        known, departure = self.known_difference, self.first_departure
        if cause == DIVERGENCE and known is not None and departure is not None and departure.step >= known[0]:
            return KNOWN_DIFFERENCE
        return cause


def reduced_precisions(*runs: Series) -> set[str]:
    """Which reduced-precision modes any of the runs recorded: a subset of {"tf32", "bf16"} (a log of another
    program records none)."""
    used = set()
    for run in runs:
        if run.run_file is None:
            continue
        metadata = run.run_file["metadata"]
        if metadata["tf32"]:
            used.add("tf32")
        if metadata["precision"] == "bf16":
            used.add("bf16")
    return used


def classify(rel_error: float, precisions: set[str] = frozenset(), layouts_differ: bool = False) -> str:
    """Name the likeliest cause of a relative loss error from the measured bands.

    Runs under different strategies (ddp, fsdp2, zero*) reduce gradients in different orders, and runs that split
    matmuls over different --tp sum their partial products in different orders: an error within what that moves
    the loss is named so.

    The TF32 and bf16 bands overlap (3e-4 to 1e-3), so where both fit, the precision the runs recorded
    decides; with neither recorded, an error the size of TF32's is still called that, since a backend may
    lower matmul precision on its own (Ascend's HF32, for one).
    """
    if layouts_differ and rel_error <= REDUCTION_ORDER_LIMIT:
        return REDUCTION_ORDER
    if rel_error <= ROUNDING_LIMIT:
        return ROUNDING
    if "bf16" in precisions and rel_error <= BF16_LIMIT:
        return BF16
    if rel_error <= TF32_LIMIT:
        return TF32
    if rel_error <= BF16_LIMIT:
        return BF16
    return DIVERGENCE


def compare_runs(
    baseline: dict, run: dict, rtol: float = DEFAULT_RTOL, steps: int | None = None
) -> Comparison:
    """`compare_logs` of two run files' contents (as `runfile.read_run` returns them)."""
    return compare_logs(series_of_run(baseline, "baseline"), series_of_run(run, "run"), rtol, steps)


def compare_logs(
    baseline: Series, run: Series, rtol: float = DEFAULT_RTOL, steps: int | None = None
) -> Comparison:
    """Compare `run` with `baseline` at the steps both logged; two run files must record the same experiment.

    Runs of different lengths are compared over their common steps; `steps` instead requires both runs to
    reach that step and compares exactly the steps up to it.
    """
    if steps is not None:
        for name, series in (("baseline", baseline), ("run", run)):
            if series.points[-1].step < steps:
                raise IncomparableRuns(f"--steps {steps}: the {name} has only {series.points[-1].step} steps")
    if baseline.run_file is not None and run.run_file is not None:
        _check_same_experiment(baseline.run_file, run.run_file)
        notes: tuple[str, ...] = ()
    else:
        notes = (*baseline.notes, *run.notes)
    deltas, aligned = align(baseline, run, steps)
    if not deltas:
        raise IncomparableRuns(
            f"no step to compare: {baseline.path} ({baseline.describe()}) and {run.path} ({run.describe()})"
        )
    for delta in deltas:
        if delta.baseline_loss == 0:
            raise IncomparableRuns(f"baseline loss is 0 at step {delta.step}: no relative error")
    return Comparison(baseline, run, rtol, tuple(deltas), (*notes, *aligned))


def _check_same_experiment(baseline: dict, run: dict) -> None:
    fields = COMPARABLE_FIELDS
    if len(baseline["steps"]) != len(run["steps"]):
        fields = (*(field for field in fields if field != "data_checksum"), *PREFIX_DATA_FIELDS)
    for field in fields:
        expected, actual = _field(baseline, field), _field(run, field)
        if expected != actual:
            raise IncomparableRuns(
                f"runs differ in {field}: baseline {_describe(baseline, field)}, run {_describe(run, field)}"
            )


def align(baseline: Series, run: Series, steps: int | None = None) -> tuple[list[StepDelta], tuple[str, ...]]:
    """The steps both series logged (up to `steps`), and a note on how their losses were matched.

    Where one side logs the mean loss since its previous log (HuggingFace, Megatron's text log) at intervals
    longer than one step and the other logs each step, the other's losses are averaged over the same steps;
    two means over different intervals are not compared."""
    base, other = _by_step(baseline), _by_step(run)
    intervals = _loss_intervals(baseline), _loss_intervals(run)
    common = sorted(step for step in base.keys() & other.keys() if steps is None or step <= steps)
    deltas, averaged = [], set()
    for step in common:
        expected, actual = dict(base[step].values), dict(other[step].values)
        ours, theirs = intervals[0].get(step), intervals[1].get(step)
        if ours != theirs:
            if theirs is None and (mean := _mean_loss(other, ours)) is not None:
                actual["loss"] = mean
                averaged.add("run")
            elif ours is None and (mean := _mean_loss(base, theirs)) is not None:
                expected["loss"] = mean
                averaged.add("baseline")
            else:
                expected.pop("loss", None), actual.pop("loss", None)
        deltas.append(StepDelta(step, expected.get("loss", math.nan), actual.get("loss", math.nan), expected, actual))
    said = tuple(
        f"the {name}'s losses were averaged over the other side's logging intervals (it logs the mean loss since"
        " its previous log)"
        for name in ("run", "baseline")
        if name in averaged
    )
    return deltas, said


def _by_step(series: Series) -> dict:
    return {point.step: point for point in series.points}


def _loss_intervals(series: Series) -> dict[int, tuple[int, int]]:
    """step -> (first, last) steps its logged loss is the mean of, where that is more than the step itself."""
    if not series.loss_is_interval_mean:
        return {}
    intervals, previous = {}, 0
    for point in series.points:
        if point.get("loss") is None:
            continue
        if point.step - previous > 1:
            intervals[point.step] = (previous + 1, point.step)
        previous = point.step
    return intervals


def _mean_loss(by_step: dict, interval: tuple[int, int]) -> float | None:
    """The mean of a per-step series' losses over `interval`, or None where it lacks one of them."""
    losses = [by_step[step].get("loss") if step in by_step else None for step in range(interval[0], interval[1] + 1)]
    return None if any(loss is None for loss in losses) else math.fsum(losses) / len(losses)


def _field(run, field: str):
    """A field of the run's metadata (the preset's name sits beside it), from a run file's content or its
    Series. `runfile.read_run` has given a file written before a field existed the value it meant."""
    run = run.run_file if isinstance(run, Series) else run
    return run["preset"] if field == "preset" else run["metadata"][field]


def _describe(run: dict, field: str) -> str:
    if field == "global_batch":
        metadata = run["metadata"]
        return (
            f"{_field(run, field)} ({metadata['world_size']} ranks x {metadata['per_device_batch']}"
            f" x {metadata['grad_accum']} accumulated)"
        )
    return repr(_field(run, field))
