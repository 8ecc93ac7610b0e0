"""Deliberately wrong ports of the reference trainer's training: each is a mistake real ports make, injected
into an in-process run of the trainer (`train_wrong`), for the wrong-ports table (docs/parity.md "Wrong ports").

    run = train_wrong("loss not divided by the micro-batches", options)
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from portlayer.strategies.parallel import Parallel
from portlayer.train import train as train_module
from portlayer.train.train import Options, train


@dataclass(frozen=True)
class WrongPort:
    what: str  # the mistake, as a reviewer would name it
    change: Callable[[Options], Options] = lambda options: options  # a setting the port got wrong
    patch: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext  # code the port got wrong


def _preset(**fields) -> Callable[[Options], Options]:
    return lambda options: dataclasses.replace(options, preset=dataclasses.replace(options.preset, **fields))


@contextlib.contextmanager
def _replaced(owner, name: str, value):
    saved = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, saved)


def _backward_undivided(self: Parallel, loss: torch.Tensor) -> None:
    self.scaler.scale(loss).backward()  # the port forgot `/ grad_accum`: gradients summed over micro-batches


def _schedule_per_micro_batch() -> contextlib.AbstractContextManager:
    step = Parallel.step

    def stepped(self: Parallel):
        norm = step(self)
        for _ in range(self.setup.grad_accum - 1):  # the port stepped the schedule at every micro-batch
            self.scheduler.step()
        return norm

    return _replaced(Parallel, "step", stepped)


def _bf16_master_weights() -> contextlib.AbstractContextManager:
    build = train_module._build_model

    def in_bf16(options, device):
        model, zeroed, checksum = build(options, device)
        return model.to(torch.bfloat16), zeroed, checksum  # no fp32 master copy: AdamW updates bf16 weights

    return _replaced(train_module, "_build_model", in_bf16)


def _adamw(**defaults) -> Callable[[], contextlib.AbstractContextManager]:
    return lambda: _replaced(torch.optim, "AdamW", functools.partial(torch.optim.AdamW, **defaults))


WRONG_PORTS = {
    port.what: port
    for port in (
        WrongPort("learning rate x1.1", lambda o: dataclasses.replace(o, lr=o.lr * 1.1)),
        WrongPort("warm-up one step longer", lambda o: dataclasses.replace(o, warmup_steps=o.warmup_steps + 1)),
        WrongPort("gradient clipping removed", _preset(max_grad_norm=math.inf)),
        WrongPort("dropout left on", lambda o: dataclasses.replace(o, keep_dropout=True)),
        WrongPort("loss not divided by the micro-batches", patch=lambda: _replaced(Parallel, "backward", _backward_undivided)),
        WrongPort("schedule stepped at every micro-batch", patch=_schedule_per_micro_batch),
        WrongPort("AdamW beta2 0.99 (not 0.999)", patch=_adamw(betas=(0.9, 0.99))),
        WrongPort("bf16 weights, no fp32 master copy", patch=_bf16_master_weights),
        # Subtler, for the miss rate: a bug may be real and still below a 30-step band.
        WrongPort("learning rate x1.01", lambda o: dataclasses.replace(o, lr=o.lr * 1.01)),
        WrongPort("weight decay dropped", _preset(weight_decay=0.0)),
        WrongPort("AdamW eps 1e-6 (not 1e-8)", patch=_adamw(eps=1e-6)),
    )
}


def train_wrong(what: str, options: Options) -> dict:
    """The run record of `options` trained with the mistake `what` (a key of WRONG_PORTS)."""
    port = WRONG_PORTS[what]
    with port.patch():
        return train(port.change(options))
