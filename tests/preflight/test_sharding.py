"""Model states per rank against the ZeRO paper's closed form, and the scaled step against a whole one.

Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models" (SC 2020),
section 3.1 and figure 1: mixed-precision Adam holds 2Ψ + 2Ψ + KΨ bytes, K = 12, for Ψ parameters; with
N ranks, P_os holds 4Ψ + 12Ψ/N, P_os+g 2Ψ + 14Ψ/N, P_os+g+p 16Ψ/N. Figure 1's example: Ψ = 7.5B, N = 64
gives 120 GB, 31.4 GB, 16.6 GB and 1.9 GB.
"""

import json

import pytest

from portlayer.preflight import per_rank, sharding
from portlayer.preflight.model_source import Training, from_config_file
from portlayer.strategies import get_strategy

PSI, N = 7_500_000_000, 64


def count(total, trainable=None):
    trainable = total if trainable is None else trainable
    return sharding.ParameterCount(total, trainable, largest_layer=0)


@pytest.mark.parametrize(("strategy", "closed_form", "figure_1_gb"), [
    ("ddp", 2 * PSI + 2 * PSI + 12 * PSI, 120),
    ("zero1", 2 * PSI + 2 * PSI + 12 * PSI / N, 31.4),
    ("zero2", 2 * PSI + (2 * PSI + 12 * PSI) / N, 16.6),
    ("zero3", (2 * PSI + 2 * PSI + 12 * PSI) / N, 1.9),
])  # fmt: skip
def test_model_states_are_the_zero_papers_closed_form(strategy, closed_form, figure_1_gb):
    states = sharding.model_states(count(PSI), get_strategy(strategy), N, "bf16")
    assert states.total == pytest.approx(closed_form, abs=3)  # each shard rounds up to a whole byte
    assert round(states.total / 1e9, 1) == pytest.approx(figure_1_gb, abs=0.05)


def test_each_state_is_split_by_the_stage_that_shards_it():
    by_stage = {name: sharding.model_states(count(PSI), get_strategy(name), N, "bf16")
                for name in ("ddp", "zero1", "zero2", "zero3", "fsdp2")}
    assert by_stage["zero1"].parameters == by_stage["zero2"].parameters == 2 * PSI
    assert by_stage["zero1"].gradients == 2 * PSI and by_stage["zero2"].gradients == 2 * PSI // N
    assert by_stage["zero1"].optimizer_state == 12 * PSI // N
    assert by_stage["zero3"] == by_stage["fsdp2"]  # both shard all three
    # fp32: no master copy, 4Ψ + 4Ψ + 8Ψ.
    assert sharding.model_states(count(PSI), get_strategy("ddp"), 1, "fp32").total == 16 * PSI


def test_a_frozen_base_costs_its_weights_only_sharded_where_weights_are():
    lora = count(PSI, trainable=1_000_000)
    ddp = sharding.model_states(lora, get_strategy("ddp"), 4, "bf16")
    zero3 = sharding.model_states(lora, get_strategy("zero3"), 4, "bf16")
    assert (ddp.parameters, ddp.gradients, ddp.optimizer_state) == (2 * PSI, 2_000_000, 12_000_000)
    assert (zero3.parameters, zero3.gradients, zero3.optimizer_state) == (PSI // 2, 500_000, 3_000_000)


TINY_LLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 160,
    "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 4, "vocab_size": 512,
    "max_position_embeddings": 256, "tie_word_embeddings": False,
}  # fmt: skip


@pytest.mark.parametrize("training", [
    Training(precision="fp32"),
    Training(precision="bf16", strategy="zero3", nproc=2, lora_r=4, gradient_checkpointing=True, weights="bf16"),
    Training(precision="fp32", strategy="zero2", nproc=2),  # DeepSpeed's bucket played
    Training(precision="bf16", strategy="fsdp2", nproc=2, gradient_checkpointing=True),  # FSDP2's gathers played
])  # fmt: skip
def test_the_step_scaled_from_one_and_two_layers_is_the_whole_step(tmp_path, training):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY_LLAMA))
    source = from_config_file(path, batch_size=2, seq_len=32, overrides={})
    engine = per_rank.played_engine(per_rank.count_parameters(source, training), training)
    first = engine.steady_from_layers if engine is not None else 1
    one, two, whole = (per_rank.fake_step(source, training, layers, engine=engine) for layers in (first, first + 1, 4))
    for phase in ("training", "optimizing"):
        if getattr(whole, phase) is None:  # the optimizer step peaks below the backward's end
            assert getattr(one, phase) is getattr(two, phase) is None
            continue
        for field in ("activations", "gradients", "buffers", "communication"):
            scaled = per_rank._scaled([getattr(getattr(one, phase), field), getattr(getattr(two, phase), field)],
                                     [first, first + 1], 4)
            assert scaled == pytest.approx(getattr(getattr(whole, phase), field), rel=0.01), (phase, field)
    # The parameters are counted whole on the meta device: exact, whatever the scaling.
    prediction = per_rank.predict(source, training)
    assert prediction.layers_run == first + 1
    assert prediction.count.total * sharding.WEIGHT_BYTES[training.weights] == whole.training.parameters
