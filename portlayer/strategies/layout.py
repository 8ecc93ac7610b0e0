"""How a run's ranks split the work, as Megatron names it: tensor parallel (`--tp`, Megatron's
`--tensor-model-parallel-size`) inside groups of consecutive ranks, with sequence parallel (`--sp`) over the same
groups; pipeline parallel (`--pp`, `--pipeline-model-parallel-size`) across stages of consecutive blocks; data
parallel over the copies that remain.

    layout = Layout(tensor=2, pipeline=2)
    layout.data_parallel(8)          # 2 copies of the model, each split into 2 stages of 2 tensor-parallel ranks
    layout.check_model(config)       # the heads split whole over --tp, the layers whole over --pp

Ranks are placed as Megatron places them by default: tensor-parallel ranks vary fastest (consecutive ranks share a
node, where the splitting's collectives are fastest), then data parallel, then the pipeline stage, so that

    rank = (stage * data_parallel + copy) * tensor + split

The checks are arithmetic on sizes, with no torch: the launcher makes them before any rank starts, and the ranks
make them again.
"""

from __future__ import annotations

from dataclasses import dataclass

from portlayer.errors import PortlayerError
from portlayer.strategies import get_strategy

GPIPE, ONE_F_ONE_B = "gpipe", "1f1b"
PIPELINE_SCHEDULES = (ONE_F_ONE_B, GPIPE)  # torch.distributed.pipelining's ScheduleGPipe and Schedule1F1B


@dataclass(frozen=True)
class Groups:
    """The groups of ranks of each kind, every rank in exactly one group of each."""

    tensor: list[list[int]]  # the ranks that split each layer of one stage of one copy
    data: list[list[int]]  # the ranks that hold the same part of the model: their gradients are averaged
    pipeline: list[list[int]]  # the stages of one copy, in order: activations go from each to the next


@dataclass(frozen=True)
class Coordinates:
    """Where one rank sits in the layout."""

    split: int  # its place in its tensor-parallel group
    copy: int  # which copy of the model it helps train: the data it reads
    stage: int  # its pipeline stage


@dataclass(frozen=True)
class Layout:
    tensor: int = 1  # ranks that split each layer's matmuls (1: none)
    pipeline: int = 1  # stages of consecutive blocks (1: none)
    sequence: bool = False  # --sp: outside the split matmuls, each tensor-parallel rank keeps a part of the sequence
    schedule: str = ONE_F_ONE_B  # the pipeline's order of micro-batch forwards and backwards

    @property
    def model_parallel(self) -> int:
        """The ranks that hold one copy of the model between them."""
        return self.tensor * self.pipeline

    @property
    def splits(self) -> bool:
        return self.model_parallel > 1

    @property
    def options(self) -> str:
        """--tp 2 --sp --pp 2, the options that split the model; "" for plain data parallel."""
        parts = [f"--tp {self.tensor}"] if self.tensor > 1 else []
        parts += ["--sp"] if self.sequence else []
        parts += [f"--pp {self.pipeline}"] if self.pipeline > 1 else []
        return " ".join(parts)

    def describe(self) -> str:
        """--tp 2 --sp --pp 2 (1f1b): the options, and the pipeline's schedule."""
        return f"{self.options} ({self.schedule})" if self.pipeline > 1 else self.options

    def data_parallel(self, world_size: int) -> int:
        """How many copies of the model train on different data: the world size over the model-parallel size."""
        if world_size % self.model_parallel:
            sizes = " x ".join(
                f"--{name} {size}" for name, size in (("tp", self.tensor), ("pp", self.pipeline)) if size > 1
            )
            of = sizes if " x " not in sizes else f"{sizes} = {self.model_parallel}"
            raise PortlayerError(f"world size {world_size} is no multiple of {of}: the ranks form groups of it")
        return world_size // self.model_parallel

    def coordinates(self, rank: int, world_size: int) -> Coordinates:
        data = self.data_parallel(world_size)
        return Coordinates(rank % self.tensor, rank // self.tensor % data, rank // (self.tensor * data))

    def groups(self, world_size: int) -> Groups:
        data = self.data_parallel(world_size)

        def rank(stage: int, copy: int, split: int) -> int:
            return (stage * data + copy) * self.tensor + split

        stages, copies, splits = range(self.pipeline), range(data), range(self.tensor)
        return Groups(
            tensor=[[rank(p, d, t) for t in splits] for p in stages for d in copies],
            data=[[rank(p, d, t) for d in copies] for p in stages for t in splits],
            pipeline=[[rank(p, d, t) for p in stages] for d in copies for t in splits],
        )

    def check_training(self, strategy: str, compile: bool = False, grad_accum: int = 1) -> None:
        """Refuse what does not compose with the split (yet): a data-parallel strategy other than ddp, torch.compile
        (inductor fails in the split model's backward: BackendCompilerFailed, torch 2.13), --sp without --tp, and a
        1F1B pipeline with fewer micro-batches (--grad-accum) than stages."""
        if self.sequence and self.tensor == 1:
            raise PortlayerError("--sp splits the sequence over the --tp ranks: give --tp 2 or more")
        if self.schedule not in PIPELINE_SCHEDULES:
            raise PortlayerError(f"unknown pipeline schedule {self.schedule!r}: choose {' or '.join(PIPELINE_SCHEDULES)}")
        if not self.splits:
            return
        split = self.options
        if get_strategy(strategy).engine != "ddp":
            raise PortlayerError(f"{split} composes with --strategy ddp, not yet with {strategy}")
        if compile:
            raise PortlayerError(f"{split} trains eager: inductor fails in the split model's backward (drop --compile)")
        if self.pipeline > 1 and self.schedule == ONE_F_ONE_B and grad_accum < self.pipeline:
            raise PortlayerError(
                f"a 1F1B pipeline of {self.pipeline} stages needs at least {self.pipeline} micro-batches: give "
                f"--grad-accum {self.pipeline} or more, or --pp-schedule gpipe"
            )

    def check_model(self, config) -> None:
        """Refuse a model whose attention heads (a transformers config's) do not split whole over --tp, or whose
        blocks do not split whole over --pp."""
        if self.tensor > 1:
            heads = getattr(config, "num_attention_heads", None)
            key_value_heads = getattr(config, "num_key_value_heads", None) or heads
            for count, what in ((heads, "attention heads"), (key_value_heads, "key-value heads")):
                if count is not None and count % self.tensor:
                    raise PortlayerError(
                        f"the model's {count} {what} do not split over --tp {self.tensor}: choose a --tp that "
                        f"divides {count}"
                    )
        if self.pipeline > 1:
            layers = getattr(config, "num_hidden_layers", None)
            if layers is None:
                raise PortlayerError(f"{type(config).__name__} names no num_hidden_layers to split over --pp")
            if layers % self.pipeline:
                raise PortlayerError(
                    f"the model's {layers} layers do not split over --pp {self.pipeline}: choose a --pp that divides "
                    f"{layers}"
                )

    def check_sequence(self, seq_len: int) -> None:
        """Refuse a sequence that --sp cannot cut into equal parts."""
        if self.sequence and seq_len % self.tensor:
            raise PortlayerError(f"--seq-len {seq_len} does not split over --tp {self.tensor} (--sp): give a multiple")
