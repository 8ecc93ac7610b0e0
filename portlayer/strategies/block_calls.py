"""How a transformers model hands its hidden states to a block and takes them back, for the hooks that split a
model (pipeline stages, sequence parallel): in as the first positional argument or `hidden_states=`, out as the
block's output or the first item of its tuple."""

from __future__ import annotations

from collections.abc import Callable

import torch

Change = Callable[[torch.Tensor], torch.Tensor]


def changing_input(change: Change):
    """A forward pre-hook (`with_kwargs=True`) that calls the block with `change(hidden states)`."""

    def hook(module, args, kwargs):
        if args:
            return (change(args[0]), *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": change(kwargs["hidden_states"])}

    return hook


def hidden_output(output) -> torch.Tensor:
    """The hidden states a block returned."""
    return output[0] if isinstance(output, tuple) else output


def changing_output(change: Change):
    """A forward hook that returns the block's output with `change(hidden states)` in place of them."""

    def hook(module, inputs, output):
        changed = change(hidden_output(output))
        return (changed, *output[1:]) if isinstance(output, tuple) else changed

    return hook
