"""Outside parity mode the trainer's attention is torch's sdpa told that its blocks have no padding
(reference_train/attention.py): no mask reaches sdpa, also while torch.compile traces the model, and the
losses are those of transformers' own sdpa."""

import pytest
import torch
import transformers.integrations.sdpa_attention as sdpa_module
from transformers.masking_utils import (
    bidirectional_mask_function,
    causal_mask_function,
    sliding_window_causal_mask_function,
)

from portlayer.train import attention
from portlayer.train.presets import build_model, example_batch, get_preset
from tests.trainer.helpers import needs_compile

TINY = ("gpt2-tiny", "bert-base-uncased-tiny", "mixtral-8x7b-tiny")


@pytest.fixture
def masks_given(monkeypatch):
    """The attention masks sdpa is called with, in order (None where it applies causality itself)."""
    seen = []
    forward = sdpa_module.sdpa_attention_forward

    def spy(module, query, key, value, attention_mask, **kwargs):
        seen.append(attention_mask)
        return forward(module, query, key, value, attention_mask, **kwargs)

    monkeypatch.setattr(sdpa_module, "sdpa_attention_forward", spy)
    # The registered implementation holds the function itself: register the spy under both names.
    from transformers import AttentionInterface

    monkeypatch.setitem(AttentionInterface._global_mapping, "sdpa", spy)
    monkeypatch.setitem(AttentionInterface._global_mapping, attention.registered(), spy)
    return seen


@pytest.mark.parametrize("name", TINY)
def test_outside_parity_sdpa_gets_no_mask_and_gives_transformers_sdpa_losses(name, masks_given):
    preset = get_preset(name)
    batch = example_batch(preset)
    ours = build_model(preset, parity=False).eval()
    theirs = build_model(preset, parity=False, attention="sdpa").eval()
    assert ours.config._attn_implementation == attention.NAME
    with torch.no_grad():
        masks_given.clear()
        loss = ours(**batch).loss
        assert masks_given and all(mask is None for mask in masks_given)
        assert loss.item() == pytest.approx(theirs(**batch).loss.item(), rel=1e-6)


@needs_compile
def test_under_compile_sdpa_still_gets_no_mask_where_transformers_own_builds_one(masks_given):
    preset = get_preset("gpt2-tiny")
    batch = example_batch(preset)
    given = {}
    for implementation in ("sdpa", None):
        torch._dynamo.reset()
        model = build_model(preset, parity=False, attention=implementation)
        model.compile(backend="eager")  # dynamo's tracing decides the mask; no kernels need generating
        masks_given.clear()
        model(**batch).loss.backward()
        given[implementation or attention.NAME] = [mask is None for mask in masks_given]
    # transformers cannot read the mask while tracing, and builds one (torch < 2.14); ours knows.
    assert given[attention.NAME] == [True] * len(given[attention.NAME]) != []
    if torch.__version__ < "2.14":
        assert not any(given["sdpa"])


def test_other_patterns_get_transformers_own_mask():
    shape = {"batch_size": 2, "q_length": 8, "kv_length": 8, "device": "cpu"}
    assert attention.mask_of_whole_blocks(mask_function=causal_mask_function, **shape) is None
    assert attention.mask_of_whole_blocks(mask_function=bidirectional_mask_function,
                                          allow_is_bidirectional_skip=True, **shape) is None  # fmt: skip
    window = attention.mask_of_whole_blocks(mask_function=sliding_window_causal_mask_function(3), local_size=3,
                                            **shape)  # fmt: skip
    assert window is not None and window.shape == (2, 1, 8, 8)
    assert window[0, 0, 7].tolist() == [False] * 5 + [True] * 3
    # Where transformers may not skip (packed sequences, a compiled decode), its own mask, as it builds it.
    kept = attention.mask_of_whole_blocks(mask_function=causal_mask_function, allow_is_causal_skip=False, **shape)
    assert kept is not None and kept[0, 0].tolist() == torch.ones(8, 8, dtype=torch.bool).tril().tolist()
