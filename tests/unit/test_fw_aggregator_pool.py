"""The aggregator slots (ndnps/forwarder/tables/aggregator_pool.py), with a fake clock: hashing,
collisions, the contributor bitmap, freeing by answer, by push and by deadline, bounds."""
from __future__ import annotations

import pytest

from ndnps.forwarder.tables.aggregator_pool import MAX_CONTRIBUTORS, AggregatorPool, SlotKey

T = b"/ps/t1"
W = ("w1", "w2", "w3")


def add(a, b):
    return b if a is None else a + b


def test_consecutive_segments_spread_over_the_slots():
    pool = AggregatorPool(slots=64)
    used = {pool.index(T, s) for s in range(64)}
    assert len(used) > 40                            # no pile-up on a few slots
    assert pool.index(T, 5) == pool.index(T, 5)
    assert all(0 <= pool.index(b"/other/t", s) < 64 for s in range(100))


def test_a_segment_is_summed_once_per_contributor():
    pool = AggregatorPool(slots=8)
    key = SlotKey(T, 3, 7)
    slot = pool.claim(key, W, now=0.0)
    assert slot is not None and not slot.complete and slot.missing() == list(W)
    pool.add(key, ("w1",), 1, add)
    pool.add(key, ("w1",), 1, add)                      # a repeat: once
    pool.add(key, ("w3",), 10, add)
    assert slot.acc == 11 and slot.missing() == ["w2"]
    assert pool.add(key, ("w9",), 100, add) is None     # not a contributor of this segment
    assert pool.add(key, ("w2",), 100, add).complete
    assert slot.acc == 111
    c = pool.counters
    assert (c.added, c.duplicates, c.rejected, c.completed) == (3, 1, 1, 1)
    assert pool.claim(key, W, now=0.1) is slot       # re-expressed: the same slot
    assert pool.release(key, now=0.2) is slot and len(pool) == 0


def test_a_slot_held_by_another_segment_is_unavailable_not_waited_for():
    pool = AggregatorPool(slots=1, timeout=1.0)
    a, b = SlotKey(T, 1, 0), SlotKey(T, 1, 1)
    assert pool.claim(a, W, now=0.0) is not None
    assert pool.claim(b, W, now=0.5) is None         # fall back
    assert pool.counters.collisions == 1
    assert pool.add(b, ("w1",), 1, add) is None         # nothing held for it
    assert pool.claim(b, W, now=1.0) is not None     # a's deadline passed: taken over
    assert pool.counters.expired == 1 and pool.get(a) is None


def test_the_next_versions_push_frees_the_trainings_earlier_slots_only():
    pool = AggregatorPool(slots=64)
    for seg in range(4):
        pool.claim(SlotKey(T, 5, seg), W, now=0.0)
    pool.claim(SlotKey(b"/ps2/t1", 5, 9), W, now=0.0)
    pool.claim(SlotKey(T, 6, 20), W, now=0.0)
    assert len(pool) == 6
    assert pool.release_before(T, 6, now=0.0) == 4
    assert len(pool) == 2 and pool.get(SlotKey(T, 6, 20)) is not None
    assert pool.counters.released_by_push == 4


def test_a_contributor_that_never_answers_frees_the_slot_at_its_deadline():
    pool = AggregatorPool(slots=8, timeout=2.0)
    key = SlotKey(T, 1, 0)
    pool.claim(key, W, now=10.0)
    pool.add(key, ("w1",), 1, add)
    assert pool.next_timer() == 12.0
    assert pool.expire(11.9) == []
    (gone,) = pool.expire(12.0)
    assert gone.key == key and gone.missing() == ["w2", "w3"]
    assert len(pool) == 0 and pool.next_timer() is None and pool.counters.expired == 1


def test_bounds_are_checked():
    with pytest.raises(ValueError):
        AggregatorPool(slots=0)
    with pytest.raises(ValueError):
        AggregatorPool(timeout=0)
    pool = AggregatorPool()
    for bad in ((), ("w1", "w1"), tuple(f"w{i}" for i in range(MAX_CONTRIBUTORS + 1))):
        with pytest.raises(ValueError):
            pool.claim(SlotKey(T, 1, 0), bad, now=0.0)


def test_summable_segments_sum_in_a_slot_and_a_refused_one_is_not_recorded():
    import numpy as np
    from ndnps.ndn.summable import FixedPointSum, SummableError, decode, encode

    def combine(acc, content):
        acc = acc if acc is not None else FixedPointSum(2)
        acc.add(content)
        return acc

    pool = AggregatorPool(slots=4)
    key = SlotKey(T, 1, 0)
    pool.claim(key, W, now=0.0)
    pool.add(key, ("w1",), encode(np.array([1.0, 2.0])), combine)
    with pytest.raises(SummableError):
        pool.add(key, ("w2",), encode(np.array([1.0])), combine)      # wrong length: refused
    slot = pool.get(key)
    assert slot.missing() == ["w2", "w3"]                           # may come again, right
    pool.add(key, ("w2",), encode(np.array([0.5, 0.5])), combine)
    slot = pool.add(key, ("w3",), encode(np.array([0.25, 0.0])), combine)
    assert slot.complete
    values, n = decode(slot.acc.result())
    assert n == 3 and np.array_equal(values, [1.75, 2.5])


# ---- one pool, several trainings (docs/sharing.md) ---------------------------------------------

A, B = b"/ps/a", b"/ps/b"


def segment_at(pool: AggregatorPool, training: bytes, index: int) -> int:
    return next(s for s in range(10_000) if pool.index(training, s) == index)


def test_a_training_hashes_within_its_range():
    pool = AggregatorPool(slots=4)
    pool.assign(A, 0, 4)
    pool.assign(B, 100, 28)
    assert pool.slots == 128                         # grown to hold B's range
    assert {pool.index(B, s) for s in range(500)} == set(range(100, 128))
    assert {pool.index(A, s) for s in range(50)} == set(range(4))


def test_growing_the_pool_keeps_the_held_slots():
    pool = AggregatorPool(slots=8)
    pool.assign(A, 0, 8)
    keys = [SlotKey(A, 1, s) for s in range(3)]
    held = [pool.claim(k, W, now=0.0) for k in keys]
    where = [pool.index(A, s) for s in range(3)]
    pool.assign(B, 8, 1000)
    assert pool.slots == 1008
    assert [pool.get(k) for k in keys] == held and [pool.index(A, s) for s in range(3)] == where
    pool.resize(2000)
    assert [pool.get(k) for k in keys] == held
    with pytest.raises(ValueError):
        pool.resize(100)                             # B's range is beyond it
    with pytest.raises(ValueError):
        pool.assign(A, 8, 8)                         # A holds slots: drop them first
    pool.drop(A, now=1.0)
    pool.assign(A, 8, 8)


def test_another_trainings_live_slot_in_the_range_is_an_overlap_an_expired_one_is_not():
    pool = AggregatorPool(slots=16)
    pool.assign(A, 0, 8)
    pool.assign(B, 4, 12)                            # meets A's range on [4, 8)
    pool.assign(b"/ps/c", 8, 8)                      # meets B's only
    outside = SlotKey(B, 1, segment_at(pool, B, 12))
    pool.claim(outside, W, now=0.0, timeout=1.0)
    assert pool.overlapping(A, now=0.5) is None      # B's slot is not in A's range
    assert pool.overlapping(b"/ps/c", now=0.5).key == outside
    inside = SlotKey(B, 1, segment_at(pool, B, 5))
    pool.claim(inside, W, now=0.6, timeout=1.0)
    assert pool.overlapping(A, now=0.7).key == inside
    assert pool.overlapping(A, now=1.6) is None      # past its deadline, not yet swept
    assert pool.overlapping(B, now=0.7) is None      # its own slots are no overlap


def test_a_push_and_a_drop_free_one_trainings_slots_only():
    pool = AggregatorPool(slots=64)
    pool.assign(A)
    pool.assign(B)
    a = [SlotKey(A, 1, segment_at(pool, A, i)) for i in (0, 1)]
    b = SlotKey(B, 1, segment_at(pool, B, 2))
    for k in (*a, b):
        assert pool.claim(k, W, now=0.0) is not None
    assert pool.release_before(B, 2, now=1.0) == 1 and len(pool) == 2
    assert [s.key for s in pool.drop(A, now=1.0)] == a and len(pool) == 0
    assert pool.counters.dropped == 2


def test_busy_time_counts_while_a_slot_is_held():
    pool = AggregatorPool(slots=64)
    pool.assign(A)
    pool.assign(B)
    a = [SlotKey(A, 1, segment_at(pool, A, i)) for i in (0, 1)]
    b = SlotKey(B, 1, segment_at(pool, B, 2))
    pool.claim(a[0], W, now=1.0)
    pool.claim(a[1], W, now=2.0)                     # A busy already: no new period
    pool.claim(b, W, now=3.0)
    pool.release(a[0], now=4.0)
    pool.release(a[1], now=5.0)                      # A idle: 1.0 .. 5.0
    assert pool.use(A).busy.seconds(now=9.0) == 4.0
    assert pool.use(B).busy.seconds(now=6.5) == 3.5  # still held: counted up to now
    pool.release(b, now=7.0)
    pool.claim(a[0], W, now=10.0)
    pool.expire(now=10.5 + pool.timeout)
    assert pool.use(A).busy.seconds(now=20.0) == 4.0 + 2.5
    assert pool.use(B).busy.seconds(now=20.0) == 4.0
    assert pool.busy.seconds(now=20.0) == 6.0 + 2.5  # 1.0 .. 7.0 and 10.0 .. 12.5
