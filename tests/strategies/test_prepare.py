"""`portlayer.strategies.prepare`: which engine a strategy gets, and the refusals that need no ranks."""

import re

import pytest
import torch

from portlayer.errors import PortlayerError
from portlayer.strategies import fsdp2, get_strategy, prepare
from portlayer.strategies.fsdp2 import blocks
from portlayer.strategies.layout import Layout
from portlayer.strategies.parallel import Parallel, Setup
from portlayer.train.presets import build_model, get_preset
from tests.trainer.helpers import needs_cpu_fsdp2


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
    given = "".join(["fp", "16"])  # built at run time, as the command line's is: not the literal compared with
    with pytest.raises(PortlayerError, match=r"^--strategy zero2 trains in fp32 or bf16, not fp16"):
        prepare(get_strategy("zero2"), torch.nn.Linear(2, 1), setup(group=object(), precision=given))


def test_fsdp2_on_the_cpu_of_a_torch_without_stream_events_is_refused_in_one_line(monkeypatch):
    # torch 2.6's cpu streams have no record_event, which fully_shard calls before its first all-gather.
    monkeypatch.delattr(torch.cpu.Stream, "record_event", raising=False)
    with pytest.raises(PortlayerError, match=r"^fsdp2 on the cpu: fully_shard records stream events, which torch \S+'s cpu streams lack"):
        prepare(get_strategy("fsdp2"), torch.nn.Linear(2, 1), setup(group=object()))


def test_fsdp2_on_the_cpu_where_gloo_sums_instead_of_averaging_is_refused_in_one_line(monkeypatch):
    # torch 2.7 and 2.8's gloo answers fully_shard's ReduceOp.AVG with a sum: the gradients would be 2x on 2 ranks.
    monkeypatch.setattr(fsdp2, "_average_of_ones", lambda group: 2.0)
    # The cpu's streams with events, as from 2.7 (on 2.6 their absence is refused first: the test above).
    monkeypatch.setattr(torch.cpu.Stream, "record_event", lambda self, event=None: event, raising=False)
    with pytest.raises(PortlayerError, match=r"^fsdp2 on the cpu: torch \S+'s gloo sums where fully_shard asks for the"
                       r" average, so every gradient would be 2 times too large"):
        prepare(get_strategy("fsdp2"), torch.nn.Linear(2, 1), setup(group=object()))


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


def test_an_unknown_strategy_is_refused_with_the_names_there_are():
    with pytest.raises(PortlayerError) as refused:
        get_strategy("zero4")
    assert str(refused.value) == "unknown strategy 'zero4': choose one of ddp, fsdp2, zero1, zero2, zero3"


@pytest.mark.parametrize(
    ("name", "engine", "sharded", "zero_stage"),
    [
        ("ddp", "ddp", (False, False, False), None),
        # ZeRO's stages shard optimizer state (1), then gradients too (2), then parameters too (3).
        ("zero1", "deepspeed", (True, False, False), 1),
        ("zero2", "deepspeed", (True, True, False), 2),
        ("zero3", "deepspeed", (True, True, True), 3),
        ("fsdp2", "fsdp2", (True, True, True), None),  # fully_shard shards all three, as ZeRO-3 does
    ],
)
def test_what_each_strategy_shards_and_what_applies_it(name, engine, sharded, zero_stage):
    strategy = get_strategy(name)
    assert strategy.name == name and strategy.engine == engine and strategy.zero_stage == zero_stage
    assert (strategy.shards_optimizer_state, strategy.shards_gradients, strategy.shards_parameters) == sharded


@pytest.mark.parametrize(("name", "engine_module", "engine_class"), [
    ("fsdp2", "portlayer.strategies.fsdp2", "Fsdp2Parallel"),
    ("zero2", "portlayer.strategies.zero", "ZeroParallel"),
])  # fmt: skip
def test_a_sharded_strategy_in_a_process_group_is_prepared_by_its_engine(monkeypatch, name, engine_module,
                                                                        engine_class):
    # The engines need ranks to start; which one `prepare` hands the model to is what is checked here.
    import importlib

    engine = getattr(importlib.import_module(engine_module), engine_class)
    monkeypatch.setattr(engine, "prepare", classmethod(lambda cls, strategy, core, setup: (cls, strategy, core)))
    model, strategy = torch.nn.Linear(2, 1), get_strategy(name)
    for precision in ("fp32", "bf16"):
        assert prepare(strategy, model, setup(group=object(), precision=precision)) == (engine, strategy, model)


def test_ddp_in_a_process_group_names_ddp_and_reduces_on_the_last_micro_batch_only():
    class Wrapped:
        def no_sync(self):
            return "no_sync"

    parallel = Parallel(Wrapped(), torch.nn.Linear(2, 1), None, None, setup(group=object()))
    assert parallel.engine == "torch DistributedDataParallel"
    assert parallel.accumulating(last=False) == "no_sync"
    assert parallel.accumulating(last=True) is not None and parallel.accumulating(last=True) != "no_sync"
    # One process: nothing to reduce, no micro-batch skips it.
    one = Parallel(Wrapped(), torch.nn.Linear(2, 1), None, None, setup())
    assert one.accumulating(last=False) != "no_sync"


@pytest.mark.parametrize(("precision", "scaled"), [("fp32", False), ("bf16", False), ("fp16", True)])
def test_only_fp16_scales_the_loss(precision, scaled):
    # bf16 has fp32's range: no gradient underflows that a loss scale would have to lift. The precision is built
    # at run time, as the command line's is: another object than the literal the code compares it with.
    given = "".join(list(precision))
    assert Parallel(None, torch.nn.Linear(2, 1), None, None, setup(precision=given)).scaler.is_enabled() == scaled


def ddp_in_one_process(seed: int) -> Parallel:
    torch.manual_seed(seed)
    return prepare(get_strategy("ddp"), torch.nn.Linear(2, 1), setup())


def test_a_ddp_checkpoint_is_written_by_rank_0_only_and_restores_model_optimizer_and_schedule(tmp_path):
    from portlayer.strategies.parallel import STATE_FILE

    saved = ddp_in_one_process(0)
    saved.backward(saved.model(torch.ones(1, 2)).sum())
    saved.step()
    saved.save(tmp_path, rank=1)
    assert not (tmp_path / STATE_FILE).exists()
    saved.save(tmp_path, rank=0)
    restored = ddp_in_one_process(1)
    restored.load(tmp_path)
    assert torch.equal(restored.core.weight, saved.core.weight)
    assert restored.optimizer.state_dict() == saved.optimizer.state_dict()
    assert restored.scheduler.state_dict() == saved.scheduler.state_dict()


def test_loading_a_ddp_checkpoint_from_a_folder_without_one_names_the_folder(tmp_path):
    with pytest.raises(PortlayerError, match=r"^.*: no model-optimizer.pt; was it saved under another strategy or layout\?$"):
        ddp_in_one_process(0).load(tmp_path)


def test_fsdp2_skips_the_gradient_sync_on_all_but_the_last_micro_batch():
    from portlayer.strategies.fsdp2 import Fsdp2Parallel

    class Sharded(torch.nn.Linear):
        syncs: list

        def set_requires_gradient_sync(self, sync):
            self.syncs.append(sync)

    core = Sharded(2, 1)
    core.syncs = []
    parallel = Fsdp2Parallel(core, core, None, None, setup(group=object()))
    assert parallel.engine == "torch fully_shard"
    with parallel.accumulating(last=True):
        assert core.syncs == []
    with parallel.accumulating(last=False):
        assert core.syncs == [False]
    assert core.syncs == [False, True]  # on again for the next step's last micro-batch


def test_zero_buckets_are_deepspeeds_default_or_the_whole_model_when_smaller():
    from portlayer.strategies.zero import bucket_elements, deepspeed_config

    assert bucket_elements(1000) == 1000
    assert bucket_elements(1001) == 1002  # ZeRO-1/2 refuse a bucket that is not a multiple of 2
    assert bucket_elements(10**10) == 500_000_000
    config = deepspeed_config(get_strategy("zero2"), setup(micro_batch=4, grad_accum=2, max_grad_norm=1.0), 1000)
    assert config["train_micro_batch_size_per_gpu"] == 4 and config["gradient_accumulation_steps"] == 2
    assert config["gradient_clipping"] == 1.0
    assert config["zero_optimization"] == {"stage": 2, "reduce_bucket_size": 1000, "allgather_bucket_size": 1000}
    assert config["zero_allow_untested_optimizer"] is True
    assert config["steps_per_print"] > 10**9  # never within a run: the trainer reports its own throughput


def test_the_zero_engine_reduces_and_steps_itself_in_backward(tmp_path):
    from portlayer.strategies.zero import CHECKPOINT_TAG, ZeroParallel

    class Engine:
        def __init__(self):
            self.calls = []

        def backward(self, loss):
            self.calls.append(("backward", loss))

        def step(self):
            self.calls.append(("step",))

        def get_global_grad_norm(self):
            return 0.5

        def save_checkpoint(self, folder, tag, save_latest):
            self.calls.append(("save", folder, tag, save_latest))

        def load_checkpoint(self, folder, tag, load_optimizer_states, load_lr_scheduler_states):
            self.calls.append(("load", folder, tag, load_optimizer_states, load_lr_scheduler_states))
            return (None, None) if folder.endswith("broken") else (folder, {})

    engine = Engine()
    parallel = ZeroParallel(engine, torch.nn.Linear(2, 1), None, None, setup(group=object()))
    assert parallel.accumulating(last=False) is not None
    parallel.backward("loss")
    # nothing left to do but read the norm the engine computed before clipping in its step
    assert parallel.step() == 0.5
    assert engine.calls == [("backward", "loss"), ("step",)]
    parallel.save(tmp_path, rank=1)
    assert engine.calls[-1] == ("save", str(tmp_path), CHECKPOINT_TAG, False)
    with pytest.raises(PortlayerError, match="no DeepSpeed checkpoint; was it saved under another strategy"):
        parallel.load(tmp_path)
    (tmp_path / CHECKPOINT_TAG).mkdir()
    parallel.load(tmp_path)
    assert engine.calls[-1] == ("load", str(tmp_path), CHECKPOINT_TAG, True, True)
    (tmp_path / "broken" / CHECKPOINT_TAG).mkdir(parents=True)
    with pytest.raises(PortlayerError, match="DeepSpeed could not load its checkpoint"):
        parallel.load(tmp_path / "broken")


@pytest.mark.parametrize(("vendor", "lacks_one"), [(None, False), ("musa", True), ("npu", False), ("cpu", False)])
def test_deepspeed_lacks_an_accelerator_for_musa_only(vendor, lacks_one):
    from portlayer.strategies.deepspeed_devices import lacks

    assert lacks(vendor) == lacks_one


@pytest.fixture
def one_rank_group():
    """A gloo process group of this process alone: fully_shard needs one, no second process does."""
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


@needs_cpu_fsdp2
def test_fsdp2_shards_each_block_then_the_whole_model_and_gathers_the_full_state(one_rank_group):
    from torch.distributed.fsdp import FSDPModule

    class Block(torch.nn.Linear):
        pass

    class Model(torch.nn.Sequential):
        _no_split_modules = ["Block"]

    model = Model(Block(2, 2), torch.nn.ReLU(), Block(2, 1))
    parallel = prepare(get_strategy("fsdp2"), model, setup(group=one_rank_group))
    assert parallel.model is model and parallel.core is model
    assert [isinstance(module, FSDPModule) for module in (model, model[0], model[1], model[2])] == [
        True, True, False, True,
    ]
    parallel.backward(parallel.model(torch.ones(1, 2)).sum())
    parallel.step()
    state = parallel.full_state()
    assert list(state["model"]) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert all(type(tensor) is torch.Tensor for tensor in state["model"].values())  # whole, not sharded
    assert set(state["optimizer"]) == {"state", "param_groups"}


@pytest.mark.deepspeed
def test_zero_in_a_process_group_is_deepspeeds_engine_at_the_strategys_stage(one_rank_group, monkeypatch):
    # The variables DeepSpeed's engine reads from its launcher; its cpu accelerator, portlayer's cpu backend's.
    for name, value in {"LOCAL_RANK": "0", "RANK": "0", "WORLD_SIZE": "1", "DS_ACCELERATOR": "cpu"}.items():
        monkeypatch.setenv(name, value)
    model = torch.nn.Linear(2, 1)  # 3 elements: the buckets are rounded up to ZeRO's alignment, 2
    adamw = lambda parameters: torch.optim.AdamW(parameters, lr=0.1)  # noqa: E731
    parallel = prepare(get_strategy("zero1"), model, setup(group=one_rank_group, make_optimizer=adamw))
    import deepspeed.ops

    assert type(parallel).__name__ == "ZeroParallel" and parallel.core is model
    assert parallel.engine.startswith("DeepSpeed ") and parallel.engine.endswith(" ZeRO-1 on CPU_Accelerator (gloo)")
    # The shared-memory all-reduce (inference only) is marked as not buildable: the cpu accelerator would compile
    # it when communication starts.
    assert deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] is False
    before = model.weight.detach().clone()
    parallel.backward(parallel.model(torch.ones(1, 2)).sum())
    assert torch.equal(model.weight.detach(), before)  # the first of grad_accum 2 micro-batches: no step yet
    parallel.backward(parallel.model(torch.ones(1, 2)).sum())
    parallel.step()
    assert not torch.equal(model.weight.detach(), before)  # the engine stepped at the last micro-batch


@pytest.mark.parametrize(
    ("overrides", "refusal"),
    [
        ({"output_router_logits": True}, "pipeline parallel takes the loss from the last stage's logits, without the "
                                         "router's auxiliary loss: set output_router_logits false"),
        ({"num_hidden_layers": 3}, "the model's 3 layers do not split over --pp 2"),
    ],
)
def test_a_model_a_pipeline_cannot_cut_is_refused_by_the_ranks_before_any_collective(overrides, refusal):
    model = build_model(get_preset("mixtral-8x7b-tiny"), config_overrides=overrides)
    pipeline = setup(group=object(), pipeline_group=object(), layout=Layout(pipeline=2), grad_accum=2)
    with pytest.raises(PortlayerError, match=f"^{re.escape(refusal)}"):
        prepare(get_strategy("ddp"), model, pipeline)
