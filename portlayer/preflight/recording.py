"""Record the aten ops a training step dispatches, with their dtypes and where each one first came from.

A `TorchDispatchMode` sees every op below autograd: the forward's, the backward's and the optimizer's.
Where an op came from is told by the module being run (forward hooks push and pop its qualified name) and
the first Python frame outside torch. Backward ops run in the autograd engine, away from the user's code:
they are traced to the forward call that built their autograd node, which a `TorchFunctionMode` tags as
the forward runs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from portlayer.preflight.variants import BOOKKEEPING_NAMESPACES, device_generic

PHASES = ("forward", "backward", "optimizer")
_ORIGIN_KEY = "portlayer.preflight.origin"
# Frames in these trees are torch's machinery or ours, never the line a user wants to see.
_INTERNAL_DIRS = tuple(os.path.dirname(module.__file__) + os.sep for module in (torch, sys.modules[__package__]))


@dataclass(frozen=True)
class Origin:
    """Where an op was first dispatched from."""

    phase: str
    module: str = ""  # qualified name in the model ("transformer.h.0.attn"); "" outside any submodule
    location: str | None = None  # "file.py:42", the first frame outside torch
    autograd_node: str | None = None  # for backward ops: the node that ran them ("MmBackward0")

    def describe(self) -> str:
        parts = [self.phase]
        if self.autograd_node:
            parts.append(f"of {self.autograd_node}")
        if self.module:
            parts.append(f"in {self.module}")
        if self.location:
            parts.append(f"at {self.location}")
        return " ".join(parts)

    def as_dict(self) -> dict:
        return {"phase": self.phase, "module": self.module, "location": self.location,
                "autograd_node": self.autograd_node}


@dataclass
class OpUse:
    """Every dispatch of one op (named the device-generic way) during the recorded step."""

    op: str
    first: Origin
    count: int = 0
    dtypes: set = field(default_factory=set)
    phases: set = field(default_factory=set)
    recorded_as: set = field(default_factory=set)  # cpu-specific names folded into `op`


# The collectives a step can dispatch (functional ones from DTensor, in-place ones from torch.distributed's
# calls), by the name the collective libraries give them.
COLLECTIVES = {
    "_c10d_functional::all_reduce": "all-reduce", "c10d::allreduce_": "all-reduce",
    "_c10d_functional::all_gather_into_tensor": "all-gather", "c10d::_allgather_base_": "all-gather",
    "_c10d_functional::reduce_scatter_tensor": "reduce-scatter", "c10d::_reduce_scatter_base_": "reduce-scatter",
    "c10d::send": "send", "c10d::recv_": "recv",
}


@dataclass(frozen=True)
class CollectiveCall:
    """One collective the step dispatched."""

    kind: str  # "all-reduce", "all-gather", "reduce-scatter", "send", "recv"
    group: str  # the process group's description (preflight's fake groups are named "tp", "dp", "pp")
    ranks: int  # the group's size
    bytes: int  # the whole tensor's: the all-reduced one, the gathered one, the one reduce-scattered
    phase: str


@dataclass
class Recording:
    ops: dict = field(default_factory=dict)  # op name -> OpUse, in order of first dispatch
    collectives: list = field(default_factory=list)  # CollectiveCall, in order

    @property
    def calls(self) -> int:
        return sum(use.count for use in self.ops.values())


def _short_path(filename: str) -> str:
    marker = f"{os.sep}site-packages{os.sep}"
    if marker in filename:
        return filename.rsplit(marker, 1)[1]
    relative = os.path.relpath(filename)
    return filename if relative.startswith("..") else relative


def _user_location(boundary) -> str | None:
    """The innermost frame outside torch, looking no further out than `boundary` (the frame that entered
    the recorder: its callers did not run the step)."""
    frame = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_INTERNAL_DIRS) and not filename.startswith("<"):
            return f"{_short_path(filename)}:{frame.f_lineno}"
        if frame is boundary:
            return None
        frame = frame.f_back
    return None


def _dtypes(values, into: set) -> None:
    for value in values:
        if isinstance(value, torch.Tensor):
            into.add(str(value.dtype).replace("torch.", ""))
        elif isinstance(value, (list, tuple)):
            _dtypes(value, into)


class _Tracker:
    """State shared by the two modes and the module hooks: the phase, the module stack, the recording."""

    def __init__(self) -> None:
        self.recording = Recording()
        self.phase = "forward"
        self.scope = ""  # what runs outside the model's modules, e.g. "AdamW.step"
        self.modules: list[str] = []
        self.boundary = None

    def here(self) -> Origin:
        if self.phase == "backward":
            node = torch._C._current_autograd_node()
            forward = node.metadata.get(_ORIGIN_KEY) if node is not None else None
            name = node.name() if node is not None else None
            if forward is not None:
                return Origin("backward", forward.module, forward.location, name)
        module = self.modules[-1] if self.modules else self.scope
        return Origin(self.phase, module, _user_location(self.boundary))

    def note(self, func, args, kwargs, out) -> None:
        name = func.name()
        if name in COLLECTIVES:
            self.recording.collectives.append(_collective(COLLECTIVES[name], args, out, self.phase))
        if name.startswith(BOOKKEEPING_NAMESPACES):
            return
        op = device_generic(name)
        use = self.recording.ops.get(op)
        if use is None:
            use = self.recording.ops[op] = OpUse(op, self.here())
        use.count += 1
        use.phases.add(self.phase)
        if name != op:
            use.recorded_as.add(name)
        _dtypes(args, use.dtypes)
        _dtypes(kwargs.values(), use.dtypes)
        _dtypes(out if isinstance(out, (list, tuple)) else (out,), use.dtypes)


def _collective(kind: str, args, out, phase: str) -> CollectiveCall:
    """A collective's record: its group (named by its description, or resolved from the name a functional
    collective is given) and its largest tensor."""
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _resolve_process_group

    # An in-place collective is given its group boxed for the dispatcher; a functional one, its group's name.
    boxed = next((arg for arg in args if isinstance(arg, torch.ScriptObject)), None)
    if boxed is not None:
        group = dist.ProcessGroup.unbox(boxed)
    else:
        group = _resolve_process_group(next(arg for arg in reversed(args) if isinstance(arg, str)))
    tensors = [t for t in _flat((args, out)) if isinstance(t, torch.Tensor)]
    size = max((t.numel() * t.element_size() for t in tensors), default=0)
    return CollectiveCall(kind, group.group_desc, group.size(), size, phase)


def _flat(values) -> Iterator:
    for value in values:
        if isinstance(value, (list, tuple)):
            yield from _flat(value)
        else:
            yield value


class _DispatchRecorder(TorchDispatchMode):
    def __init__(self, tracker: _Tracker) -> None:
        super().__init__()
        self.tracker = tracker

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.tracker.note(func, args, kwargs, out)
        return out


class _AutogradTagger(TorchFunctionMode):
    """Tags each autograd node the forward creates with the forward's origin, for the backward to read."""

    def __init__(self, tracker: _Tracker) -> None:
        super().__init__()
        self.tracker = tracker

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.tracker.phase == "forward" and torch.is_grad_enabled():
            self._tag(out)
        return out

    def _tag(self, out) -> None:
        outputs = out if isinstance(out, (list, tuple)) else (out,)
        pending = [t.grad_fn for t in outputs if isinstance(t, torch.Tensor) and t.grad_fn is not None]
        origin = None
        # Walk back through the nodes this call created; earlier ones are tagged already, leaves have no inputs.
        while pending:
            node = pending.pop()
            if node is None or _ORIGIN_KEY in node.metadata:
                continue
            origin = origin or self.tracker.here()
            node.metadata[_ORIGIN_KEY] = origin
            pending.extend(next_node for next_node, _ in node.next_functions)


@contextmanager
def _module_scopes(tracker: _Tracker, model: torch.nn.Module | None) -> Iterator[None]:
    if model is None:
        yield
        return
    handles = []

    def enter(name):
        return lambda module, args: tracker.modules.append(name)

    def leave(module, args, output):
        tracker.modules.pop()

    for name, module in model.named_modules():
        if name:  # the root is "outside any submodule"
            handles.append(module.register_forward_pre_hook(enter(name)))
            handles.append(module.register_forward_hook(leave, always_call=True))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


class Recorder:
    """Use as a context manager around a training step; call `phase(name)` as it moves on.

        with Recorder(model) as recorder:
            loss = model(**batch).loss
            recorder.phase("backward"); loss.backward()
            recorder.phase("optimizer"); optimizer.step(); optimizer.zero_grad()
        recorder.recording
    """

    def __init__(self, model: torch.nn.Module | None = None) -> None:
        self._tracker = _Tracker()
        self._model = model
        self._stack = ExitStack()

    @property
    def recording(self) -> Recording:
        return self._tracker.recording

    def phase(self, name: str, scope: str = "") -> None:
        """Ops from here on belong to phase `name`; `scope` names what runs them outside the model."""
        if name not in PHASES:
            raise ValueError(f"unknown phase {name!r}: one of {', '.join(PHASES)}")
        self._tracker.phase, self._tracker.scope = name, scope

    def __enter__(self) -> Recorder:
        self._tracker.boundary = sys._getframe(1)
        self._stack.enter_context(_module_scopes(self._tracker, self._model))
        self._stack.enter_context(_AutogradTagger(self._tracker))
        self._stack.enter_context(_DispatchRecorder(self._tracker))
        return self

    def __exit__(self, *exc_info) -> None:
        self._stack.close()
        self._tracker.boundary = None
