"""The fake step: the same ops as a real cpu step, memory as hand-calculated and as the cpu allocator
measures it, values kept where shapes and branches need them."""

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode

from portlayer import preflight
from portlayer.preflight.fake_step import run_fake_step
from portlayer.preflight.measure import cpu_peak, resident
from portlayer.preflight.shadow import DataDependentError, ShadowValues


def adamw(model):
    return torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)


def second_step(model, batch, optimizer, **options):
    """The ops of a real step after the first: the steady state, which the fake step is (the first step
    also creates the optimizer's state)."""
    model(**batch).loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return preflight.record_step(model, batch, optimizer, **options).ops


@pytest.mark.parametrize("name", ["gpt2-tiny", "bert-base-uncased-tiny", "mixtral-8x7b-tiny"])
def test_fake_step_dispatches_exactly_the_ops_of_a_real_cpu_step(name):
    from portlayer.train import presets

    preset = presets.get_preset(name)
    batch = presets.example_batch(preset)
    model = presets.build_model(preset, parity=False)
    real = second_step(model, batch, adamw(model), clip_grad_norm=1.0)
    fake = run_fake_step(lambda: presets.build_model(preset, parity=False), batch, make_optimizer=adamw,
                         measure_memory=False).recording.ops

    assert list(fake) == list(real)  # the same ops, first dispatched in the same order
    for op, use in real.items():
        assert (fake[op].count, fake[op].dtypes, fake[op].phases) == (use.count, use.dtypes, use.phases), op
        assert fake[op].first.module == use.first.module, op


class TwoLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(1000, 1000)
        self.second = nn.Linear(1000, 1000)

    def forward(self, x, y):
        return SimpleNamespace(loss=F.mse_loss(self.second(torch.relu(self.first(x))), y))


def test_memory_of_a_known_model_by_hand():
    batch = {"x": torch.ones(100, 1000), "y": torch.ones(100, 1000)}
    memory = run_fake_step(TwoLinear, batch, make_optimizer=adamw, ddp=True).memory

    weights = 2 * (1000 * 1000 + 1000) * 4  # two 1000x1000 weights and their biases, float32
    assert memory.parameters == weights
    assert memory.optimizer_state == 2 * weights + 4 * 4  # exp_avg, exp_avg_sq; a float32 step per tensor
    assert memory.communication == weights  # DDP's default: flat buckets beside the gradients
    # The peak is the optimizer step: the gradients are all there, the activations are freed, and foreach
    # AdamW holds one temporary the size of the weights (the square root of exp_avg_sq) and the 4-byte
    # products of its step-size scalars... with the batch (2 x 100 x 1000 float32) still held.
    assert memory.phase == "optimizer" and memory.gradients == weights
    assert memory.activations >= weights + 2 * 100 * 1000 * 4
    assert memory.total == sum(memory.parts().values())


def test_memory_prediction_matches_the_cpu_allocator():
    torch.manual_seed(0)
    batch = {"x": torch.randn(100, 1000), "y": torch.randn(100, 1000)}
    predicted = run_fake_step(TwoLinear, batch, make_optimizer=adamw, clip_grad_norm=1.0).memory.total

    model = TwoLinear()
    optimizer = adamw(model)

    def step():
        model(**batch).loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step()  # the first step creates AdamW's state; the steady state is the second's
    batch_bytes = 2 * 100 * 1000 * 4
    measured = resident(model, optimizer) + batch_bytes + cpu_peak(step)
    assert abs(predicted - measured) <= 0.01 * measured


class Routed(nn.Module):
    """A mixture-of-experts step in the shape of transformers' Mixtral experts loop."""

    def __init__(self, experts=4):
        super().__init__()
        self.embed = nn.Embedding(32, 8)
        self.router = nn.Linear(8, experts)
        self.experts = nn.ModuleList(nn.Linear(8, 8) for _ in range(experts))

    def forward(self, ids):
        h = self.embed(ids).flatten(0, 1)
        _, chosen = torch.topk(self.router(h), 2, dim=-1)
        mask = F.one_hot(chosen, len(self.experts) + 1).permute(2, 1, 0)
        out = torch.zeros_like(h)
        for index in torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero():
            index = index[0]
            if index == len(self.experts):
                continue
            _, tokens = torch.where(mask[index])
            out = out.index_add(0, tokens, self.experts[index](h[tokens]))
        return SimpleNamespace(loss=out.square().mean())


def test_routing_runs_on_kept_values_and_differs_from_a_real_step_only_in_one_hot():
    batch = {"ids": torch.arange(24).reshape(2, 12) % 32}
    model = Routed()
    real = second_step(model, batch, adamw(model))
    fake = run_fake_step(Routed, batch, make_optimizer=adamw, clip_grad_norm=None, measure_memory=False)
    ops = fake.recording.ops
    # The router and every expert ran a linear layer (24 tokens, top-2 of 4: each expert is hit), as in the
    # real step.
    assert ops["aten::addmm"].count == real["aten::addmm"].count == 1 + 4
    # one_hot is composite and takes another path on a meta-backed (fake) tensor: arange == index, then a
    # cast, where the cpu checks the range (two .item() calls) and scatters into zeros. torch 2.13 checks it
    # with aminmax, torch 2.11 (a GPU host's, 2026-11-27) with min and max.
    range_check = {"aten::aminmax"} if torch.__version__ >= (2, 13) else {"aten::min", "aten::max"}
    assert set(ops) - set(real) == {"aten::arange", "aten::eq.Tensor", "aten::_to_copy"}
    assert set(real) - set(ops) == {*range_check, "aten::zeros", "aten::scatter_.value"}
    assert real["aten::_local_scalar_dense"].count - ops["aten::_local_scalar_dense"].count == 2


def test_topk_over_unknown_scores_spreads_evenly():
    fake_mode = FakeTensorMode()
    shadows = ShadowValues(fake_mode)
    with fake_mode, shadows:
        _, chosen = torch.topk(torch.randn(6, 4), 2, dim=-1)
        counts = torch.bincount(chosen.flatten(), minlength=4)
        hit = counts.nonzero()
        assert hit.shape == (4, 1)
        assert [int(count) for count in counts] == [3, 3, 3, 3]  # 6 rows x 2 picks over 4 columns
    assert shadows.shadows[chosen].tolist() == [[0, 1], [2, 3], [0, 1], [2, 3], [0, 1], [2, 3]]


def test_a_branch_on_activation_values_is_a_clear_error():
    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(4, 4)

        def forward(self, x):
            y = self.linear(x)
            return SimpleNamespace(loss=y.sum() if y.max() > 0 else -y.sum())

    with pytest.raises(DataDependentError, match="aten::_local_scalar_dense needs the value"):
        run_fake_step(Branchy, {"x": torch.ones(2, 4)}, make_optimizer=adamw)


class Wide(nn.Module):
    """Small weights, large activations: the peak is in the backward, before most gradients exist."""

    def __init__(self):
        super().__init__()
        self.first, self.second = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x, y):
        return SimpleNamespace(loss=F.mse_loss(self.second(torch.relu(self.first(x))), y))


@pytest.mark.parametrize("ddp", [False, True])
def test_accumulated_gradients_are_alive_in_the_last_micro_batchs_backward(ddp):
    batch = {"x": torch.ones(50_000, 8), "y": torch.ones(50_000, 8)}
    one, two = (run_fake_step(Wide, batch, make_optimizer=adamw, ddp=ddp, grad_accum=micro_batches).training
                for micro_batches in (1, 2))
    weights = 2 * (8 * 8 + 8) * 4
    # The second micro-batch's backward peaks where the first's did, with every gradient of the first alive
    # (and the loss divided by the number of micro-batches, as the trainer scales it: one float32 scalar).
    assert one.gradients == 0 and two.gradients == weights
    assert two.total == one.total + weights + 4
