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

With a `Target`, the fake step runs the target's kernels (`target_kernels`) and the answer adds what the
target's runtime holds besides the tensors (`DeviceMemory`): the BLAS library's workspaces, the caching
allocator's rounding and cache (its replay over the step's allocations, `allocator`, scaled like the rest),
and the fixed costs outside it that can be cited (`targets`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, replace

from portlayer.preflight import allocator, sharding
from portlayer.preflight.engines import FsdpGathers, ZeroGradients
from portlayer.preflight.fake_step import FakeStep, run_fake_step
from portlayer.preflight.model_source import ModelSource, Training
from portlayer.preflight.recording import Recording
from portlayer.preflight.split_rank import SplitRank
from portlayer.preflight.target_kernels import TargetKernels
from portlayer.preflight.targets import Capability, Target
from portlayer.strategies.layout import GPIPE, Layout


@dataclass(frozen=True)
class On:
    """The device a prediction is for: its backend's kernel model and, for CUDA, its compute capability."""

    target: Target
    capability: Capability = None


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
    workspaces: int = 0  # the BLAS library's, bound to each thread that ran a GEMM, kept (the target's)

    @property
    def total(self) -> int:
        return sum(self.parts().values())

    def parts(self) -> dict[str, int]:
        return {"parameters": self.parameters, "gradients": self.gradients, "optimizer state": self.optimizer_state,
                "activations, temps": self.activations, "communication": self.communication,
                "buffers": self.buffers, "workspaces": self.workspaces}

    def as_dict(self) -> dict:
        return {"parameters": self.parameters, "gradients": self.gradients, "optimizer_state": self.optimizer_state,
                "activations": self.activations, "communication": self.communication, "buffers": self.buffers,
                "workspaces": self.workspaces, "total": self.total, "phase": self.phase}


# The trainer's process groups, each a communicator of the collective library: the default one (start-up
# barrier, checkpoints) and the training one (reference_train/train.py, _start_training_group).
TRAINER_COMMUNICATORS = 2


@dataclass(frozen=True)
class DeviceMemory:
    """What the target's runtime would show for the step, per rank: the caching allocator's peaks
    (`torch.<device>.max_memory_allocated` and `max_memory_reserved`), and the device tool's figure (nvidia-smi,
    npu-smi): reserved plus the runtime's memory outside the allocator, where a figure can be cited."""

    target: str
    tool: str
    allocated: int
    reserved: int
    outside: dict  # name -> targets.FixedCost: the runtime's context, the collective library's buffers

    @property
    def shown(self) -> int:
        """The device tool's figure, less what has no citable figure (`uncounted`)."""
        return self.reserved + sum(cost.bytes for cost in self.outside.values() if cost.bytes)

    @property
    def uncounted(self) -> list[str]:
        return [name for name, cost in self.outside.items() if cost.bytes is None]

    def as_dict(self) -> dict:
        return {"target": self.target, "tool": self.tool, "allocated": self.allocated, "reserved": self.reserved,
                "shown": self.shown, "outside": {name: {"bytes": cost.bytes, "source": cost.source}
                                                 for name, cost in self.outside.items()}}


@dataclass(frozen=True)
class Prediction:
    memory: RankMemory
    count: sharding.ParameterCount
    recording: Recording  # the ops of the step run (the model cut to `layers_run` layers)
    layers_run: int
    device: DeviceMemory | None = None  # with a target
    scaled: Scaled | None = None  # the fake steps and how they were scaled to the rank's layers

    @property
    def in_use(self) -> int:
        """What the device would hold in use: the device tool's figure with a target, else the tensors."""
        return self.device.shown if self.device is not None else self.memory.total


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
              progress: Callable[[str], None] | None = None, engine: Engine | None = None,
              on: On | None = None) -> FakeStep:
    """One rank's step of the model cut to `layers` layers, with fake tensors: unsharded, under DDP wrapped in
    DDP, so that its ops are recorded as a rank dispatches them (the bucket copies; the buckets' bytes are
    left out of the fake step's figures here, `sharding` counts them); with `engine`, its buffers played (the
    prediction takes them from the step's peak); under tensor parallel, split by the trainer's own code
    (`split_rank`); `on` a target, with its kernels. In parity mode torch's functional dropouts are off, as
    the trainer has them."""
    import torch

    from portlayer.train.presets import functional_dropout_off

    def make_optimizer(parameters):
        # foreach: what torch picks for parameters on an accelerator (cuda, xpu and the vendors' device).
        return torch.optim.AdamW(parameters, lr=source.lr, weight_decay=source.weight_decay, foreach=True)

    def trainable(model):
        return make_optimizer([p for p in model.parameters() if p.requires_grad])

    kernels = TargetKernels(on.target, on.capability) if on is not None else None
    step = dict(clip_grad_norm=source.max_grad_norm, precision=training.autocast, ddp=training.strategy == "ddp",
                engine=engine, progress=progress, grad_accum=training.grad_accum, kernels=kernels)
    with contextlib.ExitStack() as stack:
        if training.parity:
            stack.enter_context(functional_dropout_off())
        if training.layout.tensor == 1:
            return run_fake_step(lambda: source.build(training, layers), source.batch, make_optimizer=trainable,
                                 **step)
        split = stack.enter_context(SplitRank.over(training.layout, training.nproc, make_optimizer,
                                                   source.max_grad_norm))
        return run_fake_step(split.build(lambda: source.build(training, layers)), source.batch,
                             make_optimizer=split.optimizer, clip_gradients=split.clip_gradients,
                             **{**step, "ddp": False})


def _scaled(values: list[int], runs: list[int], layers: int) -> int:
    """A figure at `layers` layers from its values at the layer counts `runs` (one: the whole model; two:
    `first` and `first + 1`): affine in the number of identical layers."""
    if len(values) == 1:
        return values[0]
    at_first, at_next = values
    return max(at_first + (layers - runs[0]) * (at_next - at_first), 0)


def _at(steps: list[FakeStep], runs: list[int], layers: int, phase: str, field: str) -> int:
    peaks = [getattr(step, phase) for step in steps]
    if any(peak is None for peak in peaks):
        return 0
    return _scaled([getattr(peak, field) for peak in peaks], runs, layers)


def predict(source: ModelSource, training: Training, progress: Callable[[str], None] | None = None,
            on: On | None = None, communicators: int = TRAINER_COMMUNICATORS) -> Prediction:
    """The peak per rank of `source`'s step under `training`; `on` a target, as its kernels and runtime hold it
    (with `device`: `communicators` process groups, the trainer's by default, and the layout's), else as the
    cpu's kernels do."""
    from portlayer.strategies import get_strategy

    strategy = get_strategy(training.strategy)
    count = count_parameters(source, training)
    full = source.layers
    engine = played_engine(count, training)
    first = engine.steady_from_layers if engine is not None else 1
    runs = [full] if full <= first + 1 else [first, first + 1]
    stepped = replace(training, grad_accum=1) if training.layout.pipeline > 1 else training  # one micro-batch
    steps = [fake_step(source, stepped, layers, progress, engine, on) for layers in runs]
    scaled = Scaled(steps, runs, full, training, *exchanged_bytes(source))
    at = scaled.at
    if training.layout.splits:
        states = _measured_states(at, training.weights)
        communication = 0  # no DDP buckets: the split averages its gradients in one flat copy when it clips
    else:
        states = sharding.model_states(count, strategy, training.nproc, training.weights)
        # A played engine's: what its buffers held at the training peak (the step of the most layers says: the
        # bucket and a block's gathered parameters are the same size in each).
        communication = (steps[-1].training.communication if engine is not None
                         else sharding.communication(count, strategy, training.weights))
    memory = RankMemory(
        parameters=states.parameters,
        gradients=sharding.gradients_at_peak(strategy, states, at("training", "gradients")),
        optimizer_state=states.optimizer_state,
        activations=scaled.activations("training"),
        communication=communication,
        buffers=at("training", "buffers"),
        phase=steps[-1].training.phase,
    )
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
        memory = max(memory, optimizer_peak, key=lambda peak: peak.total)
    if on is None:
        return Prediction(memory, count, steps[-1].recording, runs[-1], scaled=scaled)
    memory = replace(memory, workspaces=on.target.blas_threads * on.target.blas_workspace(on.capability,
                                                                                           training.parity))
    communicators += layout_communicators(training.layout, training.nproc)
    device = _device_memory(steps, runs, scaled.layers, memory, training.nproc, on, communicators)
    return Prediction(memory, count, steps[-1].recording, runs[-1], device, scaled)


@dataclass(frozen=True)
class Scaled:
    """The fake steps' figures at the layers one rank holds: all of them, or a pipeline stage's share; its
    activations as many layers' worth as the stage keeps in flight (Korthikanti et al. 2022, §4.2.3: under 1F1B
    the first stage holds `pp` micro-batches of its L/pp layers, L layers' worth; under GPipe all m), at the stage
    that holds the most: the first, or the last, which also keeps the logits and loss of each micro-batch in flight.
    Every stage holds torch's receive buffers, one a micro-batch (`received`: one micro-batch's hidden states)."""

    steps: list
    runs: list[int]
    full: int  # the model's layers
    training: Training
    received: int = 0  # bytes of the hidden states a stage receives for one micro-batch
    logits: int = 0  # bytes of one micro-batch's logits (fp32)

    @property
    def layers(self) -> int:
        """The blocks this rank holds: all, or the first stage's L/pp."""
        return self.full // self.training.layout.pipeline

    @property
    def in_flight(self) -> int:
        """Micro-batches whose activations the rank holds at once: 1 without a pipeline; the first stage's."""
        layout, micro_batches = self.training.layout, self.training.grad_accum
        if layout.pipeline == 1:
            return 1
        return micro_batches if layout.schedule == GPIPE else min(layout.pipeline, micro_batches)

    def at(self, phase: str, field: str, layers: int | None = None) -> int:
        return _at(self.steps, self.runs, self.layers if layers is None else layers, phase, field)

    @property
    def last_in_flight(self) -> int:
        """Micro-batches the last stage holds at once: one under 1F1B (each forward is followed by its backward),
        all under GPipe."""
        return self.training.grad_accum if self.training.layout.schedule == GPIPE else 1

    def first_stage_activations(self, phase: str) -> int:
        """The activations of the first stage (the rank's, without a pipeline) at the peak."""
        return self.at(phase, "activations", self.layers * self.in_flight)

    def activations(self, phase: str) -> int:
        """Activations at the peak: the layers' part for every micro-batch in flight, the rest (embeddings,
        logits, the loss's temporaries) once; of a pipeline's first or last stage, whichever holds more, and
        its receive buffers."""
        first = self.first_stage_activations(phase)
        if self.training.layout.pipeline == 1:
            return first
        # What is not the blocks' (embeddings, logits, the loss's tensors) the last stage holds for each micro-batch
        # in flight, but the logits' gradient, which the backward holds for one at a time.
        kept = self.at(phase, "activations", 0) - self.logits
        last = self.at(phase, "activations", self.layers * self.last_in_flight) + kept * (self.last_in_flight - 1)
        return max(first, last) + self.training.grad_accum * self.received

    @property
    def layer_activations(self) -> int:
        """One layer's activations of one micro-batch at the training peak (the slope over the layers run)."""
        if len(self.runs) == 1:
            return 0
        return self.at("training", "activations", self.runs[1]) - self.at("training", "activations", self.runs[0])


def exchanged_bytes(source: ModelSource) -> tuple[int, int]:
    """(one micro-batch's hidden states as the trainer's pipeline stages exchange them, its logits): b x s x h and
    b x s x vocabulary, fp32."""
    batch, seq_len = next(iter(source.batch.values())).shape[:2]
    tokens = batch * seq_len * 4
    return tokens * source.config.hidden_size, tokens * source.config.vocab_size


def layout_communicators(layout: Layout, world_size: int) -> int:
    """Communicators a split adds to the trainer's two: its data-parallel subgroup, tensor and pipeline group."""
    if not layout.splits:
        return 0
    return 1 + (layout.tensor > 1) + (layout.pipeline > 1)


def _measured_states(at: Callable[[str, str], int], weights: str) -> sharding.ModelStates:
    """A split rank's model states: its shards of the split layers and the whole rest, of the layers it holds,
    as the fake step's model held them, scaled to those layers. Every parameter trains (no LoRA with a split): the
    gradients are the weights' size, and Adam's state is the ZeRO paper's K bytes a parameter (not AdamW's step
    counts, which it keeps on the host)."""
    parameters = at("training", "parameters")
    elements = parameters // sharding.WEIGHT_BYTES[weights]
    return sharding.ModelStates(parameters, parameters, elements * sharding.ADAM_BYTES[weights])


def _device_memory(steps: list[FakeStep], runs: list[int], layers: int, memory: RankMemory, nproc: int, on: On,
                   communicators: int) -> DeviceMemory:
    """The allocator's peaks: the tensors' peak plus what its blocks and segments add over the step's own
    allocations (replayed at each layer count run, scaled), the workspaces in segments of their own; and the
    runtime's memory outside it."""
    replays = [allocator.replay(step.allocations, on.target.allocator) for step in steps]
    rounding = _scaled([peaks.allocated - peaks.requested for peaks in replays], runs, layers)
    cached = _scaled([peaks.reserved - peaks.requested for peaks in replays], runs, layers)
    target = on.target
    outside = {"context": target.context, "collective buffers": target.collective(nproc, communicators)}
    return DeviceMemory(target.name, target.tool, memory.total + rounding, memory.total + cached, outside)
