"""A preset name is the same model in `portlayer preflight` and in the trainer (`parity run`,
`python -m portlayer.train`), in parity mode and out of it: the same class, config, attention and parameters.
`NAME-published` is the preset at its published size, where the trainer cuts it."""

import pytest
from torch._subclasses.fake_tensor import FakeTensorMode

from portlayer import PortlayerError
from portlayer.preflight.model_source import Training, from_preset, get_preset, preset_names
from portlayer.train import presets


def described(model) -> tuple:
    config = model.config.to_dict()
    return (type(model).__name__, config, model.config._attn_implementation,
            [(name, tuple(p.shape), p.dtype) for name, p in model.named_parameters()])


@pytest.mark.parametrize("parity", [True, False])
@pytest.mark.parametrize("name", list(presets.PRESETS))
def test_preflight_builds_the_trainers_model(name, parity):
    source = from_preset(name, batch_size=None, seq_len=None, overrides={})
    with FakeTensorMode():  # full-size models, nothing allocated
        trainers = presets.build_model(presets.get_preset(name), parity=parity)
        preflights = source.build(Training(parity=parity))
    assert described(preflights) == described(trainers)


def test_the_trainers_mixtral_is_one_layer_and_the_published_one_all_32():
    assert "mixtral-8x7b-published" in preset_names()
    assert from_preset("mixtral-8x7b", batch_size=None, seq_len=None, overrides={}).layers == 1
    published = from_preset("mixtral-8x7b-published", batch_size=None, seq_len=None, overrides={})
    assert published.layers == 32
    # The published config is the file the trainer's preset starts from, with nothing set over it.
    config = published.config.to_dict()
    assert all(config[field] == value for field, value in presets.base_config_dict(get_preset("mixtral-8x7b"))
               .items() if field in config and field not in ("model_type", "transformers_version"))


def test_only_a_preset_the_trainer_cuts_has_a_published_name():
    assert [name for name in preset_names() if name.endswith("-published")] == ["mixtral-8x7b-published"]
    with pytest.raises(PortlayerError, match="unknown preset 'gpt2-published'"):
        get_preset("gpt2-published")
