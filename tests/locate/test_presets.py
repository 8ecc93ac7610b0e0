"""The three reference presets run through `locate` and `dump` + `diff` without a false alarm."""

from __future__ import annotations

import pytest
import torch

from portlayer.train.locate import collect, diff, locate
from portlayer.train.locate.source import from_preset
from tests.locate.models import one_thread  # noqa: F401 (a fixture)


@pytest.mark.parametrize("preset", ["gpt2-tiny", "bert-base-uncased-tiny", "mixtral-8x7b-tiny"])
def test_preset_is_clean_against_the_oracle_and_across_dtypes(preset):
    model, batch = from_preset(preset, batch_size=2, seq_len=16, seed=0)
    result = locate(model, batch)
    assert not result.diverged, result.render()
    # Correct float32 kernels stay within a few dozen epsilons of float64 on their own: far below tolerance.
    assert (
        max(row.basis for row in result.rows if row.basis is not None) < 64 * torch.finfo(torch.float32).eps
    )
    exact = collect(model, batch, model_name=preset, dtype=torch.float64)
    assert not diff(exact, collect(model, batch, model_name=preset)).diverged
