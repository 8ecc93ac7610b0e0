"""Draw a `Comparison`: both loss curves, and the relative error per step against rtol and the measured bands."""

from __future__ import annotations

import os
from pathlib import Path

from portlayer.train.compare import BF16_LIMIT, ROUNDING_LIMIT, TF32_LIMIT, Comparison

from portlayer.atomic import replacing

# A log axis cannot show 0 (identical losses): such steps are drawn on this floor.
ERROR_FLOOR = 1e-9
# The low end of the errors bf16 autocast produced (DESIGN.md "Parity notes"): its band overlaps TF32's.
BF16_MEASURED_LOW = 3e-4


def write_plot(comparison: Comparison, out: str | os.PathLike) -> Path:
    """Write the figure to `out` (format from its suffix, PNG usually), atomically: a failed write leaves
    no half-written file behind."""
    import matplotlib

    matplotlib.use("Agg")  # headless: CI machines and training nodes have no display
    from matplotlib import pyplot as plt

    out = Path(out)
    steps = [delta.step for delta in comparison.steps]
    errors = [max(delta.rel_error, ERROR_FLOOR) for delta in comparison.steps]
    baseline_label = _label(comparison.baseline)
    run_label = _label(comparison.run)

    figure, (losses, relative) = plt.subplots(2, 1, figsize=(8, 7), sharex=True, constrained_layout=True)
    losses.plot(
        steps, [delta.baseline_loss for delta in comparison.steps], label=f"baseline: {baseline_label}"
    )
    losses.plot(steps, [delta.run_loss for delta in comparison.steps], "--", label=f"run: {run_label}")
    losses.set_ylabel("training loss")
    losses.set_title(f"{comparison.run['preset']}: {comparison.verdict}")
    losses.legend()

    relative.semilogy(
        steps,
        errors,
        marker=".",
        color="black",
        label=f"|run - baseline| / baseline (0 drawn at {ERROR_FLOOR:g})",
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
    relative.set_ylim(ERROR_FLOOR / 2, max(max(errors), BF16_LIMIT) * 5)
    relative.set_xlabel("step")
    relative.set_ylabel("relative loss error")
    relative.legend(fontsize="small", loc="upper left")

    try:
        with replacing(out) as temporary:
            figure.savefig(temporary, dpi=110)
    finally:
        plt.close(figure)
    return out


def _label(run: dict) -> str:
    metadata = run["metadata"]
    return f"{metadata['backend']} x{metadata['world_size']} ({metadata.get('device_name', '?')})"
