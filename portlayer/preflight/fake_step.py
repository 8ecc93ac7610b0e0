"""One training step at full size, recorded and measured without computing it.

The model is built under torch's `FakeTensorMode`: every parameter, activation and gradient is a fake tensor
(shape, dtype and device, no storage), so mixtral-8x7B's 47B parameters cost nothing and each op costs only
its shape function. The step is the trainer's: forward (under autocast for bf16/fp16), backward, gradient
clipping, AdamW, zero_grad, and, per rank, DistributedDataParallel with its gradient buckets, over a fake
process group whose collectives do nothing, or a sharding engine's buffers played (`engines`).

Three modes watch it, innermost first:
- `ShadowValues` keeps the real values of the batch and of the small integer tensors computed from it, for
  the branches and shapes that depend on values (a mixture-of-experts router's choices);
- torch's `MemTracker` (torch.distributed._tools) accounts each tensor's bytes as parameter, gradient,
  optimizer state, activation or temporary, and keeps the snapshot at the peak;
- the `Recorder` lists every aten op with its dtypes and origin, as for a real step.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from portlayer.precision import PRECISIONS
from portlayer.preflight.allocations import AllocationLog
from portlayer.preflight.engines import BUFFERS, GRADIENTS, FsdpGathers, Ledger, ZeroGradients
from portlayer.preflight.recording import Recorder, Recording
from portlayer.preflight.shadow import ShadowValues, values_known_to_libraries
from portlayer.preflight.target_kernels import TargetKernels


@dataclass(frozen=True)
class Memory:
    """Bytes per rank at the peak of a steady-state training step (the second and later: optimizer state
    exists from the first step's end on), by what holds them."""

    parameters: int
    gradients: int
    optimizer_state: int
    activations: int  # tensors saved for the backward and temporaries (the optimizer's too) alive at the peak
    communication: int  # the engine's buffers alive at the peak: DDP's buckets, a played engine's (`engines`)
    buffers: int
    phase: str  # where the peak falls: "forward", "backward" or "optimizer"

    @property
    def total(self) -> int:
        return (self.parameters + self.gradients + self.optimizer_state + self.activations
                + self.communication + self.buffers)

    def parts(self) -> dict[str, int]:
        return {"parameters": self.parameters, "gradients": self.gradients,
                "optimizer state": self.optimizer_state, "activations, temps": self.activations,
                "communication": self.communication, "buffers": self.buffers}

    def as_dict(self) -> dict:
        return {"parameters": self.parameters, "gradients": self.gradients,
                "optimizer_state": self.optimizer_state, "activations": self.activations,
                "communication": self.communication, "buffers": self.buffers, "total": self.total, "phase": self.phase}


@dataclass(frozen=True)
class FakeStep:
    recording: Recording
    memory: Memory | None  # the steady state's peak: the larger of the two below
    training: Memory | None = None  # the peak of the forward and backward
    optimizing: Memory | None = None  # the peak of the optimizer step, when it is above the backward's end
    allocations: list | None = None  # the step's (+1 | -1, key, bytes) in order, for `allocator.replay`


class _NoHook:
    @staticmethod
    def remove() -> None:
        pass


def _peak_tracker(model: torch.nn.Module):
    """torch's MemTracker, keeping the step's peak only: its per-module peaks, updated on every op for every
    module seen, cost more than the rest of a fake step together (30 of 40 s for gpt2 at 4×1024).
    Frozen parameters (a LoRA base) get no gradient hook: MemTracker would register one on every parameter,
    and torch refuses a hook on a tensor that does not require grad."""
    from torch.distributed._tools.mem_tracker import _TOTAL_KEY, MemTracker

    class PeakTracker(MemTracker):
        ledger: Ledger  # a played engine's buffers, within MemTracker's categories

        def _update_peak_stats(self, peak_state) -> None:
            for device, snapshot in self._curr_mem_snap.items():
                if self._peak_mem.get(device, 0) < snapshot[_TOTAL_KEY]:
                    self._peak_mem[device] = snapshot[_TOTAL_KEY]
                    self._peak_mem_snap[device] = dict(snapshot)
                    self.ledger.peak_recorded()

    tracker = PeakTracker()
    tracker.ledger = Ledger()
    for parameter in model.parameters():
        if not parameter.requires_grad:
            tracker._param_to_grad_hook_handles[parameter] = (_NoHook, _NoHook)
    return tracker


def _snapshot(tracker) -> dict[str, int]:
    """MemTracker's snapshot summed over devices (the step runs on one), keyed by category name."""
    totals: dict[str, int] = {}
    for per_device in tracker.get_tracker_snapshot("peak").values():
        for key, value in per_device.items():
            name = getattr(key, "value", key)
            totals[name] = totals.get(name, 0) + value
    return totals


def _peak_so_far(tracker) -> dict[str, int]:
    """The peak's snapshot, and what of it a played engine's buffers hold (`engines.BUFFERS`, `GRADIENTS`);
    empty when memory is not measured."""
    return {} if tracker is None else {**_snapshot(tracker), **tracker.ledger.at_peak}


def _current_total(tracker) -> int:
    return sum(snap.get("Total", 0) for snap in tracker.get_tracker_snapshot("current").values())


def _memory(at_peak: dict[str, int], phase: str, optimizer_state: int, ddp_buckets: int) -> Memory:
    # MemTracker counts DDP's buckets (allocated in the constructor, outside any backward) and a played
    # engine's buffers as activations or temporaries.
    communication = ddp_buckets + at_peak.get(BUFFERS, 0)
    engine_gradients = at_peak.get(GRADIENTS, 0)
    return Memory(
        parameters=at_peak.get("Parameter", 0),
        gradients=at_peak.get("Gradient", 0) + engine_gradients,
        optimizer_state=optimizer_state,
        activations=max(at_peak.get("Activation", 0) + at_peak.get("Temp", 0) + at_peak.get("Other", 0)
                        - communication - engine_gradients, 0),
        communication=communication,
        buffers=at_peak.get("Buffer", 0),
        phase=phase,
    )


@contextlib.contextmanager
def fake_process_group(world_size: int) -> Iterator[None]:
    """torch's fake process group as the default group, for DDP to build its reducer; no communication."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore  # registers the "fake" backend

    if dist.is_initialized():
        yield  # a real job's group: DDP only needs one to exist, the comm hook keeps it idle
        return
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world_size)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _in_place_allreduce(state, bucket):
    """Stands in for the all-reduce: NCCL, HCCL and MCCL reduce a bucket in place, so no memory moves."""
    future = torch.futures.Future()
    future.set_result(bucket.buffer())
    return future


def _wrap_ddp(model: torch.nn.Module) -> torch.nn.Module:
    # init_sync=False: the parameter checks and broadcast read values, which fake tensors do not have.
    ddp = torch.nn.parallel.DistributedDataParallel(model, init_sync=False)
    ddp.register_comm_hook(None, _in_place_allreduce)
    return ddp


@contextlib.contextmanager
def _memory_tracker_notes_ignored():
    """Without the memory tracker's warnings that call for nothing."""
    with warnings.catch_warnings():
        # MemTracker's backward hooks warn for each module whose weak reference is gone: nothing to act on.
        warnings.filterwarnings("ignore", message="Module is None", category=UserWarning)
        # A played engine frees a gradient in its own hook (ZeRO-2's bucket, FSDP2's reduce-scatter); the
        # tracker's hook, after it, warns that it finds none.
        warnings.filterwarnings("ignore", message="Expected a tensor or a traceable wrapper-subclass",
                                category=UserWarning)
        yield


def _in_ddp(model: torch.nn.Module, stack: contextlib.ExitStack, tracker) -> tuple[torch.nn.Module, int]:
    """`model` wrapped in DDP over a fake 2-rank group (entered on `stack`), and the bytes of DDP's buckets."""
    stack.enter_context(fake_process_group(world_size=2))
    before = _current_total(tracker) if tracker is not None else 0
    runner = _wrap_ddp(model)
    return runner, _current_total(tracker) - before if tracker is not None else 0


def run_fake_step(build_model: Callable[[], torch.nn.Module], batch: Mapping[str, torch.Tensor], *,
                  make_optimizer: Callable[[torch.nn.Module], torch.optim.Optimizer],
                  clip_grad_norm: float | None = 1.0, precision: str = "fp32", ddp: bool = False,
                  engine: ZeroGradients | FsdpGathers | None = None, measure_memory: bool = True,
                  progress: Callable[[str], None] | None = None, grad_accum: int = 1,
                  kernels: TargetKernels | None = None,
                  clip_gradients: Callable[[], object] | None = None) -> FakeStep:
    """Build the model with fake tensors and run one steady-state training step on `batch` (real tensors:
    their values are kept): `grad_accum` micro-batches, forward (under autocast to `precision`'s type when it
    is 16-bit) and backward, gradients reduced on the last (DDP's no_sync before), then clipping and the
    optimizer. Records its ops and, if `measure_memory`, the memory a rank would hold at its peak and the
    allocations in order. With `kernels`, the target's kernels run where the cpu's would
    (`target_kernels`). `clip_gradients`: a strategy's own clipping (tensor parallel's, `split_rank`) instead
    of torch's `clip_grad_norm_` to `clip_grad_norm`. `progress(stage)` is told as the step moves on: "model",
    "forward", "backward", "optimizer"."""
    progress = progress or (lambda stage: None)
    fake_mode = FakeTensorMode()
    shadows = ShadowValues(fake_mode)
    log = AllocationLog() if measure_memory else None
    with contextlib.ExitStack() as stack:
        for mode in (_memory_tracker_notes_ignored(), fake_mode, log, shadows, values_known_to_libraries(shadows),
                     kernels):
            if mode is not None:
                stack.enter_context(mode)
        progress("model")
        model = build_model()
        model.train()
        inputs = {key: shadows.fake(value) for key, value in batch.items()}
        optimizer = make_optimizer(model)
        _create_optimizer_state(model, optimizer)
        tracker = _tracking(stack, model, optimizer, inputs) if measure_memory else None
        runner, ddp_buckets = _in_ddp(model, stack, tracker) if ddp else (model, 0)
        if log is not None:
            _start_log(log, inputs, optimizer)
        recorder = stack.enter_context(Recorder(model))
        ledger = tracker.ledger if tracker is not None else Ledger()
        # MemTracker keeps statistics per module for one forward: let the next micro-batch start them afresh.
        forget_modules = tracker.reset_mod_stats if tracker is not None else (lambda: None)
        micro_batch = _MicroBatch(runner, inputs, recorder, ledger, progress, _autocast(precision, kernels),
                                  forget_modules)
        with engine.playing(model, ledger) if engine is not None else contextlib.nullcontext():
            for index in range(grad_accum):
                synced = index == grad_accum - 1 or not ddp
                with contextlib.nullcontext() if synced else runner.no_sync():
                    micro_batch(grad_accum)
            # Before the play ends: what it does after the backward serves the fake optimizer step only.
            after_backward, phase = _peak_so_far(tracker), ledger.phase_at_peak
        progress("optimizer")
        ledger.phase = "optimizer"
        _optimizer_step(model, optimizer, clip_gradients or _clipping(model, clip_grad_norm), recorder)
        if tracker is None:
            return FakeStep(recorder.recording, None)
        at_end = _peak_so_far(tracker)
        state = sum(snap.get(key, 0) for snap in tracker.get_tracker_snapshot("current").values()
                    for key in snap if getattr(key, "value", key) == "Optstate")
    training, optimizing = _steady_state(after_backward, phase, at_end, state, ddp_buckets)
    peak = optimizing if optimizing is not None and optimizing.total > training.total else training
    return FakeStep(recorder.recording, peak, training, optimizing, log.events())


def _tracking(stack: contextlib.ExitStack, model, optimizer, inputs: Mapping[str, torch.Tensor]):
    """The memory tracker, entered on `stack`, with what exists before the step: the model, the optimizer's
    state, the batch (on the device too)."""
    tracker = _peak_tracker(model)
    tracker.track_external(model, optimizer, *inputs.values())
    stack.enter_context(tracker)
    return tracker


def _start_log(log: AllocationLog, inputs: Mapping[str, torch.Tensor], optimizer) -> None:
    """The step's allocations start from what is on the device now: the model, the optimizer's state, the
    batch; not AdamW's step counts, which it keeps on the host unless capturable or fused (torch/optim/adam.py,
    _init_group)."""
    log.track(inputs)
    log.leave_out(state["step"] for state in optimizer.state.values() if "step" in state)
    log.start()


def _autocast(precision: str, kernels: TargetKernels | None) -> Callable[[], contextlib.AbstractContextManager]:
    """The forward's autocast: to the precision's 16-bit type, with the target's lists when there are kernels."""
    chosen = PRECISIONS[precision]
    if not chosen.autocast:
        return contextlib.nullcontext
    if kernels is not None:
        return lambda: kernels.autocast(chosen.dtype)
    return lambda: torch.autocast("cpu", dtype=chosen.dtype)


@dataclass(frozen=True)
class _MicroBatch:
    """One micro-batch's forward (under the autocast) and backward of `loss / micro-batches`, as the trainer's
    `Parallel.backward` scales it."""

    runner: torch.nn.Module
    inputs: Mapping[str, torch.Tensor]
    recorder: Recorder
    ledger: Ledger
    progress: Callable[[str], None]
    autocast: Callable[[], contextlib.AbstractContextManager]
    forget_modules: Callable[[], None]

    def __call__(self, micro_batches: int) -> None:
        self.forget_modules()
        self.progress("forward")
        self.recorder.phase("forward")
        self.ledger.phase = "forward"
        with self.autocast():
            loss = self.runner(**self.inputs).loss
        self.progress("backward")
        self.recorder.phase("backward")
        self.ledger.phase = "backward"
        (loss / micro_batches if micro_batches > 1 else loss).backward()


def _create_optimizer_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """The optimizer's state as every step after the first finds it (AdamW's moments and step counts): one step
    over zero gradients creates it, unrecorded and unmeasured."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    for parameter in trainable:
        parameter.grad = torch.zeros_like(parameter)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def _clipping(model: torch.nn.Module, clip_grad_norm: float | None) -> Callable[[], object] | None:
    if clip_grad_norm is None:
        return None
    return lambda: torch.nn.utils.clip_grad_norm_(model.parameters(), clip_grad_norm, foreach=True)


def _optimizer_step(model, optimizer, clip_gradients: Callable[[], object] | None, recorder: Recorder) -> None:
    if clip_gradients is not None:
        recorder.phase("optimizer", scope="clip_grad_norm_")
        clip_gradients()
    recorder.phase("optimizer", scope=f"{type(optimizer).__name__}.step")
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def _steady_state(after_backward, phase: str, at_end, state: int,
                  ddp_buckets: int) -> tuple[Memory, Memory | None]:
    """The step's peaks: its forward and backward's (with the optimizer state there from the start), and its
    optimizer step's when that is higher than where the backward ended."""
    training = _memory(after_backward, phase, after_backward.get("Optstate", 0), ddp_buckets)
    if at_end.get("Total", 0) <= after_backward.get("Total", 0):
        return training, None
    # MemTracker files all the optimizer step makes under optimizer state; beyond the state that stays
    # (AdamW's moments), they are the foreach kernels' temporaries (a sqrt of every exp_avg_sq, …).
    temporaries = at_end.get("Optstate", 0) - state
    return training, _memory({**at_end, "Temp": at_end.get("Temp", 0) + temporaries}, "optimizer", state,
                             ddp_buckets)
