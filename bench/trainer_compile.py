"""What `--compile` buys the reference trainer on this machine's cpu: its step with the model compiled
(torch.compile, inductor) against the same step eager, on two models of the same initial weights, stepped
alternately on one cpu thread (as the other trainer benches, `_reference.py`: a shared machine's drift and load
reach both sides alike). The compiled side's first steps, which compile, are in the warm-up left out.

Separate whole runs (bench/trainer_throughput.py) measured the same ratio here as 0.6 and as 6 in one hour: the
machine's load lands on whichever run is going. Run: python bench/trainer_compile.py
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # run alone or by `python -m bench`: find _reference
from _reference import WARMUP, preset_options, reference_step, report, timed_reference_step  # noqa: E402


def main() -> None:
    options = preset_options()
    eager = reference_step(options)
    compiled = reference_step(dataclasses.replace(options, compile=True))
    mine, anchor = [], []
    for index in range(1, options.steps + 1):
        # In turns, so that neither side always runs right after the other.
        sides = (compiled, eager) if index % 2 else (eager, compiled)
        seconds = {id(side): timed_reference_step(side, index) for side in sides}
        if index > WARMUP:
            mine.append(seconds[id(compiled)])
            anchor.append(seconds[id(eager)])
    report(options, mine, anchor, "the same step, eager", goal="--compile / eager, tokens/s; > 1 is faster",
           throughput=True)  # fmt: skip


if __name__ == "__main__":
    main()
