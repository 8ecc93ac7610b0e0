"""The collectives one rank runs in a training step, by kind, group and phase: what a layout needs from the
collective library (HCCL on a 910B, MCCL on an S4000, NCCL on NVIDIA).

    for traffic in step_traffic(prediction, training):
        traffic.describe()   # "all-reduce over tp (2 ranks), backward: 5 a layer and micro-batch, 320 a step, 20.0 MiB"

Recorded where the fake step runs them: tensor parallel's all-reduces (DTensor's, one per rowwise layer's
output in the forward and one per colwise layer's input gradient in the backward), under --sp its all-gathers
and reduce-scatters along the sequence instead, the split's flat gradient
average over the data-parallel group and its clip norm over the tensor-parallel group, over fake groups named
tp and dp (`split_rank`). Recorded at 1 and 2 layers, each count and size is affine in the layers and is scaled
like memory: to the rank's layers, and to the step's micro-batches.
Counted from the layout where the fake step has a stand-in instead: DDP's gradient all-reduce (its comm hook
does nothing there), and a pipeline's traffic, which no fake step of one rank runs: per micro-batch and stage
boundary one send of the activations forward and one of their gradient backward; once a step an all-reduce over
the stages of the gradients of the layers every stage keeps (embeddings, final norm, LM head), and of the clip
norm's squares.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from portlayer.preflight.devices import format_bytes

DDP_BUCKET_BYTES = 25 * 2**20  # DistributedDataParallel's bucket_cap_mb default
PHASES = ("forward", "backward", "optimizer")
# What the trainer's collectives carry, by (kind, group, phase) (portlayer/strategies/tensor_parallel.py).
RECORDED_WHY = {
    ("all-reduce", "tp", "forward"): "each rowwise layer's partial output: attention's o, the MLP's down",
    ("all-reduce", "tp", "backward"): "each colwise layer's input gradient, one per layer: q, k, v; gate, up",
    ("all-reduce", "tp", "optimizer"): "the clip norm's squares; under --sp first the gradients of the layers that saw "
                                        "a part of the sequence (norms), summed",
    ("all-gather", "tp", "forward"): "--sp: the sequence gathered where each attention and MLP starts, and after the "
                                     "last block",
    ("reduce-scatter", "tp", "forward"): "--sp: each rowwise layer's output scattered along the sequence",
    ("all-gather", "tp", "backward"): "--sp: the gradients of the scattered outputs (and of the first block's part)",
    ("reduce-scatter", "tp", "backward"): "--sp: the gradients of the gathered inputs",
    ("all-reduce", "dp", "optimizer"): "the gradients, averaged in one flat copy",
}


@dataclass(frozen=True)
class Traffic:
    """Collectives of one kind over one group in one phase, per rank and step."""

    kind: str  # "all-reduce", "all-gather", "reduce-scatter", "send/recv"
    group: str  # "tp", "dp" or "pp"
    ranks: int
    phase: str  # "forward", "backward" or "optimizer" (once a step)
    per_layer: float  # calls per layer and micro-batch (0: not per layer)
    calls: int  # per step
    bytes: int  # per step: the tensors' sizes summed (what each rank contributes, before the algorithm's factor)
    why: str = ""

    def describe(self) -> str:
        per_layer = f"{self.per_layer:g} a layer and micro-batch, " if self.per_layer else ""
        why = f" ({self.why})" if self.why else ""
        size = format_bytes(self.bytes) if self.bytes >= 2**20 else f"{self.bytes:,} B"
        return (f"{self.kind} over {self.group} ({self.ranks} ranks), {self.phase}: {per_layer}{self.calls} a step, "
                f"{size}{why}")

    def as_dict(self) -> dict:
        return {"kind": self.kind, "group": self.group, "ranks": self.ranks, "phase": self.phase,
                "per_layer_per_micro_batch": self.per_layer, "calls_per_step": self.calls,
                "bytes_per_step": self.bytes, "why": self.why}


def step_traffic(prediction, training) -> list[Traffic]:
    """Every collective one rank of `training`'s layout runs in a step (`prediction`, from
    `per_rank.predict`); none itemised under a sharding strategy (`itemised`)."""
    if not itemised(training):
        return []
    scaled = prediction.scaled
    layout = training.layout
    data = layout.data_parallel(training.nproc)
    recorded = _recorded(scaled)
    groups = {(traffic.group, traffic.phase) for traffic in recorded}
    counted = []
    if data > 1 and ("dp", "optimizer") not in groups:
        counted.append(_gradient_average(scaled, data, layout.splits))
    if layout.pipeline > 1:
        counted.extend(_pipeline(scaled, training))
    return recorded + counted


def itemised(training) -> bool:
    """Whether the collectives are listed: under ddp and its layouts. FSDP2's and DeepSpeed's gathers and
    reduce-scatters are played on the fake step by size and moment, not as collectives (`engines`)."""
    return training.strategy == "ddp"


def _recorded(scaled) -> list[Traffic]:
    """The fake steps' collectives, scaled to the rank's layers and the step's micro-batches."""
    micro_batches = scaled.training.grad_accum
    stepped = 1 if scaled.training.layout.pipeline > 1 else micro_batches  # the fake step's micro-batches
    tallies = [_tally(step.recording.collectives) for step in scaled.steps]
    found = []
    for key in dict.fromkeys(key for tally in tallies for key in tally):
        kind, group, ranks, phase = key
        calls, size = ([tally.get(key, (0, 0))[index] for tally in tallies] for index in (0, 1))
        repeat = micro_batches / stepped if phase != "optimizer" else 1
        per_layer = (calls[1] - calls[0]) / stepped if len(calls) == 2 else 0
        found.append(Traffic(kind, group, ranks, phase, per_layer, round(_affine(calls, scaled) * repeat),
                             round(_affine(size, scaled) * repeat), RECORDED_WHY.get((kind, group, phase), "")))
    return sorted(found, key=lambda traffic: (traffic.group, PHASES.index(traffic.phase), traffic.kind))


def _tally(collectives) -> dict[tuple, tuple[int, int]]:
    """(kind, group, ranks, phase) -> (calls, bytes)."""
    tally = defaultdict(lambda: (0, 0))
    for call in collectives:
        key = (call.kind, call.group, call.ranks, call.phase)
        calls, size = tally[key]
        tally[key] = (calls + 1, size + call.bytes)
    return dict(tally)


def _affine(values: list[int], scaled) -> float:
    """A figure at the rank's layers from its values at the layer counts run (as `per_rank` scales memory)."""
    if len(values) == 1:
        return values[0]
    return values[0] + (scaled.layers - scaled.runs[0]) * (values[1] - values[0])


def _gradient_average(scaled, data: int, split: bool) -> Traffic:
    """The gradients averaged over the data-parallel group: DDP's buckets, or (a pipeline's stage) one flat
    all-reduce."""
    size = scaled.at("training", "parameters")  # the gradients are the weights' size (every parameter trains)
    if split:
        return Traffic("all-reduce", "dp", data, "optimizer", 0, 1, size, "the stage's gradients, one flat copy")
    buckets = max(math.ceil(size / DDP_BUCKET_BYTES), 1)
    return Traffic("all-reduce", "dp", data, "backward", 0, buckets, size,
                   f"the gradients, in DDP's {format_bytes(DDP_BUCKET_BYTES)} buckets")


def _pipeline(scaled, training) -> list[Traffic]:
    """A stage's traffic: activations to the next stage and their gradient back, per micro-batch (the hidden
    states as the trainer's stages exchange them, `Scaled.received`); the shared layers' gradients and the norm
    over the stages, per step."""
    layout, micro_batches, hidden = training.layout, training.grad_accum, scaled.received
    shared = scaled.at("training", "parameters", 0)  # the layers outside the blocks, held by every stage
    stages = layout.pipeline
    return [
        Traffic("send/recv", "pp", stages, "forward", 0, micro_batches, micro_batches * hidden,
                "each micro-batch's hidden states to the next stage; a middle stage also receives as many"),
        Traffic("send/recv", "pp", stages, "backward", 0, micro_batches, micro_batches * hidden,
                "their gradient to the stage before; a middle stage also receives as many"),
        Traffic("all-reduce", "pp", stages, "optimizer", 0, 1, shared,
                "the gradients of the layers every stage keeps: embeddings, final norm, LM head"),
        Traffic("all-reduce", "pp", stages, "optimizer", 0, 1, 4, "the clip norm's squares"),
    ]
