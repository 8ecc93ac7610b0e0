"""How a run's ranks split the model and the data (`Layout`), as Megatron places them: tensor-parallel ranks vary
fastest, then the copies, then the pipeline stages. Arithmetic only: the launcher checks a layout before any rank
starts, so every refusal is one line."""

import re

import pytest
from transformers import BertConfig, GPT2Config, MixtralConfig

from portlayer.errors import PortlayerError
from portlayer.strategies.layout import Coordinates, Groups, Layout


def test_consecutive_ranks_split_a_copy_and_the_copies_train_on_different_data():
    assert Layout(2).groups(4) == Groups(tensor=[[0, 1], [2, 3]], data=[[0, 2], [1, 3]], pipeline=[[0], [1], [2], [3]])
    assert Layout(4).groups(4) == Groups(tensor=[[0, 1, 2, 3]], data=[[0], [1], [2], [3]], pipeline=[[0], [1], [2], [3]])
    assert Layout().data_parallel(3) == 3


def test_the_stages_of_a_copy_are_the_slowest_to_vary():
    assert Layout(pipeline=2).groups(4) == Groups(
        tensor=[[0], [1], [2], [3]], data=[[0, 1], [2, 3]], pipeline=[[0, 2], [1, 3]]
    )
    three_d = Layout(tensor=2, pipeline=2).groups(8)
    assert three_d.tensor == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert three_d.data == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert three_d.pipeline == [[0, 4], [1, 5], [2, 6], [3, 7]]


@pytest.mark.parametrize("layout", [Layout(2), Layout(pipeline=2), Layout(2, 2), Layout(4), Layout(1, 4)])
def test_every_rank_is_in_one_group_of_each_kind_and_its_coordinates_say_which(layout):
    groups = layout.groups(8)
    for kind in ("tensor", "data", "pipeline"):
        assert sorted(rank for group in getattr(groups, kind) for rank in group) == list(range(8)), kind
    for rank in range(8):
        where = layout.coordinates(rank, 8)
        assert groups.tensor[where.stage * layout.data_parallel(8) + where.copy][where.split] == rank
        assert groups.pipeline[where.copy * layout.tensor + where.split][where.stage] == rank


def test_a_rank_of_the_second_stage_of_a_three_d_layout():
    # 8 ranks, --tp 2 --pp 2: 2 copies. Rank 5 = (stage 1 x 2 copies + copy 0) x 2 + split 1.
    assert Layout(2, 2).coordinates(5, 8) == Coordinates(split=1, copy=0, stage=1)
    assert Layout(2, 2).coordinates(2, 8) == Coordinates(split=0, copy=1, stage=0)


@pytest.mark.parametrize(
    ("layout", "world", "refusal"),
    [
        (Layout(2), 3, "world size 3 is no multiple of --tp 2: the ranks form groups of it"),
        (Layout(pipeline=2), 3, "world size 3 is no multiple of --pp 2: the ranks form groups of it"),
        (Layout(2, 2), 6, "world size 6 is no multiple of --tp 2 x --pp 2 = 4: the ranks form groups of it"),
    ],
)
def test_a_world_the_groups_do_not_fill_is_refused(layout, world, refusal):
    with pytest.raises(PortlayerError, match=f"^{re.escape(refusal)}$"):
        layout.data_parallel(world)


@pytest.mark.parametrize(
    ("layout", "strategy", "compile", "accum", "refusal"),
    [
        (Layout(1, 1, True), "ddp", False, 1, "--sp splits the sequence over the --tp ranks: give --tp 2 or more"),
        (Layout(2), "fsdp2", False, 1, "--tp 2 composes with --strategy ddp, not yet with fsdp2"),
        (Layout(2, sequence=True), "zero3", False, 1, "--tp 2 --sp composes with --strategy ddp, not yet with zero3"),
        (Layout(pipeline=2), "zero1", False, 4, "--pp 2 composes with --strategy ddp, not yet with zero1"),
        (Layout(pipeline=2), "ddp", True, 4, "--pp 2 trains eager"),
        (Layout(pipeline=4), "ddp", False, 3, "a 1F1B pipeline of 4 stages needs at least 4 micro-batches: give "
                                              "--grad-accum 4 or more, or --pp-schedule gpipe"),
        (Layout(pipeline=2, schedule="zb"), "ddp", False, 2, "unknown pipeline schedule 'zb': choose 1f1b or gpipe"),
    ],
)
def test_what_does_not_compose_with_the_split_is_refused(layout, strategy, compile, accum, refusal):
    with pytest.raises(PortlayerError, match=f"^{re.escape(refusal)}"):
        layout.check_training(strategy, compile, accum)


def test_gpipe_takes_fewer_micro_batches_than_stages_and_plain_data_parallel_takes_anything():
    Layout(pipeline=4, schedule="gpipe").check_training("ddp", False, 1)
    Layout().check_training("zero3", True, 1)


@pytest.mark.parametrize(
    ("layout", "config", "refusal"),
    [
        (Layout(3), BertConfig(num_attention_heads=4), "the model's 4 attention heads do not split over --tp 3"),
        (Layout(4), MixtralConfig(num_attention_heads=8, num_key_value_heads=2),
         "the model's 2 key-value heads do not split over --tp 4"),
        (Layout(pipeline=2), GPT2Config(n_layer=3), "the model's 3 layers do not split over --pp 2: choose a --pp "
                                                    "that divides 3"),
    ],
)
def test_a_model_that_does_not_split_whole_is_refused(layout, config, refusal):
    with pytest.raises(PortlayerError, match=f"^{re.escape(refusal)}"):
        layout.check_model(config)
    Layout(2, 2).check_model(BertConfig(num_attention_heads=4, num_hidden_layers=2))


def test_sequence_parallel_needs_a_sequence_that_splits_whole():
    with pytest.raises(PortlayerError, match=r"^--seq-len 30 does not split over --tp 4 \(--sp\)"):
        Layout(4, sequence=True).check_sequence(30)
    Layout(4, sequence=True).check_sequence(32)
    Layout(4).check_sequence(30)  # without --sp the sequence stays whole


def test_a_layout_describes_itself_as_its_options():
    assert Layout(2, 2, True, "gpipe").describe() == "--tp 2 --sp --pp 2 (gpipe)"
    assert Layout().describe() == ""
