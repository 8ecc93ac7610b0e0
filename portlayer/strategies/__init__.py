"""Training strategies: how a data-parallel run shards its state across ranks.

One table, read by the reference trainer (which applies a strategy) and by preflight (which predicts what
it costs per rank), so that what preflight predicts is what the trainer runs. A strategy changes how state is
sharded, never the experiment: the same preset, seed, data order and schedule give the same loss up to the
rounding of a different reduction order.

    from portlayer.strategies import get_strategy
    get_strategy("zero2").shards_gradients  # True

Modules that apply a strategy (torch's `fully_shard`, DeepSpeed's engine) live beside this one and are
imported only by the code that trains with them: `import portlayer.strategies` loads neither.
"""

from __future__ import annotations

from dataclasses import dataclass

from portlayer.errors import PortlayerError


@dataclass(frozen=True)
class Strategy:
    name: str
    engine: str  # "ddp": torch's DistributedDataParallel; "fsdp2": torch's fully_shard; "deepspeed": ZeRO
    shards_optimizer_state: bool
    shards_gradients: bool
    shards_parameters: bool
    zero_stage: int | None = None  # DeepSpeed's stage, for engine "deepspeed"


STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in (
        Strategy("ddp", "ddp", False, False, False),
        Strategy("fsdp2", "fsdp2", True, True, True),
        Strategy("zero1", "deepspeed", True, False, False, zero_stage=1),
        Strategy("zero2", "deepspeed", True, True, False, zero_stage=2),
        Strategy("zero3", "deepspeed", True, True, True, zero_stage=3),
    )
}
DEFAULT = "ddp"


def get_strategy(name: str) -> Strategy:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise PortlayerError(f"unknown strategy {name!r}: choose one of {', '.join(STRATEGIES)}") from None


def prepare(strategy: Strategy, core, setup):
    """`core` (the bare model) made ready to train under `strategy`: a `parallel.Parallel`.

    Imports the strategy's engine only now (torch's fully_shard, DeepSpeed), so that choosing a strategy
    costs nothing until one trains. The sharded strategies need a process group (`setup.group`); with
    `setup.tensor_group` the model's layers are split over it (tensor parallel), with `setup.pipeline_group` its
    blocks into stages (pipeline parallel), and the strategy is data parallel over the copies.
    """
    from portlayer.strategies.parallel import Parallel

    if strategy.engine == "ddp" and not setup.layout.splits:
        return Parallel.prepare(strategy, core, setup)
    if setup.group is None:
        raise PortlayerError(
            f"--strategy {strategy.name} shards across ranks: launch with torchrun or the deepspeed launcher"
        )
    if setup.precision == "fp16":
        # torch's GradScaler unscales whole gradients; split or sharded ones would need their own loss scaling.
        split = setup.layout.options or f"--strategy {strategy.name}"
        raise PortlayerError(f"{split} trains in fp32 or bf16, not fp16 (no loss scaling of split gradients)")
    if setup.pipeline_group is not None:
        from portlayer.strategies.pipeline_parallel import PipelineParallel

        return PipelineParallel.prepare(strategy, core, setup)
    if setup.tensor_group is not None:
        from portlayer.strategies.tensor_parallel import TensorParallel

        return TensorParallel.prepare(strategy, core, setup)
    if strategy.engine == "fsdp2":
        from portlayer.strategies.fsdp2 import Fsdp2Parallel

        return Fsdp2Parallel.prepare(strategy, core, setup)
    from portlayer.strategies.zero import ZeroParallel

    return ZeroParallel.prepare(strategy, core, setup)
