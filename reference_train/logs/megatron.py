"""Megatron-LM's and MindSpeed-LLM's training log: the line `training_log` prints every `--log-interval`
iterations on the last rank,

     [2025-11-14 10:13:12] iteration        1/      20 | … | learning rate: 1.491690E-04 | … | lm loss: 1.099230E+01 | loss scale: 1.0 | grad norm: 62.521 | … | number of nan iterations:   0 |

(MindSpeed-LLM's FSDP2 backend writes `INFO [ts] >>  iteration N/ M | …`, another of its trainers
`iteration: N | … | lm loss: 1.2345`). `lm loss` is the mean over the interval's iterations; the learning rate
and the gradient norm are the logged iteration's. Megatron prints no loss when it is NaN (the field is simply
missing; `number of nan iterations` counts them), and no gradient norm for a skipped update. Validation lines
(`validation loss at iteration N | lm loss value: …`) are not training steps and are left out.
"""

from __future__ import annotations

import math
import re

from portlayer.train.logs.numbers import Written
from portlayer.train.logs.series import Collector, Series, as_text, text_of

NAME = "megatron"
LABEL = "Megatron-LM log"

_ITERATION = re.compile(r"\biteration:?\s+(\d+)(?:\s*/\s*\d+)?\s*\|(.*)")
_FIELD = re.compile(r"\s*([^:|]+?):\s*([^|]*?)\s*(?:\||$)")
_FIELDS = {"lm loss": "loss", "grad norm": "grad_norm", "learning rate": "lr"}


def _fields(rest: str) -> dict[str, str]:
    return {name.strip(): value for name, value in _FIELD.findall(rest)}


def sniff(content) -> bool:
    text = as_text(content)
    if text is None:
        return False
    return any(
        _ITERATION.search(line) is not None and ("lm loss" in line or "elapsed time per iteration" in line)
        for line in text.splitlines()
    )


def _number(text: str | None) -> Written | None:
    try:
        return None if text is None else Written(text)
    except ValueError:
        return None


def read(path, content) -> Series:
    collected = Collector()
    for line in text_of(path, content, LABEL).splitlines():
        match = _ITERATION.search(line)
        if match is None:
            continue
        fields = _fields(match.group(2))
        values = {quantity: _number(fields.get(name)) for name, quantity in _FIELDS.items()}
        if values["loss"] is None and (_number(fields.get("number of nan iterations")) or 0) > 0:
            values["loss"] = math.nan  # Megatron leaves a NaN loss out of the line and counts it
        collected.add(int(match.group(1)), **values)
    return collected.series(str(path), LABEL, loss_is_interval_mean=True)
