"""Numbers as a log wrote them, and what their writing can no longer tell apart.

A log rounds: Megatron prints a loss with 7 significant digits (`%.6E`) and a gradient norm with 3 decimals,
ms-swift rounds every float to 8 decimals (an lr of 1.1261e-07 reads 1.1e-07), old HuggingFace files round the
loss to 4. Two runs whose values differ by less than that cannot be told apart, so a comparison allows it.
How a file was written is read from all its values of one quantity together: one value cannot say it (Python
writes 0.0002 for the float 2e-4, exactly, and a writer that rounds to 4 decimals writes it too).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

# A decimal number: sign, digits before and after the point, exponent.
_DECIMAL = re.compile(r"[+-]?(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?")


class Written(float):
    """A float read from text, keeping the text: how many digits its writer gave it."""

    text: str

    def __new__(cls, text: str) -> Written:
        number = super().__new__(cls, text)
        number.text = text.strip()
        return number


def load_json(text: str):
    """JSON as Python writes it: `NaN`, `Infinity` and `-Infinity` allowed (json.dumps writes them), every float
    a `Written`."""
    return json.loads(text, parse_float=Written, parse_constant=float)


@dataclass(frozen=True)
class Resolution:
    """What a quantity's writing hides: |a - b| up to `absolute + relative * |value|` is rounding."""

    absolute: float = 0.0
    relative: float = 0.0

    def of(self, value: float) -> float:
        return self.absolute + self.relative * abs(value)


EXACT = Resolution()
# float32 (TensorBoard's simple_value): half a unit in the last place.
FLOAT32 = Resolution(relative=2.0**-24)


def resolution(values: Iterable[float]) -> Resolution:
    """How the values of one quantity were written, read from all of them. All in exponent notation with a
    point and the same number of digits (`%.6E`): significant digits, a relative resolution. Otherwise decimals:
    the most decimals any value has (a writer that rounds to 8 decimals writes some with fewer, never one with
    more). A quantity that takes one value only (a constant learning rate) says nothing: Python writes the float
    1e-05 as `1e-05`, exactly, so it is taken as exact. Values not read from text (floats a binary format
    stored) are exact here; their own precision is the reader's to add."""
    texts = {value.text for value in values if isinstance(value, Written) and math.isfinite(value)}
    shapes = [shape for shape in map(_DECIMAL.fullmatch, texts) if shape is not None]
    if len(shapes) < 2:
        return EXACT
    # Digits of the mantissa as written: a zero (`0.000000E+00`) has as many as any other value of the column.
    mantissas = {len(shape.group(1) + (shape.group(2) or "")) for shape in shapes}
    if all(shape.group(2) and shape.group(3) for shape in shapes) and len(mantissas) == 1:
        (digits,) = mantissas
        return Resolution(relative=0.5 * 10.0 ** (1 - digits))
    decimals = max(len(shape.group(2) or "") - int(shape.group(3) or 0) for shape in shapes)
    return Resolution(absolute=0.5 * 10.0**-decimals)


def rounded_to(decimals: int) -> Resolution:
    """A writer that rounds to `decimals` decimal places (`round(x, 8)`: ms-swift)."""
    return Resolution(absolute=0.5 * 10.0**-decimals)
