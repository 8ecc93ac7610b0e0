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

# Saving: gathered whole, on rank 0's host memory only (a pipeline stage's writer is not rank 0: on every rank of
# the stage). Loading: every rank reads the whole file.
ON_RANK_0 = StateDictOptions(full_state_dict=True, cpu_offload=True)
ON_EVERY_RANK = StateDictOptions(full_state_dict=True)


class GatheredState:
    """`Parallel.full_state` / `load_full_state` for a `core` of DTensor parameters (a mixin: every rank calls
    them, they are collective)."""

    gathered_to = ON_RANK_0

    def full_state(self) -> dict:
        return {
            "model": get_model_state_dict(self.core, options=self.gathered_to),
            "optimizer": get_optimizer_state_dict(self.core, self.optimizer, options=self.gathered_to),
        }

    def load_full_state(self, state: dict) -> None:
        set_model_state_dict(self.core, state["model"], options=ON_EVERY_RANK)
        set_optimizer_state_dict(self.core, self.optimizer, state["optimizer"], options=ON_EVERY_RANK)
