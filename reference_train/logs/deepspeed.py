"""DeepSpeed's step log: what the engine itself prints.

Every `steps_per_print` steps the engine logs `[Rank 0] step=N, skipped=K, lr=[…], mom=[…]` (one lr per
parameter group: the first is read). It prints this after stepping the schedule, so the lr on the `step=N`
line is the one step N + 1 trains with (the `step=0` line at start-up: step 1's). The engine prints no loss,
except its pipeline engine (`steps: N loss: 0.0585 iter time (s): …`, that step's loss); a script's own loss
lines are the script's format, not DeepSpeed's (a CSV or JSONL it writes reads as such).
"""

from __future__ import annotations

import re

from portlayer.train.logs.numbers import Written
from portlayer.train.logs.series import Collector, Series, as_text, text_of

NAME = "deepspeed"
LABEL = "DeepSpeed log"

_PROGRESS = re.compile(r"\[Rank \d+\] step=(\d+), skipped=\d+, lr=\[\s*([^,\]\s]+)")
_PIPELINE = re.compile(r"\bsteps: (\d+) loss: (\S+) iter time \(s\):")


def sniff(content) -> bool:
    text = as_text(content)
    return text is not None and (_PROGRESS.search(text) is not None or _PIPELINE.search(text) is not None)


def read(path, content) -> Series:
    collected = Collector()
    for line in text_of(path, content, LABEL).splitlines():
        if progress := _PROGRESS.search(line):
            collected.add(int(progress.group(1)) + 1, lr=Written(progress.group(2)))
        elif pipeline := _PIPELINE.search(line):
            collected.add(int(pipeline.group(1)), loss=Written(pipeline.group(2)))
    return collected.series(str(path), LABEL)
