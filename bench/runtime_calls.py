"""Per-call cost of portlayer's hot calls against the direct torch call on the same backend.

Goal: ratio <= 1.10 for each. Run: python bench/runtime_calls.py
"""

from __future__ import annotations

import statistics
import timeit

import torch

import portlayer

ROUNDS = 15
NUMBER = 20_000


def direct_device():
    backend = portlayer.backend()
    if not backend.is_accelerator:
        return lambda: torch.device("cpu")
    module = portlayer.device_module()
    return lambda: torch.device(backend.device_type, module.current_device())


def autocast_pair(make):
    def enter_exit():
        with make():
            pass

    return enter_exit


def pairs():
    module = portlayer.device_module()
    device_type = portlayer.device_type()
    yield "device()", portlayer.device, direct_device()
    yield "synchronize()", portlayer.synchronize, module.synchronize
    yield "current_device()", portlayer.current_device, module.current_device
    yield (
        "autocast enter/exit",
        autocast_pair(portlayer.autocast),
        autocast_pair(lambda: torch.autocast(device_type)),
    )


def per_call_ns(fn) -> float:
    return timeit.timeit(fn, number=NUMBER) / NUMBER * 1e9


def main() -> None:
    print(
        f"backend {portlayer.device_type()}, torch {torch.__version__}, median of {ROUNDS} interleaved rounds"
    )
    print(f"{'call':<22}{'portlayer ns':>14}{'direct ns':>12}{'ratio':>8}  goal <= 1.10")
    for name, through_portlayer, direct in pairs():
        ours, theirs = [], []
        for _ in range(ROUNDS):  # interleaved, so drift on a noisy machine hits both sides alike
            ours.append(per_call_ns(through_portlayer))
            theirs.append(per_call_ns(direct))
        mine, anchor = statistics.median(ours), statistics.median(theirs)
        print(f"{name:<22}{mine:>14.1f}{anchor:>12.1f}{mine / anchor:>8.2f}")


if __name__ == "__main__":
    main()
