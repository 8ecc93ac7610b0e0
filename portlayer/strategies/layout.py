"""How a run's ranks split the work, as Megatron names it: tensor parallel (`--tp`, Megatron's
`--tensor-model-parallel-size`) inside groups of consecutive ranks, data parallel across those groups.

    layout = Layout(tensor=2)
    layout.data_parallel(4)          # 2: ranks {0, 1} and {2, 3} each hold one split copy of the model
    layout.check_model(config)       # the attention heads split whole over the tensor-parallel ranks

The checks are arithmetic on sizes, with no torch: the launcher makes them before any rank starts, and the ranks
make them again.
"""

from __future__ import annotations

from dataclasses import dataclass

from portlayer.errors import PortlayerError
from portlayer.strategies import get_strategy


@dataclass(frozen=True)
class Layout:
    tensor: int = 1  # ranks that split each layer's matmuls (1: none)

    def data_parallel(self, world_size: int) -> int:
        """How many copies of the model train on different data: the world size over the tensor-parallel size."""
        if world_size % self.tensor:
            raise PortlayerError(
                f"world size {world_size} is no multiple of --tp {self.tensor}: the ranks form groups of --tp"
            )
        return world_size // self.tensor

    def groups(self, world_size: int) -> tuple[list[list[int]], list[list[int]]]:
        """(the tensor-parallel groups, the data-parallel groups) of ranks: consecutive ranks split a model, as
        Megatron places them (they share a node, where the splitting's collectives are fastest)."""
        self.data_parallel(world_size)  # refuses a world the groups do not fill
        tensor_groups = [list(range(first, first + self.tensor)) for first in range(0, world_size, self.tensor)]
        data_groups = [list(range(offset, world_size, self.tensor)) for offset in range(self.tensor)]
        return tensor_groups, data_groups

    def check_training(self, strategy: str, compile: bool = False) -> None:
        """Refuse what does not compose with tensor parallel (yet): a data-parallel strategy other than ddp, and
        torch.compile (inductor fails in the split model's backward: BackendCompilerFailed, torch 2.13)."""
        if self.tensor == 1:
            return
        if get_strategy(strategy).engine != "ddp":
            raise PortlayerError(f"--tp composes with --strategy ddp, not yet with {strategy}")
        if compile:
            raise PortlayerError("--tp trains eager: inductor fails in the split model's backward (drop --compile)")

    def check_model(self, config) -> None:
        """Refuse a model whose attention heads (a transformers config's) do not split whole over the ranks."""
        if self.tensor == 1:
            return
        heads = getattr(config, "num_attention_heads", None)
        key_value_heads = getattr(config, "num_key_value_heads", None) or heads
        for count, what in ((heads, "attention heads"), (key_value_heads, "key-value heads")):
            if count is not None and count % self.tensor:
                raise PortlayerError(
                    f"the model's {count} {what} do not split over --tp {self.tensor}: choose a --tp that "
                    f"divides {count}"
                )
