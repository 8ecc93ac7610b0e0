"""The peak memory of one rank for any model, strategy and world size, without running it.

    prediction = predict(source, Training(precision="bf16", strategy="zero3", nproc=4, lora_r=8))
    prediction.memory.total, prediction.memory.parts()

Two sources, each exact where it can be:
- the model states (weights, gradients, Adam state) and DDP's and ZeRO-3's communication buffers are
  counted from the parameters of the full-size model, built on the meta device (`sharding`);
- what a step adds on top (activations, the gradients alive at the backward's peak, the optimizer's
  temporaries, buffers, a played engine's buffers) is measured by a fake step (`fake_step`) of the model
  cut to 1 and to 2 decoder layers (2 and 3 under FSDP2, whose pattern needs a block before the last), and
  scaled to all of them: the layers of a transformer are identical, so everything the step allocates is
  affine in their number. A model of no more layers than that is stepped whole. tests check the scaled
  answer against a whole step of a 4-layer model.

The fake step runs one unsharded rank (the batch is per rank under every strategy), with the engine's
buffers where their timing moves the peak: DDP itself, or a play of DeepSpeed's ZeRO-1/2 bucket (allocated
at the first gradient and, at stage 2, holding the gradients) or of FSDP2's gathered parameters
(`engines`). The strategy then takes its share of the optimizer's temporaries where it shards the
optimizer state; ZeRO-3 holds its whole gradient partition from the start.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from portlayer.preflight import sharding
from portlayer.preflight.engines import FsdpGathers, ZeroGradients
from portlayer.preflight.fake_step import FakeStep, Memory, run_fake_step
from portlayer.preflight.model_source import ModelSource, Training
from portlayer.preflight.recording import Recording


@dataclass(frozen=True)
class RankMemory:
    """Bytes one rank holds at its peak, by what holds them."""

    parameters: int
    gradients: int
    optimizer_state: int
    activations: int  # saved for the backward, and temporaries alive at the peak (the optimizer's too)
    communication: int  # the strategy's buffers: DDP buckets, ZeRO buckets, gathered parameters
    buffers: int
    phase: str  # "forward", "backward" or "optimizer"

    @property
    def total(self) -> int:
        return sum(self.parts().values())

    def parts(self) -> dict[str, int]:
        return {"parameters": self.parameters, "gradients": self.gradients, "optimizer state": self.optimizer_state,
                "activations, temps": self.activations, "communication": self.communication,
                "buffers": self.buffers}

    def as_dict(self) -> dict:
        return {"parameters": self.parameters, "gradients": self.gradients, "optimizer_state": self.optimizer_state,
                "activations": self.activations, "communication": self.communication, "buffers": self.buffers,
                "total": self.total, "phase": self.phase}


@dataclass(frozen=True)
class Prediction:
    memory: RankMemory
    count: sharding.ParameterCount
    recording: Recording  # the ops of the step run (the model cut to `layers_run` layers)
    layers_run: int


def count_parameters(source: ModelSource, training: Training) -> sharding.ParameterCount:
    """The full-size model's parameters, on the meta device (nothing allocated)."""
    import torch

    with torch.device("meta"):
        model = source.build(training)
    layers = max((module for module in model.modules() if isinstance(module, torch.nn.ModuleList)),
                 key=len, default=[])

    def numel(parameters, trainable_only=False):
        return sum(p.numel() for p in parameters if p.requires_grad or not trainable_only)

    return sharding.ParameterCount(
        total=numel(model.parameters()),
        trainable=numel(model.parameters(), True),
        largest_layer=max((numel(layer.parameters()) for layer in layers), default=0),
    )


Engine = ZeroGradients | FsdpGathers


def played_engine(count: sharding.ParameterCount, training: Training) -> Engine | None:
    """The engine whose buffers the fake step plays: DeepSpeed's ZeRO-1/2 with the full-size model's bucket
    (the trainer's own sizing), or FSDP2 over the trainer's blocks. None for ddp (DDP itself runs) and ZeRO-3
    (its partitions are allocated up front: `sharding`)."""
    from portlayer.strategies import get_strategy

    strategy = get_strategy(training.strategy)
    if strategy.engine == "fsdp2":
        from portlayer.strategies.fsdp2 import blocks

        return FsdpGathers(blocks, training.nproc)
    if strategy.engine != "deepspeed" or strategy.shards_parameters:
        return None
    from portlayer.strategies.zero import bucket_elements

    return ZeroGradients(bucket_elements(count.total), strategy.shards_gradients, training.nproc)


def fake_step(source: ModelSource, training: Training, layers: int,
              progress: Callable[[str], None] | None = None, engine: Engine | None = None) -> FakeStep:
    """One unsharded rank's step of the model cut to `layers` layers, with fake tensors; under DDP wrapped in
    DDP, so that its ops are recorded as a rank dispatches them (the bucket copies; the buckets' bytes are
    left out of the fake step's figures here, `sharding` counts them); with `engine`, its buffers played (the
    prediction takes them from the step's peak)."""
    import torch

    def make_optimizer(model):
        # foreach: what torch picks for parameters on an accelerator (cuda, xpu and the vendors' device).
        return torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=source.lr,
                                 weight_decay=source.weight_decay, foreach=True)

    return run_fake_step(lambda: source.build(training, layers), source.batch, make_optimizer=make_optimizer,
                         clip_grad_norm=source.max_grad_norm, precision=training.precision,
                         ddp=training.strategy == "ddp", engine=engine, progress=progress)


def _scaled(one: Memory, two: Memory, layers: int, field: str, first: int = 1) -> int:
    """`field` at `layers` layers from its value at `first` and `first + 1`: affine in the number of
    identical layers."""
    at_first, at_next = getattr(one, field), getattr(two, field)
    return max(at_first + (layers - first) * (at_next - at_first), 0)


def _at(steps: list[FakeStep], runs: list[int], layers: int, phase: str, field: str) -> int:
    peaks = [getattr(step, phase) for step in steps]
    if any(peak is None for peak in peaks):
        return 0
    return getattr(peaks[0], field) if len(peaks) == 1 else _scaled(*peaks, layers, field, runs[0])


def predict(source: ModelSource, training: Training, progress: Callable[[str], None] | None = None) -> Prediction:
    from portlayer.strategies import get_strategy

    strategy = get_strategy(training.strategy)
    count = count_parameters(source, training)
    full = source.layers
    engine = played_engine(count, training)
    first = engine.steady_from_layers if engine is not None else 1
    runs = [full] if full <= first + 1 else [first, first + 1]
    steps = [fake_step(source, training, layers, progress, engine) for layers in runs]
    states = sharding.model_states(count, strategy, training.nproc, training.precision)
    if engine is not None:
        # What the played buffers held at the training peak (the step of the most layers says: the bucket and
        # a block's gathered parameters are the same size in each).
        communication = steps[-1].training.communication
    else:
        communication = sharding.communication(count, strategy, training.precision)

    def at(phase: str, field: str) -> int:
        return _at(steps, runs, full, phase, field)

    training_peak = RankMemory(
        parameters=states.parameters,
        gradients=sharding.gradients_at_peak(strategy, states, at("training", "gradients")),
        optimizer_state=states.optimizer_state,
        activations=at("training", "activations"),
        communication=communication,
        buffers=at("training", "buffers"),
        phase=steps[-1].training.phase,
    )
    memory = training_peak
    if steps[-1].optimizing is not None:
        optimizer_share = 1 / training.nproc if strategy.shards_optimizer_state else 1.0
        optimizer_peak = RankMemory(
            parameters=states.parameters,
            gradients=states.gradients,
            optimizer_state=states.optimizer_state,
            activations=round(at("optimizing", "activations") * optimizer_share),
            # A played engine has freed its buffers by then (DeepSpeed's backward epilogue, FSDP2's reshard).
            communication=communication if engine is None else steps[-1].optimizing.communication,
            buffers=at("optimizing", "buffers"),
            phase="optimizer",
        )
        memory = max(training_peak, optimizer_peak, key=lambda peak: peak.total)
    return Prediction(memory, count, steps[-1].recording, runs[-1])
