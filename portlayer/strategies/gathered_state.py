"""The whole model and optimizer state of a model whose parameters are DTensors (split by fsdp2 or tensor
parallel): gathered to full tensors for a checkpoint, split again on loading. So a checkpoint is the same file
under every strategy and layout, and moves between them."""

from __future__ import annotations

from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

# Saving: gathered whole, on rank 0's host memory only. Loading: every rank reads the whole file.
_SAVE = StateDictOptions(full_state_dict=True, cpu_offload=True)
_LOAD = StateDictOptions(full_state_dict=True)


class GatheredState:
    """`Parallel.full_state` / `load_full_state` for a `core` of DTensor parameters (a mixin: every rank calls
    them, they are collective)."""

    def full_state(self) -> dict:
        return {
            "model": get_model_state_dict(self.core, options=_SAVE),
            "optimizer": get_optimizer_state_dict(self.core, self.optimizer, options=_SAVE),
        }

    def load_full_state(self, state: dict) -> None:
        set_model_state_dict(self.core, state["model"], options=_LOAD)
        set_optimizer_state_dict(self.core, self.optimizer, state["optimizer"], options=_LOAD)
