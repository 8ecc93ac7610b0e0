"""The attention of the trainer's runs outside parity mode: torch's sdpa, told that no token is padding.

The trainer trains on whole blocks of its corpus (reference_train/data.py): its attention masks are all ones.
transformers gives sdpa no mask (so sdpa applies causality itself, `is_causal`, and may use its flash kernels)
only where it can see that from the mask's values, and it does not look while torch.compile traces the model
(torch < 2.14): `--compile` runs then build a (batch, 1, tokens, tokens) mask every step and lose the flash
kernels. Under the name below, the mask function knows the answer without reading the mask: no mask where the
pattern is the plain causal or bidirectional one; anything else (a sliding window, packed or blockwise
sequences) gets transformers' own sdpa mask, unchanged.
"""

from __future__ import annotations

from functools import cache

NAME = "sdpa_whole_blocks"


@cache
def registered() -> str:
    """Register the implementation with transformers (once a process) and return its name."""
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(NAME, sdpa_attention_forward)
    AttentionMaskInterface.register(NAME, mask_of_whole_blocks)
    return NAME


def mask_of_whole_blocks(*, mask_function, q_length: int, kv_length: int, local_size: int | None = None,
                         allow_is_causal_skip: bool = True, allow_is_bidirectional_skip: bool = False, **kwargs):  # fmt: skip
    from transformers.masking_utils import bidirectional_mask_function, causal_mask_function, sdpa_mask

    whole = q_length == kv_length and (local_size is None or local_size >= kv_length)
    if whole and mask_function is causal_mask_function and allow_is_causal_skip:
        return None
    if whole and mask_function is bidirectional_mask_function and allow_is_bidirectional_skip:
        return None
    return sdpa_mask(mask_function=mask_function, q_length=q_length, kv_length=kv_length, local_size=local_size,
                     allow_is_causal_skip=allow_is_causal_skip,
                     allow_is_bidirectional_skip=allow_is_bidirectional_skip, **kwargs)  # fmt: skip
