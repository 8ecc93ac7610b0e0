"""Warnings attributed to the user's line, never to portlayer's own frames.

Two ways a warning can land on a portlayer frame:
- portlayer warns itself: `warnings.warn(..., stacklevel=stacklevel())` points it at the first caller
  outside portlayer (and outside `contextlib`, for `with portlayer.patched():`);
- torch warns inside a call the drop-in wraps (`torch.tensor(t)` through `portlayer.torch`, `x.to(…)`
  through the patched `Tensor.to`): C++ warnings name the innermost Python frame, and torch's own
  `stacklevel=2` names its caller, which is the drop-in's wrapper in both cases. Catching and re-raising
  each call's warnings would cost every `.to()` far more than the call itself, so the drop-in instead
  corrects the location when a warning is shown (`showing_user_line`, installed by `portlayer.patch()`):
  a warning located in portlayer is shown at the first frame outside it, the line that made the call.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import warnings
from collections.abc import Callable

_PORTLAYER = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_PASSED_THROUGH = (_PORTLAYER, os.path.abspath(contextlib.__file__), os.path.abspath(warnings.__file__))


def _passed_through(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_PASSED_THROUGH)


def stacklevel() -> int:
    """The `stacklevel` for a `warnings.warn` made by the function calling this: its first caller outside
    portlayer."""
    frame, level = sys._getframe(1), 1
    while frame is not None and _passed_through(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    return level


def _user_frame(located_in: str):
    """The first frame outside portlayer below the (innermost) frame running `located_in`, if any."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename != located_in:
        frame = frame.f_back
    while frame is not None and _passed_through(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def showing_user_line(original: Callable) -> Callable:
    """`warnings.showwarning` that shows a warning located in portlayer at the user's line instead."""

    @functools.wraps(original)
    def showwarning(message, category, filename, lineno, file=None, line=None):
        if _passed_through(filename):
            frame = _user_frame(filename)
            if frame is not None:
                filename, lineno, line = frame.f_code.co_filename, frame.f_lineno, None
        return original(message, category, filename, lineno, file, line)

    return showwarning
