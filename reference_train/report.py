"""Render a `Comparison` as text (the per-step table, the run table in the published style, the verdict
line) or as one JSON document (`parity compare --json`)."""

from __future__ import annotations

import math

from portlayer.train.compare import (
    KNOWN_DIFFERENCE,
    PRECISION_OF,
    Comparison,
    StepDelta,
    reduced_precisions,
)

# Steps shown when not asked for all of them: enough to see the trend, plus every step worth looking at.
SUMMARY_ROWS = 10


def step_table(comparison: Comparison, all_steps: bool = False) -> str:
    """Per-step losses and relative error; a sample of the steps unless `all_steps`, always with the
    first step beyond tolerance and the worst step."""
    steps = comparison.steps
    shown = steps if all_steps else _sample(comparison)
    first_beyond, worst = comparison.first_beyond, comparison.worst_step
    lines = [f"{'step':>5}  {'baseline loss':>14}  {'run loss':>14}  {'rel error':>9}"]
    for delta in shown:
        marks = []
        if delta is first_beyond:
            marks.append(f"first beyond rtol {comparison.rtol:g}")
        if delta is worst and delta.rel_error > 0:
            marks.append("max")
        note = f"  <- {', '.join(marks)}" if marks else ""
        lines.append(
            f"{delta.step:>5}  {delta.baseline_loss:>14.8f}  {delta.run_loss:>14.8f}  {delta.rel_error:>9.2e}{note}"
        )
    if len(shown) < len(steps):
        lines.append(f"({len(shown)} of {len(steps)} steps shown; --all-steps for every step)")
    return "\n".join(lines)


def _sample(comparison: Comparison) -> list[StepDelta]:
    steps = comparison.steps
    stride = max(1, -(-len(steps) // SUMMARY_ROWS))
    picked = {index for index in range(0, len(steps), stride)} | {len(steps) - 1}
    picked |= {steps.index(comparison.worst_step)}
    if comparison.first_beyond is not None:
        picked.add(steps.index(comparison.first_beyond))
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
    rows = [
        _run_row(comparison.baseline, "baseline", "baseline"),
        _run_row(
            comparison.run,
            f"{comparison.max_rel_error:.1e}",
            "none" if comparison.first_beyond is None else str(comparison.first_beyond.step),
        ),
    ]
    widths = [max(len(cell) for cell in column) for column in zip(RUN_TABLE_COLUMNS, *rows)]

    def line(cells):
        return "| " + " | ".join(cell.ljust(width) for cell, width in zip(cells, widths)) + " |"

    separator = "|" + "|".join("-" * (width + 2) for width in widths) + "|"
    return "\n".join([line(RUN_TABLE_COLUMNS), separator, *(line(row) for row in rows)])


def _run_row(run: dict, max_error: str, first_beyond: str) -> tuple[str, ...]:
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
    notes += [note for note in (comparison.length_note, comparison.schedule_note) if note]
    return [f"note: {note}" for note in notes]


def verdict_line(comparison: Comparison) -> str:
    """The one-line result: within tolerance or diverged, and what the error size is consistent with."""
    worst, steps = comparison.worst_step, len(comparison.steps)
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


JSON_SCHEMA = "portlayer.parity.compare/1"


def comparison_json(comparison: Comparison, baseline_path: str, run_path: str, plot: str | None) -> dict:
    """Everything the text says, for scripts: the verdict, the worst and first failing steps, the notes
    and every compared step. An infinite error (a NaN loss) is null: JSON has no infinity."""
    first, worst = comparison.first_beyond, comparison.worst_step
    baseline_steps, run_steps = comparison.lengths
    return {
        "schema": JSON_SCHEMA,
        "baseline": baseline_path,
        "run": run_path,
        "preset": comparison.run["preset"],
        "rtol": comparison.rtol,
        "within_tolerance": comparison.within_tolerance,
        "verdict": comparison.verdict,
        "known_difference": None if comparison.known_difference is None else comparison.known_difference[1],
        "max_rel_error": _finite(worst.rel_error),
        "worst_step": worst.step,
        "first_step_beyond_rtol": None if first is None else first.step,
        "steps_compared": len(comparison.steps),
        "baseline_steps": baseline_steps,
        "run_steps": run_steps,
        "notes": [note.removeprefix("note: ") for note in setting_notes(comparison)],
        "plot": plot,
        "steps": [
            {
                "step": delta.step,
                "baseline_loss": _finite(delta.baseline_loss),
                "run_loss": _finite(delta.run_loss),
                "rel_error": _finite(delta.rel_error),
            }
            for delta in comparison.steps
        ],
    }


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None
