"""Render a `Comparison` as text (the per-step table, the run table in the published style, the verdict
line, the industry criteria) or as one JSON document (`parity compare --json`); with a band, its verdict."""

from __future__ import annotations

import math
from pathlib import Path

from portlayer.train.band import BandVerdict
from portlayer.train.compare import (
    KNOWN_DIFFERENCE,
    PRECISION_OF,
    Comparison,
    StepDelta,
    reduced_precisions,
)
from portlayer.train.criteria import industry_criteria, length_note
from portlayer.train.logs.series import LABELS

# Steps shown when not asked for all of them: enough to see the trend, plus every step worth looking at.
SUMMARY_ROWS = 10


def step_table(comparison: Comparison, all_steps: bool = False, band: BandVerdict | None = None) -> str:
    """Per-step losses and relative errors (the gradient norm's too where both logged it, and how much of the
    band each step used); a sample of the steps unless `all_steps`, always with the first step beyond
    tolerance (or out of the band) and the worst one."""
    steps = comparison.steps
    shown = steps if all_steps else _sample(comparison, band)
    first_beyond, worst = comparison.first_beyond, comparison.worst_step if comparison.loss_steps else None
    norms = any(delta.error("grad_norm") is not None for delta in steps)
    used = _band_used(band)
    out = band.first_out[0] if band is not None and band.first_out else None
    lines = [
        f"{'step':>5}  {'baseline loss':>14}  {'run loss':>14}  {'rel error':>9}"
        + ("  grad-norm rel" if norms else "")
        + ("  band used" if band is not None else "")
    ]
    for delta in shown:
        marks = []
        if band is None and delta is first_beyond:
            marks.append(f"first beyond rtol {comparison.rtol:g}")
        if delta.step == out:
            marks.append("left the band: " + ", ".join(LABELS[e.quantity] for e in band.first_out[1]))
        if delta is worst and delta.rel_error > 0:
            marks.append("max")
        note = f"  <- {', '.join(marks)}" if marks else ""
        line = f"{delta.step:>5}  {delta.baseline_loss:>14.8f}  {delta.run_loss:>14.8f}  {_error(delta.rel_error)}"
        if norms:
            line += f"  {_error(delta.error('grad_norm')):>13}"
        if band is not None:
            line += f"  {_share(used.get(delta.step)):>9}"
        lines.append(line + note)
    if len(shown) < len(steps):
        lines.append(f"({len(shown)} of {len(steps)} steps shown; --all-steps for every step)")
    return "\n".join(lines)


def _error(error: float | None) -> str:
    if error is None or (isinstance(error, float) and math.isnan(error)):
        return f"{'-':>9}"
    return f"{error:>9.2e}"


def _share(used: float | None) -> str:
    if used is None:
        return "-"
    return "inf" if math.isinf(used) else f"{used:.0%}" if used < 10 else f"{used:.0f}x"


def _band_used(band: BandVerdict | None) -> dict[int, float]:
    """step -> the most of the band any quantity used there."""
    used: dict[int, float] = {}
    for excursion in band.excursions if band is not None else ():
        used[excursion.step] = max(used.get(excursion.step, 0.0), excursion.used)
    return used


def _sample(comparison: Comparison, band: BandVerdict | None = None) -> list[StepDelta]:
    steps = comparison.steps
    stride = max(1, -(-len(steps) // SUMMARY_ROWS))
    picked = {index for index in range(0, len(steps), stride)} | {len(steps) - 1}
    marked = [comparison.first_beyond, comparison.worst_step if comparison.loss_steps else None]
    if band is not None and band.first_out is not None:
        marked.append(next(delta for delta in steps if delta.step == band.first_out[0]))
    picked |= {steps.index(delta) for delta in marked if delta is not None}
    return [steps[index] for index in sorted(picked)]


RUN_TABLE_COLUMNS = (
    "model",
    "devices",
    "batch",
    "backend",
    "device name",
    "peak memory",
    "tokens/s",
    "max rel. loss error",
    "first step beyond tolerance",
)


def run_table(comparison: Comparison) -> str:
    """One Markdown row per run, in the columns of the published comparison (pastes into a README)."""
    worst = f"{comparison.max_rel_error:.1e}" if comparison.loss_steps else "—"
    rows = [
        _run_row(comparison.baseline, "baseline", "baseline"),
        _run_row(comparison.run, worst, "none" if comparison.first_beyond is None else str(comparison.first_beyond.step)),
    ]
    widths = [max(len(cell) for cell in column) for column in zip(RUN_TABLE_COLUMNS, *rows)]

    def line(cells):
        return "| " + " | ".join(cell.ljust(width) for cell, width in zip(cells, widths)) + " |"

    separator = "|" + "|".join("-" * (width + 2) for width in widths) + "|"
    return "\n".join([line(RUN_TABLE_COLUMNS), separator, *(line(row) for row in rows)])


def _run_row(series, max_error: str, first_beyond: str) -> tuple[str, ...]:
    """A run file's row; another program's log has only its format and name to show."""
    run = series.run_file
    if run is None:
        return ("—", "—", "—", series.format, Path(series.path).name, "—", "—", max_error, first_beyond)
    metadata, summary = run["metadata"], run["summary"]
    precision = metadata["precision"] + (" tf32" if metadata["tf32"] else "")
    return (
        run["preset"],
        str(metadata["world_size"]),
        str(metadata["global_batch"]),
        f"{metadata['backend']} ({precision})",
        metadata["device_name"],
        _peak_memory(summary),
        f"{summary['tokens_per_s']:,.0f}",
        max_error,
        first_beyond,
    )


def _peak_memory(summary: dict) -> str:
    """The device's peak allocation; a cpu has no device allocator (null in its run files, 0 in older
    ones), so its runs show the host's peak RSS, or "—" when that is not recorded either."""
    device_peak, host_peak = summary["peak_memory_bytes"], summary["host_peak_rss_bytes"]
    if device_peak:
        return f"{device_peak / 2**20:,.0f} MiB"
    if host_peak:
        return f"{host_peak / 2**20:,.0f} MiB host RSS"
    return "—"


def setting_notes(comparison: Comparison) -> list[str]:
    """One line per setting the runs differ in, and for steps left out or a schedule that differs: compared
    anyway, but the reader must know."""
    notes = [
        f"runs differ in {field}: baseline {baseline!r}, run {run!r}"
        for field, baseline, run in comparison.setting_differences
    ]
    if not comparison.run_files:
        unrecorded = [side.path for side in (comparison.baseline, comparison.run) if side.run_file is None]
        notes.append(
            f"compared the numbers only: {' and '.join(unrecorded)} record no settings (model, data, initial"
            " weights, batch), so nothing here says the two runs are the same experiment"
        )
    notes += comparison.alignment_notes
    notes += [note for note in (comparison.length_note, comparison.schedule_note) if note]
    return [f"note: {note}" for note in notes]


def verdict_line(comparison: Comparison) -> str:
    """The one-line result: within tolerance or diverged, and what the error size is consistent with."""
    if not comparison.loss_steps:
        return f"no loss to compare: neither rtol nor the industry criteria apply ({len(comparison.steps)} steps)"
    worst, steps = comparison.worst_step, len(comparison.loss_steps)
    cause = comparison.verdict
    recorded = reduced_precisions(comparison.baseline, comparison.run)
    if cause in PRECISION_OF and PRECISION_OF[cause] not in recorded:
        cause += " (neither run records it: check the backend's default matmul precision)"
    if cause == KNOWN_DIFFERENCE:
        cause += f" ({comparison.known_difference[1]}): rerun with the baseline's settings to judge the port"
    size = f"max rel. loss error {worst.rel_error:.1e} at step {worst.step}, {cause}"
    if comparison.first_beyond is None:
        return f"parity OK: {steps} steps within rtol {comparison.rtol:g}; {size}"
    first = comparison.first_beyond
    return (
        f"DIVERGED at step {first.step} of {steps} (rel. error {first.rel_error:.1e} > rtol "
        f"{comparison.rtol:g}); {size}"
    )


def band_verdict_line(comparison: Comparison, verdict: BandVerdict) -> str:
    """The one-line result against a band: within it (and how close the closest quantity came to its edge),
    or the first step and the quantities that left it."""
    judged = sorted({excursion.step for excursion in verdict.excursions})
    quantities = ", ".join(LABELS[quantity] for quantity in verdict.quantities())
    if not judged:
        return f"no step within the band's {verdict.band.steps} steps to judge"
    if verdict.first_out is None:
        closest = max(verdict.excursions, key=lambda excursion: excursion.used)
        return (
            f"within the band: {len(judged)} steps of {quantities}; closest to its edge: {LABELS[closest.quantity]}"
            f" at step {closest.step} ({_share(closest.used)} of the band)"
        )
    step, out = verdict.first_out
    first = out[0]
    left = ", ".join(LABELS[excursion.quantity] for excursion in out)
    return (
        f"DIVERGED at step {step} of {len(judged)}: the {left} left the band ({LABELS[first.quantity]}: run "
        f"{first.run:.6g}, baseline {first.baseline:.6g}, band ±{first.allowed:.2g})"
    )


def band_notes(verdict: BandVerdict) -> list[str]:
    notes = [f"note: band of {len(verdict.band.references)} reference runs ({', '.join(verdict.band.references)})"]
    if verdict.unjudged:
        notes.append(
            f"note: {len(verdict.unjudged)} compared steps lie past the band's {verdict.band.steps} and were not"
            " judged"
        )
    return notes


def criteria_lines(comparison: Comparison) -> list[str]:
    """The fixed industry criteria, one line each: name, figure, limit, pass or fail."""
    lines = ["industry criteria (fixed limits, blind to the training's own noise):"]
    for criterion in industry_criteria(comparison):
        figure = "-" if criterion.value is None else f"{criterion.value:.2%}"
        limit = ("<= " if criterion.inclusive else "< ") + f"{criterion.limit:.1%}"
        result = {True: "pass", False: "FAIL", None: "not logged"}[criterion.passed]
        lines.append(f"  {criterion.name:<64} {figure:>9}  {limit:>8}  {result}")
    note = length_note(comparison)
    if note:
        lines.append(f"  ({note})")
    return lines


JSON_SCHEMA = "portlayer.parity.compare/1"


def comparison_json(
    comparison: Comparison, baseline_path: str, run_path: str, plot: str | None, band: BandVerdict | None = None
) -> dict:
    """Everything the text says, for scripts: the verdict, the worst and first failing steps, the notes, the
    industry criteria, the band's verdict, and every compared step. An infinite error (a NaN loss) is null:
    JSON has no infinity."""
    first = comparison.first_beyond
    worst = comparison.worst_step if comparison.loss_steps else None
    baseline_steps, run_steps = comparison.lengths
    recorded = comparison.run.run_file or comparison.baseline.run_file
    return {
        "schema": JSON_SCHEMA,
        "baseline": baseline_path,
        "run": run_path,
        "formats": [comparison.baseline.format, comparison.run.format],
        "preset": recorded["preset"] if recorded else None,
        "rtol": comparison.rtol,
        "within_tolerance": comparison.within_tolerance,
        "verdict": comparison.verdict,
        "known_difference": None if comparison.known_difference is None else comparison.known_difference[1],
        "max_rel_error": None if worst is None else _finite(worst.rel_error),
        "worst_step": None if worst is None else worst.step,
        "first_step_beyond_rtol": None if first is None else first.step,
        "steps_compared": len(comparison.steps),
        "baseline_steps": baseline_steps,
        "run_steps": run_steps,
        "notes": [note.removeprefix("note: ") for note in setting_notes(comparison)],
        "criteria": [
            {"name": c.name, "value": c.value, "limit": c.limit, "passed": c.passed}
            for c in industry_criteria(comparison)
        ],
        "band": None if band is None else _band_json(band),
        "plot": plot,
        "steps": [
            {
                "step": delta.step,
                "baseline_loss": _finite(delta.baseline_loss),
                "run_loss": _finite(delta.run_loss),
                "rel_error": _finite(delta.rel_error),
                "grad_norm_rel_error": _finite(delta.error("grad_norm")),
                "lr_rel_error": _finite(delta.error("lr")),
            }
            for delta in comparison.steps
        ],
    }


def _band_json(verdict: BandVerdict) -> dict:
    out = verdict.first_out
    return {
        "within": verdict.within,
        "first_step_out": None if out is None else out[0],
        "quantities_out": [] if out is None else [excursion.quantity for excursion in out[1]],
        "references": list(verdict.band.references),
        "steps_not_judged": list(verdict.unjudged),
        "worst": {
            quantity: {"step": worst.step, "used": _finite(worst.used)}
            for quantity in verdict.quantities()
            if (worst := verdict.worst(quantity)) is not None
        },
    }


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
