"""Parity mode's switch for dropout that no config field reaches.

Some model code calls `nn.functional.dropout(x, p=0.1, training=self.training)` with `p` written in the
source; zeroing config fields cannot reach it. Inside `functional_dropout_off()`, torch's functional
dropouts (which `nn.Dropout` modules call too) return their input unchanged. The patch is process-wide
while the block runs and undone on exit; the trainer holds it for the whole parity run.
"""

from __future__ import annotations

import contextlib

import torch.nn.functional as F

_DROPOUTS = ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout")


def _identity(input, *args, **kwargs):
    return input


@contextlib.contextmanager
def functional_dropout_off():
    saved = {name: getattr(F, name) for name in _DROPOUTS if hasattr(F, name)}
    try:
        for name in saved:
            setattr(F, name, _identity)
        yield
    finally:
        for name, function in saved.items():
            setattr(F, name, function)
