"""The trainer's step queues its work and reads nothing back; what it records is read in windows, at log time.

A read of a device tensor (`.item()`, `float()`, `int()`, `bool()`: aten's `_local_scalar_dense`) makes the host
wait for the device. The step must do none, so that the host prepares the next step while the device runs this
one; the loss, token counts and gradient norms are read when the loop logs (step_records.py), and give the same
records as reading every step would.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from portlayer.train import data
from portlayer.train.batches import MicroBatches
from portlayer.train.presets import get_preset
from portlayer.train.step_records import StepWindow
from portlayer.train.train import Options, TrainingStep, World, optimizer_name

pytestmark = pytest.mark.usefixtures("restore_torch_switches", "cpu_backend")


class Reads(TorchDispatchMode):
    """Counts the tensor reads made while it is active."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._local_scalar_dense.default:
            self.count += 1
        return func(*args, **(kwargs or {}))


class LanguageModel(torch.nn.Module):
    """A causal LM as small as one embedding and one projection, with HuggingFace's call signature, and no reads
    of its own (a real model may read a mask to choose a kernel: that is the model's, not the trainer's)."""

    def __init__(self, vocab: int):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, 16)
        self.head = torch.nn.Linear(16, vocab)

    def forward(self, input_ids, attention_mask, labels):
        logits = self.head(self.embed(input_ids))[:, :-1]
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels[:, 1:].flatten(), ignore_index=-100)
        return SimpleNamespace(loss=loss)


def training_step(grad_accum: int = 2) -> TrainingStep:
    preset = get_preset("gpt2-tiny")
    blocks = data.load_blocks(preset.task, 32, None)
    options = Options(preset=preset, steps=4, per_device_batch=2, grad_accum=grad_accum, seq_len=32, quiet=True)
    world = World(rank=0, local_rank=0, size=1, distributed=False)
    model = LanguageModel(len(blocks.tokenizer))
    return TrainingStep.build(options, world, torch.device("cpu"), model, blocks, data.Order(len(blocks.train), 0))


def test_a_training_step_reads_nothing_back_and_the_window_reads_it_all():
    training = training_step()
    # The batches built beforehand: data.py indexes host tensors to build them, which costs the device nothing but
    # would count here.
    built = {index: training.batches._load(index) for index in range(training.batches.total)}
    training.batches._load = built.__getitem__
    window = StepWindow(training.world, training.device, training.options.grad_accum)
    with Reads() as during_steps:
        for step in (1, 2, 3):
            window.add(0.0, step, training.scheduler.get_last_lr()[0], *training(step))
    assert during_steps.count == 0
    with Reads() as during_read:
        records = window.read()
    assert during_read.count > 0  # the losses and norms, read here and only here
    assert [r["step"] for r in records] == [1, 2, 3]
    assert all(math.isfinite(r["loss"]) and r["grad_norm"] > 0 for r in records)


def test_outside_parity_the_optimizer_is_the_backends_fused_one_and_in_parity_torchs_default():
    training = training_step()
    assert training.parallel.optimizer.defaults["fused"] is True  # the cpu has fused AdamW kernels
    assert optimizer_name(parity=False) == "AdamW (fused)"
    assert optimizer_name(parity=True) == "AdamW"  # what the committed baselines trained with


def test_backends_without_fused_kernels_get_foreach(monkeypatch):
    from portlayer.backends.musa import BACKEND as MUSA
    from portlayer.backends.npu import BACKEND as NPU
    from portlayer.train import train as train_module

    for record in (NPU, MUSA):
        monkeypatch.setattr(train_module.portlayer, "backend", lambda record=record: record)
        assert train_module.optimizer_implementation(parity=False) == {"foreach": True}
        assert optimizer_name(parity=False) == "AdamW (foreach)"


def test_a_window_read_at_once_gives_the_records_read_one_by_one():
    world = World(rank=0, local_rank=0, size=1, distributed=False)
    steps = [  # (step, lr, the micro-batches' losses, tokens, gradient norm)
        (1, 1e-3, [2.0, 4.0], 100, torch.tensor(0.5)),
        (2, 2e-3, [1.0, 2.0], 80, torch.tensor(math.inf)),  # an fp16 overflow the scaler skipped
        (3, 3e-3, [0.5, 0.25], 60, 0.75),  # DeepSpeed's engine gives the norm as a float
    ]
    one_by_one = []
    for step, lr, losses, tokens, norm in steps:
        window = StepWindow(world, torch.device("cpu"), grad_accum=2)
        window.add(0.0, step, lr, torch.tensor(losses), tokens, norm)
        one_by_one += window.read()
    window = StepWindow(world, torch.device("cpu"), grad_accum=2)
    for step, lr, losses, tokens, norm in steps:
        window.add(0.0, step, lr, torch.tensor(losses), tokens, norm)
    together = window.read()
    assert window.read() == []  # a window is read once
    drop_time = lambda records: [{k: v for k, v in r.items() if k not in ("seconds", "tokens_per_s")} for r in records]  # noqa: E731
    assert drop_time(together) == drop_time(one_by_one)
    assert [r["loss"] for r in together] == [3.0, 1.5, 0.375]  # averaged over the micro-batches
    assert [r["grad_norm"] for r in together] == [0.5, None, 0.75]
    assert [r["lr"] for r in together] == [1e-3, 2e-3, 3e-3]
    assert [r["peak_memory_bytes"] for r in together] == [None] * 3  # the cpu has no device allocator
    # Each step's share of the window's time: tokens/s in proportion to each step's tokens.
    assert [r["tokens_per_s"] / together[0]["tokens_per_s"] for r in together] == pytest.approx([1.0, 0.8, 0.6])


def test_micro_batches_staged_ahead_are_the_ones_asked_for():
    preset = get_preset("gpt2-tiny")
    blocks = data.load_blocks(preset.task, 32, None)
    order = data.Order(len(blocks.train), 0)
    batches = MicroBatches(blocks, order, micro=2, rank=1, world_size=2, seed=0, device=torch.device("cpu"), total=3)
    staged = {}
    for index in range(3):
        batch = batches.get(index)
        batches.stage(index + 1)
        staged[index] = batch
    assert batches._staged is None  # nothing past the run's last micro-batch is built
    for index, batch in staged.items():
        # Rank 1's samples of micro-batch `index`: after rank 0's two in the run's order.
        expected = data.train_batch(blocks, order, index * 4 + 2, 2, 0)
        assert all(torch.equal(batch.tensors[name], expected[name]) for name in expected)
        assert batch.tokens == int(expected["attention_mask"].sum())
