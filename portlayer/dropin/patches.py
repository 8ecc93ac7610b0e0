"""The drop-in's process-wide patches: what a CUDA script reaches without going through `portlayer.torch`.

`import portlayer.torch as torch` retargets everything the script asks of `torch.…`. A few lines reach torch
another way — `import torch.distributed as dist`, `from torch.nn.parallel import DistributedDataParallel`,
and methods of the tensors and modules themselves (`.cuda()`, `.to("cuda:0")`) — and only those objects
are patched, each listed in `PATCHES`. Every patch rewrites CUDA names only (see `retarget`), which on a
machine without CUDA would otherwise fail, so working calls behave as before; `torch.cuda` itself is never
touched, and other libraries keep seeing the truth there. On the cuda backend nothing is patched.

`patch()` and `unpatch()` are idempotent; `unpatch()` puts back the very objects it replaced.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import pkgutil
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from portlayer import reducers
from portlayer.dropin import user_line
from portlayer.dropin.retarget import Retarget, leading_device


def _rewriting(original: Callable, retarget: Retarget, **rewrites: str) -> Callable:
    """`original`, with each named argument passed through the `Retarget` method named for it.

    For calls made once per run (process groups, DDP), where binding the signature costs nothing that
    matters and keeps every way of passing the argument (positional or keyword) covered.
    """
    signature = inspect.signature(original)
    methods = {argument: getattr(retarget, method) for argument, method in rewrites.items()}

    @functools.wraps(original)
    def retargeted(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        for argument, rewrite in methods.items():
            if argument in bound.arguments:
                bound.arguments[argument] = rewrite(bound.arguments[argument])
        return original(*bound.args, **bound.kwargs)

    return retargeted


def _releasing_reducers(original: Callable, retarget: Retarget) -> Callable:
    """`destroy_process_group` that first frees the reducers of the DDP models on the group (see reducers.py)."""

    @functools.wraps(original)
    def destroy_process_group(group=None):
        reducers.release(group)
        return original(group)

    return destroy_process_group


def _tensor_cuda(original: Callable, retarget: Retarget) -> Callable:
    import torch

    tensor_to = torch.Tensor.to

    @functools.wraps(original)
    def cuda(self, device=None, non_blocking=False, memory_format=torch.preserve_format):
        return tensor_to(self, retarget.destination(device), non_blocking=non_blocking, memory_format=memory_format)

    return cuda


def _tensor_pin_memory(original: Callable, retarget: Retarget) -> Callable:
    """`Tensor.pin_memory()` on the host: there is no accelerator to pin for, so a copy, as pinning gives.

    Scripts pin on their CUDA branch (`if device_type == "cuda": x.pin_memory().to(device, non_blocking=True)`),
    and the drop-in leaves their `"cuda"` strings as they are, so that branch runs here; torch would raise.
    What the script gets is what it would get from pinning: a new tensor with the same values.
    """

    @functools.wraps(original)
    def pin_memory(self, device=None):
        return self.clone()

    return pin_memory


def _module_cuda(original: Callable, retarget: Retarget) -> Callable:
    import torch

    module_to = torch.nn.Module.to

    @functools.wraps(original)
    def cuda(self, device=None):
        return module_to(self, retarget.destination(device))

    return cuda


def _import_keeping_dropin(original: Callable, retarget: Retarget) -> Callable:
    """`__import__` that keeps `import torch.onnx` from taking the drop-in away.

    `import torch.x` binds the name `torch` to the top package, `sys.modules["torch"]`: in a script that
    did `import portlayer.torch as torch`, every later `torch.cuda…` / `torch.device("cuda")` would then reach
    plain torch and fail. When the importing module's `torch` is the drop-in, the statement gets the drop-in
    back (its attributes are the same submodules: `torch.onnx` is torch's, `torch.cuda` the drop-in's).
    Every other import is torch's own, untouched.
    """

    @functools.wraps(original)
    def __import__(name, globals=None, locals=None, fromlist=(), level=0):
        module = original(name, globals, locals, fromlist, level)
        if (
            not fromlist
            and level == 0
            and name.startswith("torch")
            and (len(name) == 5 or name[5] == ".")
            and globals is not None
        ):
            bound = globals.get("torch")
            if bound is not None and getattr(bound, "__name__", None) == "portlayer.torch":
                return bound
        return module

    return __import__


@dataclass(frozen=True)
class Patch:
    # "module" or "module:Class", as `pkgutil.resolve_name` reads it.
    owner: str
    attribute: str
    # (the object being replaced, the active backend's Retarget) -> its replacement.
    build: Callable[[Any, Retarget], Any]
    # Needed only where there is no accelerator at all (the cpu backend).
    host_only: bool = False
    # Others swap it too, and put theirs back (`warnings.catch_warnings` does): `unpatch` restores the
    # original only where ours is still in place, and says nothing otherwise.
    shared: bool = False

    @property
    def name(self) -> str:
        return f"{self.owner.replace(':', '.')}.{self.attribute}"


# Everything the drop-in patches process-wide. `.cuda()` and the `.to()`s are built before
# `Tensor.to`/`Module.to` are replaced, so they call the originals directly.
PATCHES = (
    Patch(
        "torch.distributed",
        "init_process_group",
        lambda original, retarget: _rewriting(
            original, retarget, backend="dist_backend", device_id="dist_device"
        ),
    ),
    Patch(
        "torch.distributed",
        "new_group",
        lambda original, retarget: _rewriting(original, retarget, backend="dist_backend"),
    ),
    Patch("torch.distributed", "destroy_process_group", _releasing_reducers),
    Patch(
        "torch.nn.parallel:DistributedDataParallel",
        "__init__",
        lambda original, retarget: _rewriting(
            original, retarget, device_ids="ddp_devices", output_device="ddp_devices"
        ),
    ),
    Patch("torch:Tensor", "cuda", _tensor_cuda),
    Patch("torch.nn:Module", "cuda", _module_cuda),
    Patch("torch:Tensor", "pin_memory", _tensor_pin_memory, host_only=True),
    Patch("builtins", "__import__", _import_keeping_dropin),
    Patch(
        "warnings",
        "showwarning",
        lambda original, retarget: user_line.showing_user_line(original),
        shared=True,
    ),
    Patch("torch:Tensor", "to", lambda original, retarget: leading_device(original, retarget, method=True)),
    Patch("torch.nn:Module", "to", lambda original, retarget: leading_device(original, retarget, method=True)),
)


@dataclass(frozen=True)
class _Applied:
    patch: Patch
    owner: Any
    # What the owner's own namespace held before (`_ABSENT` when the attribute was inherited).
    before: Any
    replacement: Any


_ABSENT = object()
_lock = threading.Lock()
_applied: list[_Applied] | None = None


def patch() -> None:
    """Apply the drop-in's patches for the active backend (nothing on cuda). Idempotent."""
    global _applied
    from portlayer import runtime

    with _lock:
        if _applied is not None:
            return
        retarget = Retarget(runtime.selection().backend)
        applied: list[_Applied] = []
        if not retarget.identity:
            for entry in PATCHES:
                if entry.host_only and not retarget.host:
                    continue
                owner = pkgutil.resolve_name(entry.owner)
                before = vars(owner).get(entry.attribute, _ABSENT)
                replacement = entry.build(getattr(owner, entry.attribute), retarget)
                setattr(owner, entry.attribute, replacement)
                applied.append(_Applied(entry, owner, before, replacement))
        _applied = applied


def unpatch() -> None:
    """Put back every object `patch()` replaced, exactly. Idempotent."""
    global _applied
    with _lock:
        if _applied is None:
            return
        for done in reversed(_applied):
            if vars(done.owner).get(done.patch.attribute) is not done.replacement:
                # Someone patched it again after us: putting ours back would throw theirs away.
                if not done.patch.shared:
                    warnings.warn(
                        f"portlayer.unpatch: {done.patch.name} was replaced since; left as it is",
                        stacklevel=user_line.stacklevel(),
                    )
            elif done.before is _ABSENT:
                delattr(done.owner, done.patch.attribute)
            else:
                setattr(done.owner, done.patch.attribute, done.before)
        _applied = None


def is_patched() -> bool:
    return _applied is not None


@contextlib.contextmanager
def patched() -> Iterator[None]:
    """`with portlayer.patched(): …` — the drop-in's patches inside the block, the state before restored after."""
    already = is_patched()
    patch()
    try:
        yield
    finally:
        if not already:
            unpatch()
