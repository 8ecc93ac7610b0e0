"""Megatron-LM's tensor-parallel RNG tracker, in a program of its shape (rng/tracker.py), ported with
`--target neutral`, runs where there is no CUDA: the device's random state is the cpu's there, and each named
state is forked into, advanced and restored exactly as torch's own generator would be.

The original cannot run on this host (torch.cuda.get_rng_state starts CUDA); the port must, and its draws are
held to plain torch: a fork draws from its state's seed and continues where the last fork left it, the default
stream outside never sees a fork, a saved state restored draws the same numbers again."""

from pathlib import Path

import pytest
import torch

from portlayer.migrate.engine import migrate_source

pytestmark = pytest.mark.usefixtures("cpu_backend")

PROGRAM = Path(__file__).with_name("rng") / "tracker.py"
SEED = 7


@pytest.fixture(scope="module")
def migrated() -> str:
    result = migrate_source(PROGRAM.read_text(encoding="utf-8"), "neutral")
    assert result.diagnostics == ()
    assert migrate_source(result.code, "neutral").changes == ()
    return result.code


@pytest.fixture(scope="module")
def observed(migrated) -> dict:
    namespace = {"__name__": "migrated_tracker"}
    exec(compile(migrated, str(PROGRAM), "exec"), namespace)
    with torch.random.fork_rng(devices=[]):
        return namespace["main"](SEED)


def seeded(seed: int, *work):
    """What torch's own generator, seeded with `seed`, gives for each piece of `work` in turn."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return [piece() for piece in work]


def uniform():
    return torch.rand(3).tolist()


def dropout_mask():
    return torch.nn.functional.dropout(torch.ones(4, 4), p=0.5).ne(0).tolist()


def test_nothing_of_the_generator_plumbing_is_left_to_cuda(migrated):
    code = migrated.split('"""', 2)[2]  # the module's docstring names what the program was
    assert "torch.cuda" not in code and "_lazy_call" not in code
    for used in ("portlayer.default_generators[index]", "portlayer.lazy_call(apply)", "portlayer.init()"):
        assert used in migrated


def test_a_fork_draws_from_its_states_seed_and_the_next_fork_continues_that_stream(observed):
    assert observed["device"] == "cpu"
    # The first fork drew a dropout mask after its numbers: the second fork's come after that mask.
    first, mask, second = seeded(SEED + 2718, uniform, dropout_mask, uniform)
    assert observed["forked"] == [first, second] and observed["mask"] == mask
    assert observed["expert"] == seeded(SEED + 1024, uniform)[0]


def test_the_default_stream_outside_never_sees_a_fork(observed):
    assert observed["outside"] == seeded(SEED, uniform, uniform, uniform)


def test_saved_states_restored_draw_the_same_numbers_again(observed):
    assert observed["restored"] == observed["forked"][1]


def test_a_seed_given_twice_is_refused(observed):
    assert observed["same_seed_twice"] == f"seed {SEED + 2718} already exists"
