"""PL401's hint names the way for the torch.cuda names training code reaches most (Megatron-LM's
megatron/core): the generator plumbing on the targets that lack it, allocator pools, raw streams, telemetry."""

import pytest

from portlayer.migrate.codes import CODES
from portlayer.migrate.engine import migrate_source

SOURCE = """\
import torch
torch.cuda._lazy_call(cb)
pool = torch.cuda.MemPool()
used = torch.cuda.device_memory_used()
names = torch.cuda.some_future_name()
"""


def hints(target: str) -> dict[int, str]:
    return {d.line: d.hint for d in migrate_source(SOURCE, target).diagnostics if d.code == "PL401"}


@pytest.mark.parametrize("target", ["torch", "npu"])
def test_the_generator_plumbing_points_to_the_neutral_target_where_it_runs_everywhere(target):
    assert "--target neutral" in hints(target)[2] and "portlayer.lazy_call" in hints(target)[2]


def test_each_known_name_has_its_own_hint_and_an_unknown_one_the_codes(target="neutral"):
    found = hints(target)
    assert 2 not in found  # converted on neutral
    assert "use_mem_pool" in found[3] and "mem_get_info" in found[4]
    assert found[5] == CODES["PL401"].hint
