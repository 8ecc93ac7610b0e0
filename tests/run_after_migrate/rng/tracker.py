"""A CUDA program in the shape of Megatron-LM's tensor-parallel RNG tracker (megatron/core/tensor_parallel/
random.py): named device RNG states, each from its own seed, forked into for a block of work (dropout in a
tensor-parallel region) and restored after, reached through torch.cuda's generator plumbing. Written for
these tests, not copied: `portlayer migrate` ports it, and the port must run where there is no CUDA.

Run, it prints one JSON object of what it observed (the test compares those with plain torch on the cpu).
"""

import contextlib
import json
import sys

import torch
from torch.cuda import _lazy_call, _lazy_init
from torch.cuda import device as device_ctx_manager

MODEL_PARALLEL = "model-parallel-rng"
EXPERT_PARALLEL = "expert-parallel-rng"


def read_device_state(device="cuda", graph_safe=False):
    if not graph_safe:
        return torch.cuda.get_rng_state(device=device)
    _lazy_init()
    if isinstance(device, str):
        device = torch.device(device)
    elif isinstance(device, int):
        device = torch.device("cuda", device)
    index = device.index
    if index is None:
        index = torch.cuda.current_device()
    return torch.cuda.default_generators[index].get_state()


def write_device_state(state, device=-1):
    # Not cloned, as Megatron's: the generator takes the tensor's bytes when the callable runs.
    if device == -1:
        device = torch.device("cuda")
    elif isinstance(device, int):
        device = torch.device("cuda", device)

    def apply():
        index = device.index
        if index is None:
            index = torch.cuda.current_device()
        with device_ctx_manager(index):
            torch.cuda.default_generators[index].set_state(state)

    _lazy_call(apply)


class StatesTracker:
    def __init__(self):
        self.states = {}
        self.seeds = set()

    def add(self, name, seed):
        if seed in self.seeds:
            raise ValueError(f"seed {seed} already exists")
        self.seeds.add(seed)
        before = torch.cuda.get_rng_state()
        torch.cuda.manual_seed(seed)
        self.states[name] = torch.cuda.get_rng_state()
        write_device_state(before)

    def get_states(self):
        return dict(self.states)

    def set_states(self, states):
        self.states = states

    @contextlib.contextmanager
    def fork(self, name=MODEL_PARALLEL):
        outside = read_device_state(graph_safe=torch.cuda.is_current_stream_capturing())
        write_device_state(self.states[name])
        try:
            yield
        finally:
            self.states[name] = read_device_state(graph_safe=True)
            write_device_state(outside)


def dropout_mask(shape, device):
    return torch.nn.functional.dropout(torch.ones(shape, device=device), p=0.5).ne(0)


def main(seed: int) -> dict:
    device = torch.device("cuda", torch.cuda.current_device())
    tracker = StatesTracker()
    torch.cuda.manual_seed(seed)
    tracker.add(MODEL_PARALLEL, seed + 2718)
    tracker.add(EXPERT_PARALLEL, seed + 1024)
    observed = {"device": str(device)}
    try:
        tracker.add("again", seed + 2718)
    except ValueError as error:
        observed["same_seed_twice"] = str(error)
    outside = [torch.rand(3, device=device).tolist()]
    with tracker.fork():
        observed["forked"] = [torch.rand(3, device=device).tolist()]
        observed["mask"] = dropout_mask((4, 4), device).tolist()
    outside.append(torch.rand(3, device=device).tolist())
    saved = {name: state.clone() for name, state in tracker.get_states().items()}
    with tracker.fork():
        observed["forked"].append(torch.rand(3, device=device).tolist())
    with tracker.fork(EXPERT_PARALLEL):
        observed["expert"] = torch.rand(3, device=device).tolist()
    tracker.set_states(saved)
    with tracker.fork():
        observed["restored"] = torch.rand(3, device=device).tolist()
    outside.append(torch.rand(3, device=device).tolist())
    observed["outside"] = outside
    return observed


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]))))
