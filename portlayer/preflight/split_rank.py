"""One rank of a model split by tensor parallel, on the fake step: the trainer's own split, over a fake world.

    with SplitRank.over(layout, world_size=4, make_optimizer=adamw, max_grad_norm=1.0) as split:
        run_fake_step(split.build(lambda: source.build(training, layers)), batch,
                      make_optimizer=split.optimizer, clip_gradients=split.clip_gradients, ...)

Rank 0 of a fake process group of the world size (torch's "fake" backend: collectives do nothing, their
outputs are allocated as the real ones are), in the groups the trainer forms (`Layout.groups`). The model is
split by the trainer's `TensorParallel.prepare`: its plan from the Linear call order, torch's ColwiseParallel
and RowwiseParallel layer by layer, AdamW over the split and the whole parameters apart; and the trainer's
clipping, which averages the gradients over the data-parallel group in one flat all-reduce (a whole copy of
the rank's gradients while it runs) and all-reduces the norm's squares over the tensor-parallel group. So
the rank's shards, its activations (each split layer's local part, each all-reduce's output) and its
optimizer peak are the ones the trainer allocates.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch

from portlayer.strategies.layout import Layout

RANK = 0  # the rank stepped: the first of its tensor group, data group and pipeline (every split rank is alike)


@dataclass
class SplitRank:
    layout: Layout
    tensor_group: object
    data_group: object
    make_optimizer: Callable  # parameters (or groups of them) -> optimizer
    max_grad_norm: float | None
    parallel: object = field(default=None, init=False)  # the trainer's TensorParallel, once built

    @classmethod
    @contextlib.contextmanager
    def over(cls, layout: Layout, world_size: int, make_optimizer: Callable,
             max_grad_norm: float | None) -> Iterator[SplitRank]:
        """Rank 0 of a fake world of `world_size` ranks placed by `layout`, its groups made as the trainer makes
        them."""
        import torch.distributed as dist

        from portlayer.preflight.fake_step import fake_process_group

        groups = layout.groups(world_size)
        with fake_process_group(world_size):
            tensor = next(ranks for ranks in groups.tensor if RANK in ranks)
            data = next(ranks for ranks in groups.data if RANK in ranks)
            # Named by their kind: the step's recording of collectives tells them apart by it.
            yield cls(layout, dist.new_group(tensor, group_desc="tp"), dist.new_group(data, group_desc="dp"),
                      make_optimizer, max_grad_norm)

    def build(self, build_model: Callable[[], torch.nn.Module]) -> Callable[[], torch.nn.Module]:
        """`build_model`, then split by the trainer's tensor parallel (with the fake step's tensors)."""

        def build() -> torch.nn.Module:
            from portlayer.strategies import get_strategy
            from portlayer.strategies.parallel import Setup
            from portlayer.strategies.tensor_parallel import TensorParallel

            model = build_model()
            setup = Setup(group=self.data_group, tensor_group=self.tensor_group, device=torch.device("cpu"),
                          make_optimizer=self.make_optimizer, make_scheduler=lambda optimizer: None,
                          micro_batch=1, grad_accum=1, max_grad_norm=_no_limit(self.max_grad_norm), layout=self.layout)
            self.parallel = TensorParallel.prepare(get_strategy("ddp"), model, setup)
            return model

        return build

    def optimizer(self, model: torch.nn.Module) -> torch.optim.Optimizer:
        """The optimizer the split made (over the split and the whole parameters apart)."""
        return self.parallel.optimizer

    def clip_gradients(self) -> None:
        self.parallel.clip_gradients()


def _no_limit(max_grad_norm: float | None) -> float:
    # The trainer's split always clips; no clipping is clipping at an infinite norm (the same memory).
    return float("inf") if max_grad_norm is None else max_grad_norm
