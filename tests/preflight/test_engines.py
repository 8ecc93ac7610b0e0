"""The engines' buffers played on the fake step (portlayer/preflight/engines.py), on a decoder small enough to
reason about: an embedding, three blocks and a head, with batch and vocabulary so small that the blocks'
weights, and so the engines' buffers, decide where the peak falls. tests/stand_in/test_strategy_memory.py
checks the same plays against a device's allocator."""

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from portlayer.preflight.engines import BUFFERS, FsdpGathers, Ledger, ZeroGradients
from portlayer.preflight.fake_step import run_fake_step

HIDDEN, VOCAB, TOKENS = 512, 16, 16
WEIGHT = HIDDEN * HIDDEN * 4  # bytes of one block's weight (float32)
BLOCK = WEIGHT + HIDDEN * 4  # and its bias
ROOT = 2 * VOCAB * HIDDEN * 4  # the embedding and the head
HEAD = VOCAB * HIDDEN * 4
PARAMETERS = (3 * BLOCK + ROOT) // 4


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.blocks = nn.ModuleList(nn.Linear(HIDDEN, HIDDEN) for _ in range(3))
        self.head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, ids, labels):
        hidden = self.embed(ids)
        for block in self.blocks:
            hidden = torch.relu(block(hidden))
        return SimpleNamespace(loss=F.cross_entropy(self.head(hidden), labels))


def training_peak(engine=None):
    batch = {"ids": torch.zeros(TOKENS, dtype=torch.long), "labels": torch.zeros(TOKENS, dtype=torch.long)}
    adamw = lambda model: torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)  # noqa: E731
    return run_fake_step(Decoder, batch, make_optimizer=adamw, engine=engine).training


def blocks(model):
    return list(model.blocks)


def test_zero1_holds_its_bucket_beside_the_gradients_from_the_first_gradient_on():
    plain, zero1 = training_peak(), training_peak(ZeroGradients(PARAMETERS, False, world_size=2))
    assert zero1.communication == PARAMETERS * 4  # the bucket, there at the peak
    assert (zero1.gradients, zero1.activations) == (plain.gradients, plain.activations)


def test_zero2_moves_each_gradient_into_its_bucket():
    zero1 = training_peak(ZeroGradients(PARAMETERS, False, world_size=2))
    zero2 = training_peak(ZeroGradients(PARAMETERS, True, world_size=2))
    assert zero2.communication == PARAMETERS * 4
    assert zero2.gradients <= BLOCK  # at most the one being copied in
    assert zero2.total < zero1.total


def test_a_full_bucket_is_reduced_into_the_ranks_partition_and_an_oversized_gradient_waits_for_it():
    # A bucket the size of the head's gradient: each block's weight gradient is larger, and stays where it is
    # until the next gradient reduces it; the rank's partition is half the gradients, from the first
    # reduction on.
    zero2 = training_peak(ZeroGradients(HEAD // 4, True, world_size=2))
    assert zero2.communication == HEAD
    assert zero2.gradients == -(-PARAMETERS // 2) * 4 + WEIGHT


def test_fsdp2_gathers_a_block_and_prefetches_the_one_before_it_and_keeps_a_shard_of_each_gradient():
    fsdp2 = training_peak(FsdpGathers(blocks, world_size=2))
    # The peak: the last block's backward done, the middle one's starting. The root and two blocks gathered;
    # the head's gradient whole (the root reduces at the end), the last block's cut to its half.
    assert fsdp2.communication == ROOT + 2 * BLOCK
    assert fsdp2.gradients == HEAD + BLOCK // 2


@pytest.mark.parametrize("engine", [ZeroGradients(PARAMETERS, True, world_size=2), FsdpGathers(blocks, world_size=2)],
                         ids=["zero2", "fsdp2"])
def test_every_buffer_is_released_by_the_optimizer_step_and_every_gradient_is_whole_again(engine):
    model, ledger = Decoder(), Ledger()
    batch = (torch.zeros(TOKENS, dtype=torch.long), torch.zeros(TOKENS, dtype=torch.long))
    with engine.playing(model, ledger):
        model(*batch).loss.backward()
    assert ledger.now[BUFFERS] == 0
    assert all(p.grad is not None and p.grad.shape == p.shape for p in model.parameters())
