"""The caching allocator's replay (torch's CUDACachingAllocator rules) and the log of a fake step's storages
that feeds it."""

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from portlayer.preflight.allocations import AllocationLog
from portlayer.preflight.allocator import CACHING_ALLOCATOR, CachingAllocator, replay

KiB, MiB = 1 << 10, 1 << 20


def peaks(*requests):
    """The peaks after allocating each request in turn, none freed."""
    return replay([(1, key, nbytes) for key, nbytes in enumerate(requests)])


def test_a_request_takes_a_block_of_a_multiple_of_512_bytes():
    assert peaks(1).allocated == 512 and peaks(1).requested == 1
    assert peaks(513).allocated == 1024
    assert peaks(512 * 7).allocated == 512 * 7


def test_segments_are_2_mib_for_small_requests_20_mib_up_to_10_mib_and_the_size_rounded_to_2_mib_above():
    assert peaks(100).reserved == 2 * MiB
    assert peaks(1 * MiB).reserved == 2 * MiB  # 1 MiB is still small
    assert peaks(1 * MiB + 512).reserved == 20 * MiB
    assert peaks(10 * MiB - 512).reserved == 20 * MiB
    assert peaks(10 * MiB).reserved == 10 * MiB
    assert peaks(11 * MiB).reserved == 12 * MiB
    # Small requests share a small segment until it is full; then another.
    assert peaks(*[MiB // 2] * 4).reserved == 2 * MiB
    assert peaks(*[MiB // 2] * 5).reserved == 2 * 2 * MiB


def test_a_block_is_split_only_when_more_than_1_mib_would_be_left_in_the_large_pool():
    # 11 MiB - 512 B in a segment of 12 MiB: 1 MiB + 512 B left, split off; the block is what was asked.
    assert peaks(11 * MiB - 512).allocated == 11 * MiB - 512
    # 11 MiB + 512 B in a segment of 12 MiB: 1 MiB - 512 B left, not split: the whole 12 MiB is allocated.
    assert peaks(11 * MiB + 512).allocated == 12 * MiB
    # In the small pool any remainder is split off (it is at least 512 B).
    assert peaks(600 * KiB).allocated == 600 * KiB


def test_a_freed_block_is_cached_and_reused_by_the_best_fitting_request():
    allocator = CachingAllocator()
    allocator.malloc("a", 12 * MiB)
    allocator.malloc("b", 30 * MiB)
    allocator.free("a")
    allocator.free("b")
    allocator.malloc("c", 12 * MiB)  # fits "a"'s block exactly: no new segment
    assert allocator.reserved == 42 * MiB and allocator.allocated == 12 * MiB
    allocator.malloc("d", 20 * MiB)  # from "b"'s 30 MiB segment, split (10 MiB left)
    assert allocator.reserved == 42 * MiB and allocator.allocated == 32 * MiB
    allocator.free("d")
    allocator.malloc("e", 30 * MiB)  # "d"'s block merged back with its 10 MiB neighbour
    assert allocator.reserved == 42 * MiB and allocator.peaks.reserved == 42 * MiB


def test_blocks_of_different_segments_never_merge():
    allocator = CachingAllocator()
    allocator.malloc("a", 10 * MiB)
    allocator.malloc("b", 10 * MiB)
    allocator.free("a")
    allocator.free("b")
    allocator.malloc("c", 20 * MiB)  # two free 10 MiB segments do not make one of 20
    assert allocator.reserved == 40 * MiB


def test_the_rules_are_torchs_constants():
    rules = CACHING_ALLOCATOR
    assert (rules.min_block, rules.small_size, rules.small_buffer, rules.large_buffer, rules.min_large_alloc,
            rules.round_large) == (512, MiB, 2 * MiB, 20 * MiB, 10 * MiB, 2 * MiB)


def test_the_log_records_storages_in_order_once_per_storage_and_their_frees():
    log = AllocationLog()
    with FakeTensorMode(), log:
        kept = torch.empty(1000)  # before the start: the step's first allocation
        log.start()
        temporary = torch.empty(2000)
        view = temporary[:10]  # shares the storage: no allocation
        del temporary, view
        doubled = kept * 2
    events = log.events()
    assert [(sign, nbytes) for sign, _, nbytes in events] == [(1, 4000), (1, 8000), (-1, 8000), (1, 4000)]
    assert doubled.shape == kept.shape


def test_tensors_left_out_are_not_the_devices():
    log = AllocationLog()
    with FakeTensorMode(), log:
        on_device, on_host = torch.empty(10), torch.empty(())
        log.leave_out([on_host])
        log.start()
    assert [nbytes for _, _, nbytes in log.events()] == [on_device.numel() * 4]
