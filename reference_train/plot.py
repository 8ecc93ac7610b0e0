"""Draw a `Comparison`: both loss curves, and the relative error per step against rtol and the measured bands."""

from __future__ import annotations

import math
import os
from pathlib import Path

from portlayer.atomic import replacing
from portlayer.train.compare import BF16_LIMIT, ROUNDING_LIMIT, TF32_LIMIT, Comparison

# A log axis cannot show 0. Steps whose losses are identical are drawn as their own markers on a floor line
# labelled "0" at the bottom of the axis, never joined to the other steps (which made a passing run look
# like a zig-zag between the floor and 1e-8).
ERROR_FLOOR = 1e-9
# The low end of the errors bf16 autocast produced (docs/parity.md "Tolerance and what an error means"):
# its band overlaps TF32's.
BF16_MEASURED_LOW = 3e-4


def write_plot(
    comparison: Comparison, out: str | os.PathLike, names: tuple[str, str] = ("baseline", "run")
) -> Path:
    """Write the figure to `out` (format from its suffix, PNG usually), atomically: a failed write leaves
    no half-written file behind. `names` (the two files' names) tell the curves apart in the legend."""
    from matplotlib import pyplot as plt

    out = Path(out)
    figure = build_figure(comparison, names)
    try:
        with replacing(out) as temporary:
            figure.savefig(temporary, dpi=110)
    finally:
        plt.close(figure)
    return out


def build_figure(comparison: Comparison, names: tuple[str, str] = ("baseline", "run")):
    import matplotlib

    matplotlib.use("Agg")  # headless: CI machines and training nodes have no display
    from matplotlib import pyplot as plt

    deltas = comparison.loss_steps
    steps = [delta.step for delta in deltas]
    figure, (losses, relative) = plt.subplots(2, 1, figsize=(10, 7), sharex=True, constrained_layout=True)
    losses.plot(steps, [d.baseline_loss for d in deltas], label=curve_label("baseline", names[0], comparison.baseline))
    losses.plot(steps, [d.run_loss for d in deltas], "--", label=curve_label("run", names[1], comparison.run))
    losses.set_ylabel("training loss")
    recorded = comparison.run.run_file or comparison.baseline.run_file
    losses.set_title(f"{recorded['preset'] if recorded else comparison.run.format}: {comparison.verdict}")
    # Beside the axes, not on them: a diverged curve runs anywhere across the plot.
    losses.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")

    differing = [(d.step, d.rel_error) for d in deltas if d.rel_error > 0]
    identical = [d.step for d in deltas if d.rel_error == 0]
    if differing:
        relative.semilogy(
            *zip(*differing), linestyle="none", marker="o", markersize=4, color="black",
            label="|run - baseline| / baseline",
        )
    else:
        relative.set_yscale("log")
    relative.axhline(ERROR_FLOOR, color="tab:green", linewidth=0.8)
    if identical:
        relative.plot(
            identical, [ERROR_FLOOR] * len(identical), linestyle="none", marker="v", color="tab:green",
            label=f"identical loss (error 0): {len(identical)} of {len(deltas)} steps",
        )
    relative.axhline(comparison.rtol, color="red", linestyle="--", label=f"rtol {comparison.rtol:g}")
    bands = (
        (ERROR_FLOOR, ROUNDING_LIMIT, "rounding-level", "tab:green"),
        (ROUNDING_LIMIT, TF32_LIMIT, "TF32", "tab:orange"),
        (BF16_MEASURED_LOW, BF16_LIMIT, "bf16", "tab:purple"),
    )
    for low, high, name, color in bands:
        relative.axhspan(low, high, color=color, alpha=0.12, label=f"{name} band")
    if comparison.first_beyond is not None:
        relative.axvline(comparison.first_beyond.step, color="red", alpha=0.5)
    finite = [error for _, error in differing if math.isfinite(error)]
    # The floor is where 0 is drawn: its tick says so rather than 1e-9.
    ticks = [tick for tick in relative.get_yticks() if tick > ERROR_FLOOR * 1.5]
    relative.set_yticks([ERROR_FLOOR, *ticks], ["0", *(f"$10^{{{round(math.log10(t))}}}$" for t in ticks)])
    relative.set_ylim(ERROR_FLOOR / 3, max([*finite, BF16_LIMIT]) * 5)
    relative.set_xlabel("step")
    relative.set_ylabel("relative loss error")
    relative.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    return figure


def curve_label(role: str, name: str, series) -> str:
    """`baseline gpt2-tiny.cpu-cpu.json, 2026-11-23: cpu x2 (AMD EPYC)`: which file and when, then where (a
    log of another program: which file, and its format)."""
    if series.run_file is None:
        return f"{role} {name}: {series.format}"
    metadata = series.run_file["metadata"]
    created = metadata["created"][:10] or "undated"
    where = f"{metadata['backend']} x{metadata['world_size']} ({metadata['device_name']})"
    return f"{role} {name}, {created}: {where}" if name != role else f"{role}, {created}: {where}"
