"""`portlayer.strategies.prepare`: which engine a strategy gets, and the refusals that need no ranks."""

import pytest
import torch

from portlayer.errors import PortlayerError
from portlayer.strategies import get_strategy, prepare
from portlayer.strategies.fsdp2 import blocks
from portlayer.strategies.parallel import Parallel, Setup


def setup(**changes) -> Setup:
    fields = dict(
        group=None,
        device=torch.device("cpu"),
        make_optimizer=lambda parameters: torch.optim.SGD(parameters, lr=0.1),
        make_scheduler=lambda optimizer: torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0),
        micro_batch=4,
        grad_accum=2,
        max_grad_norm=1.0,
    )
    return Setup(**{**fields, **changes})


@pytest.mark.parametrize("name", ["fsdp2", "zero1", "zero2", "zero3"])
def test_a_sharded_strategy_in_one_process_is_refused_in_one_line(name):
    with pytest.raises(PortlayerError) as refused:
        prepare(get_strategy(name), torch.nn.Linear(2, 1), setup())
    assert str(refused.value) == (
        f"--strategy {name} shards across ranks: launch with torchrun or the deepspeed launcher"
    )


def test_fp16_under_a_sharded_strategy_is_refused_before_any_engine_starts():
    with pytest.raises(PortlayerError, match=r"^--strategy zero2 trains in fp32 or bf16, not fp16"):
        prepare(get_strategy("zero2"), torch.nn.Linear(2, 1), setup(group=object(), precision="fp16"))


def test_ddp_in_one_process_trains_the_bare_model_with_accumulation():
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1, bias=False)
    parallel = prepare(get_strategy("ddp"), model, setup())
    assert type(parallel) is Parallel and parallel.model is model and parallel.engine == "torch (one process)"
    before = model.weight.detach().clone()
    inputs = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    for last, row in ((False, inputs[:1]), (True, inputs[1:])):
        with parallel.accumulating(last):
            parallel.backward(model(row).sum())
    parallel.step()
    # Each micro-batch's loss counts 1/2 (grad_accum 2): the gradient is [0.5, 0.5], within the clip norm.
    assert torch.allclose(model.weight.detach(), before - 0.1 * torch.tensor([[0.5, 0.5]]))
    assert model.weight.grad is None  # zeroed for the next step


def test_fsdp2_shards_each_huggingface_block_the_model_names():
    class Block(torch.nn.Linear):
        pass

    class Model(torch.nn.Sequential):
        _no_split_modules = ["Block"]

    model = Model(Block(2, 2), torch.nn.ReLU(), Block(2, 2), torch.nn.Linear(2, 1))
    assert blocks(model) == [model[0], model[2]]
    assert blocks(torch.nn.Sequential(torch.nn.Linear(2, 2))) == []


def test_fsdp2_leaves_a_block_with_a_tied_parameter_to_the_whole_models_unit():
    """BERT's word embeddings are tied to its masked-LM head, outside the embeddings block."""

    class Embeddings(torch.nn.Embedding):
        pass

    class Block(torch.nn.Linear):
        pass

    class Model(torch.nn.Module):
        _no_split_modules = ["Embeddings", "Block"]

        def __init__(self):
            super().__init__()
            self.embeddings, self.block, self.head = Embeddings(8, 2), Block(2, 2), torch.nn.Linear(2, 8)
            self.head.weight = self.embeddings.weight

    model = Model()
    assert blocks(model) == [model.block]
