import json
import os
import subprocess
import sys

import pytest
import torch

from portlayer import PortlayerError
from portlayer.train import data
from portlayer.train.presets import (
    PRESETS,
    build_config,
    build_model,
    example_batch,
    functional_dropout_off,
    get_preset,
    read_override_file,
    zero_dropout,
)
from tests.processes import HUNG_S


def test_every_contract_preset_exists_with_its_task():
    assert {name: PRESETS[name].task for name in PRESETS} == {
        "gpt2": "causal-lm",
        "gpt2-tiny": "causal-lm",
        "bert-base-uncased": "masked-lm",
        "bert-base-uncased-tiny": "masked-lm",
        "mixtral-8x7b": "causal-lm",
        "mixtral-8x7b-tiny": "causal-lm",
    }


def test_published_batch_sizes_and_one_layer_mixtral():
    assert [get_preset(n).per_device_batch for n in ("bert-base-uncased", "gpt2", "mixtral-8x7b")] == [
        56,
        16,
        1,
    ]
    config, _ = build_config(get_preset("mixtral-8x7b"))
    assert (config.num_hidden_layers, config.hidden_size, config.num_local_experts) == (1, 4096, 8)


def test_unknown_preset_is_one_line_listing_the_choices():
    with pytest.raises(PortlayerError) as error:
        get_preset("llama")
    assert "\n" not in str(error.value) and "gpt2-tiny" in str(error.value)


@pytest.mark.parametrize("name", ["gpt2", "bert-base-uncased", "mixtral-8x7b"])
def test_parity_zeroes_every_dropout_field_of_the_published_config(name):
    config, zeroed = build_config(get_preset(name), parity=True)
    assert zeroed, "each family has dropout-like fields"
    assert all(getattr(config, field) == 0 for field in zeroed)
    kept, none_zeroed = build_config(get_preset(name), parity=False)
    assert none_zeroed == []
    if name != "mixtral-8x7b":  # mixtral ships with dropout already 0
        assert any(getattr(kept, field) > 0 for field in zeroed)


def test_dropout_fields_are_found_by_name_in_any_family():
    from transformers import AutoConfig

    config = AutoConfig.for_model("t5", dropout_rate=0.1)
    assert "dropout_rate" in zero_dropout(config) and config.dropout_rate == 0.0


def test_functional_dropout_with_a_hard_coded_p_is_neutralised_and_restored():
    x = torch.ones(1000)
    with functional_dropout_off():
        assert torch.equal(torch.nn.functional.dropout(x, p=0.5, training=True), x)
        assert torch.equal(torch.nn.Dropout(0.5).train()(x), x)
    assert not torch.equal(torch.nn.functional.dropout(x, p=0.5, training=True), x)


def test_weights_are_a_function_of_the_seed():
    preset = get_preset("gpt2-tiny")
    a, b, c = (build_model(preset, seed=s).state_dict() for s in (0, 0, 1))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["transformer.wte.weight"], c["transformer.wte.weight"])
    assert all(t.device.type == "cpu" and t.dtype == torch.float32 for t in a.values())


def test_override_config_sets_fields_with_type_checks(tmp_path):
    path = tmp_path / "one-layer.json"
    path.write_text(json.dumps({"num_hidden_layers": 1, "rms_norm_eps": 1}))
    config, _ = build_config(get_preset("mixtral-8x7b-tiny"), config_overrides=read_override_file(path))
    assert (config.num_hidden_layers, config.rms_norm_eps) == (1, 1.0)
    assert isinstance(config.rms_norm_eps, float)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"num_layers_typo": 1}, "has no field 'num_layers_typo'"),
        ({"num_hidden_layers": "2"}, "num_hidden_layers must be int, got str"),
        ({"num_hidden_layers": 1.5}, "num_hidden_layers must be int, got float"),
        ({"tie_word_embeddings": 1}, "tie_word_embeddings must be bool"),
    ],
)
def test_bad_overrides_are_one_line_errors(overrides, message):
    with pytest.raises(PortlayerError, match=message) as error:
        build_config(get_preset("mixtral-8x7b-tiny"), config_overrides=overrides)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("content", ["[1, 2]", "{not json"])
def test_override_file_must_be_a_json_object(tmp_path, content):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(PortlayerError, match="--override-config"):
        read_override_file(path)


@pytest.mark.parametrize("name", ["gpt2-tiny", "bert-base-uncased-tiny", "mixtral-8x7b-tiny"])
def test_example_batch_is_real_deterministic_and_trainable(name):
    preset = get_preset(name)
    batch = example_batch(preset, batch_size=2, seq_len=32)
    again = example_batch(preset, batch_size=2, seq_len=32)
    assert all(torch.equal(batch[k], again[k]) for k in ("input_ids", "labels", "attention_mask"))
    assert batch["input_ids"].shape == (2, 32)
    loss = build_model(preset)(**batch).loss
    loss.backward()
    # Untrained over a 2,048-token vocabulary: about log(2048) = 7.6.
    assert 7.0 < loss.item() < 8.3


def test_masked_lm_masking_is_keyed_by_sample_not_by_batch():
    preset = get_preset("bert-base-uncased-tiny")
    blocks = data.load_blocks(preset.task, 32)
    order = data.Order(len(blocks.train), seed=0)
    whole = data.train_batch(blocks, order, 0, 4, seed=0)
    halves = [data.train_batch(blocks, order, first, 2, seed=0) for first in (0, 2)]
    assert torch.equal(whole["input_ids"], torch.cat([h["input_ids"] for h in halves]))
    masked = whole["labels"] != -100
    assert 0.05 < masked.float().mean() < 0.3
    assert (whole["input_ids"][masked] != blocks.train[order.blocks_at(torch.arange(4))][masked]).any()


def test_sample_order_is_a_permutation_per_epoch():
    order = data.Order(10, seed=3)
    first, second = order.blocks_at(torch.arange(10)), order.blocks_at(torch.arange(10, 20))
    assert sorted(first.tolist()) == sorted(second.tolist()) == list(range(10))
    assert not torch.equal(first, second)
    assert torch.equal(first, data.Order(10, seed=3).blocks_at(torch.arange(10)))


def test_user_data_loads_from_json_lines(tmp_path):
    lines = [{"text": f"document {i} says the quick brown fox jumps over the lazy dog"} for i in range(200)]
    (tmp_path / "mine.jsonl").write_text("\n".join(json.dumps(line) for line in lines))
    blocks = data.load_blocks("causal-lm", 16, tmp_path)
    assert blocks.train.shape[1] == 16 and len(blocks.eval) >= 1


@pytest.mark.parametrize(
    "files, message",
    [
        ({"a.csv": "x"}, "no .txt"),
        ({"a.txt": "x", "b.parquet": ""}, "mixes"),
        ({"a.json": '{"body": "x"}'}, "no 'text' column"),
    ],
)
def test_unusable_user_data_is_a_clear_error(tmp_path, files, message):
    for name, content in files.items():
        (tmp_path / name).write_text(content)
    with pytest.raises(PortlayerError, match=message):
        data.load_blocks("causal-lm", 16, tmp_path)


def test_model_name_or_path_loads_a_local_checkpoint(tmp_path):
    preset = get_preset("gpt2-tiny")
    trained = build_model(preset, seed=7)
    trained.save_pretrained(tmp_path)
    loaded = build_model(preset, seed=0, model_name_or_path=str(tmp_path))
    assert torch.equal(loaded.state_dict()["lm_head.weight"], trained.state_dict()["lm_head.weight"])
    assert loaded.config.resid_pdrop == 0.0  # parity mode zeroes a checkpoint's dropout too


def test_parity_mode_refuses_tf32_in_one_line():
    """bf16 and fp16 parity runs train (tests/trainer/test_bf16_parity.py); TF32 lowers the matmuls' precision
    behind the precision's back, so it is refused."""
    result = subprocess.run(
        [sys.executable, "-m", "portlayer.train", "--preset", "gpt2-tiny", "--steps", "1", "--parity", "--tf32"],
        capture_output=True,
        text=True,
        timeout=HUNG_S,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 1
    assert result.stderr.strip() == "portlayer: error: rank 0: parity mode trains without TF32: drop --tf32 or --parity"


def test_steps_past_the_schedule_are_refused_in_one_line():
    result = subprocess.run(
        [sys.executable, "-m", "portlayer.train", "--preset", "gpt2-tiny", "--steps", "12", "--schedule-steps", "10"],
        capture_output=True,
        text=True,
        timeout=HUNG_S,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 1
    assert result.stderr.strip() == "portlayer: error: rank 0: --steps 12 runs past the end of --schedule-steps 10"
