"""The dump file: per-module statistics of one forward and backward, small enough to mail around.

    {"format": "portlayer-parity-dump", "version": 1,
     "meta":   {"side": {backend, device, device_name, dtype, torch}, "model": …, "batch": {…}, "loss": …,
                "sample_size": 64, "full": "run.dump.pt" | null},
     "calls":  [{"key", "type", "parent", "depth", "inputs": [Stats], "outputs": [Stats],
                 "grads": [Stats | null]}, …],                  # execution order
     "params": {"name": Stats of its gradient, …}}

With `full`, the tensors themselves go to a .pt file beside the JSON and `Stats.full` indexes into it.
"""

from __future__ import annotations

import hashlib
import json
import os
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from portlayer.atomic import replacing, write_atomic
from portlayer.train.locate.capture import trace
from portlayer.train.locate.oracle import model_dtype, move_batch, prepare_copy
from portlayer.train.locate.sides import Side, parse_dtype
from portlayer.train.locate.stats import SAMPLE_SIZE, Stats
from portlayer.train.locate.tree import leaves

FORMAT = "portlayer-parity-dump"
VERSION = 1


class DumpError(ValueError):
    """A dump that cannot be used: missing, unreadable, not a dump, or not comparable with the other."""


@dataclass
class DumpedCall:
    key: str
    module_type: str
    parent: int | None
    depth: int
    inputs: list[Stats]
    outputs: list[Stats]
    grads: list[Stats | None]


@dataclass
class Dump:
    side: Side
    meta: dict
    calls: list[DumpedCall]
    params: dict[str, Stats]
    tensors: list[torch.Tensor] | None = None  # the full tensors, when written with --full

    def full_tensor(self, stats: Stats) -> torch.Tensor | None:
        if self.tensors is None or stats.full is None:
            return None
        return self.tensors[stats.full]


def batch_fingerprint(batch: Any) -> dict:
    """Names, shapes and a hash of the batch's bytes: two dumps are comparable only for the same batch."""
    digest = hashlib.sha256()
    shapes = []
    for t in leaves(batch):
        t = t.detach().cpu().contiguous().reshape(-1)
        digest.update(str((t.dtype, t.numel())).encode())
        digest.update(t.view(torch.uint8).numpy().tobytes())
        shapes.append(list(t.shape))
    return {"checksum": digest.hexdigest()[:16], "shapes": shapes}


def collect(
    model: nn.Module,
    batch: Any,
    *,
    device: torch.device | None = None,
    dtype: torch.dtype | None = None,
    full: bool = False,
    model_name: str | None = None,
    loss_fn: Callable[[Any], torch.Tensor] | None = None,
) -> Dump:
    """Run `model` once forward and backward on `batch` on `device` in `dtype`; keep statistics."""
    import portlayer

    device = torch.device(device) if device is not None else portlayer.device()
    dtype = dtype or model_dtype(model)
    tensors: list[torch.Tensor] | None = [] if full else None
    # A module's output is usually the next module's input: the same tensor, unchanged since (same
    # version counter), gets the statistics already computed. Weak references hold nothing alive.
    seen: dict[int, tuple[weakref.ref, int, Stats]] = {}

    def keep(t: torch.Tensor) -> Stats:
        hit = seen.get(id(t))
        if hit is not None and hit[0]() is t and hit[1] == t._version:
            return hit[2]
        stats = Stats.of(t)
        if tensors is not None and t.is_floating_point():
            stats.full = len(tensors)
            tensors.append(t.detach().cpu().clone())
        seen[id(t)] = (weakref.ref(t), t._version, stats)
        return stats

    on_device = prepare_copy(model, device, dtype)
    run = trace(on_device, move_batch(batch, device, dtype), keep, loss_fn)
    calls = [
        DumpedCall(
            key=call.key,
            module_type=call.module_type,
            parent=call.parent,
            depth=call.depth,
            inputs=[s for s in leaves((call.args, call.kwargs), Stats) if s.floating],
            outputs=call.outputs,
            grads=call.grads,
        )
        for call in run.calls
    ]
    meta = {
        "model": model_name or type(model).__name__,
        "batch": batch_fingerprint(batch),
        "loss": float(run.loss),
        "sample_size": SAMPLE_SIZE,
    }
    return Dump(Side.active(device, dtype), meta, calls, run.param_grads, tensors)


def write(dump: Dump, path: os.PathLike) -> list[Path]:
    """Write the dump (and its .pt of full tensors, if any) atomically; returns the files written."""
    path = Path(path)
    written = [path]
    meta = dict(dump.meta, full=None)
    if dump.tensors is not None:
        pt = path.with_name(path.name + ".pt")
        meta["full"] = pt.name
        with replacing(pt) as temporary:
            torch.save(dump.tensors, temporary)
        written.append(pt)
    document = {
        "format": FORMAT,
        "version": VERSION,
        "meta": dict(meta, side=dump.side.as_dict()),
        "calls": [
            {
                "key": c.key,
                "type": c.module_type,
                "parent": c.parent,
                "depth": c.depth,
                "inputs": [s.as_dict() for s in c.inputs],
                "outputs": [s.as_dict() for s in c.outputs],
                "grads": [None if s is None else s.as_dict() for s in c.grads],
            }
            for c in dump.calls
        ],
        "params": {name: s.as_dict() for name, s in dump.params.items()},
    }
    write_atomic(path, json.dumps(document, separators=(",", ":")))
    return written


def read(path: os.PathLike) -> Dump:
    """Load a dump; any problem is a DumpError whose message names the file and says what is wrong."""
    path = Path(path)
    try:
        document = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise DumpError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DumpError(f"{path}: not a readable JSON dump ({exc.__class__.__name__})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise DumpError(f"{path}: not a portlayer parity dump")
    if document.get("version") != VERSION:
        raise DumpError(f"{path}: dump version {document.get('version')!r}, this portlayer reads {VERSION}")
    try:
        meta = document["meta"]
        calls = [
            DumpedCall(
                key=str(c["key"]),
                module_type=str(c["type"]),
                parent=c["parent"],
                depth=int(c["depth"]),
                inputs=[Stats.from_dict(s) for s in c["inputs"]],
                outputs=[Stats.from_dict(s) for s in c["outputs"]],
                grads=[None if s is None else Stats.from_dict(s) for s in c["grads"]],
            )
            for c in document["calls"]
        ]
        params = {str(name): Stats.from_dict(s) for name, s in document["params"].items()}
        side = Side.from_dict(meta["side"])
        parse_dtype(side.dtype)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DumpError(f"{path}: malformed dump ({exc.__class__.__name__}: {exc})") from None
    if any(c.parent is not None and not 0 <= c.parent < i for i, c in enumerate(calls)):
        raise DumpError(f"{path}: malformed dump (a call's parent is not an earlier call)")
    tensors = None
    if meta.get("full"):
        pt = path.with_name(str(meta["full"]))
        try:
            tensors = torch.load(pt, map_location="cpu", weights_only=True)
        except Exception as exc:  # torch.load raises many types for a bad file; all mean the same here
            raise DumpError(f"{pt}: full tensors unreadable ({exc.__class__.__name__})") from None
    return Dump(side, meta, calls, params, tensors)
