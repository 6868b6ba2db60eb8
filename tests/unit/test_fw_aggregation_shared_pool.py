"""One aggregator slot pool per forwarder, shared by its trainings (docs/sharing.md), through the
aggregator's calls (ndnps/forwarder/aggregator.py, an internal face's app) made plainly on a fake
clock: ranges, time-division sharing and its overlaps, a spatial split, per-training deadlines
and busy time."""
from __future__ import annotations

from ndn.encoding import Component

from ndnps.forwarder.aggregator import Aggregation
from ndnps.forwarder.internal_face import Packet
from ndnps.forwarder.tables.aggregator_pool import AggregatorPool, SlotKey
from ndnps.ndn.aggregation import AggregatorConfig, Group, encode_interest, encode_plan
from ndnps.ndn.markers import AGGREGATE_COMPONENT
from ndnps.ndn.packet import Data, Interest, Nack, decode_interest
from ndnps.ndn.tlv import name_from_str

KEY = b"k" * 32
KN = name_from_str("/ps/KEY")
A, B = name_from_str("/ps/a"), name_from_str("/ps/b")
PS = 300                     # the face the aggregate Interests come from


def config(training: bytes, first: int = 0, slots: int = 8,
           timeout: float = 1.0) -> AggregatorConfig:
    return AggregatorConfig(training, "agg", KEY, KN, slots=slots, timeout=timeout, first=first)


def shared(*configs: AggregatorConfig) -> Aggregation:
    agg = Aggregation()
    for c in configs:
        agg.configure(c, now=0.0)
    return agg


def tail(version: int, seg: int) -> bytes:
    return bytes(Component.from_version(version)) + bytes(Component.from_segment(seg))


def ask(training: bytes, version: int, seg: int) -> Interest:
    wire, _ = encode_interest(AGGREGATE_COMPONENT + training + tail(version, seg),
                              encode_plan(Group("agg", ("w1", "w2"))), "agg", 4000, KEY, KN)
    return decode_interest(wire, 0, len(wire))


def kinds(sent: list[Packet]) -> list[str]:
    """What the aggregator sent through its face, packet by packet."""
    return ["nack" if isinstance(p, Nack) else "data" if isinstance(p, Data) else "interest"
            for p in sent]


def nacked(sent: list[Packet]) -> list[bytes]:
    return [p.interest.name for p in sent if isinstance(p, Nack)]


def segments(pool: AggregatorPool, training: bytes, index: int, count: int = 1,
             avoid: bool = False) -> list[int]:
    """The first segments of `training` whose slot is `index` (avoid: is not)."""
    return [s for s in range(10_000) if (pool.index(training, s) == index) != avoid][:count]


def test_two_trainings_on_one_range_collide_and_their_overlap_is_recorded():
    agg = shared(config(A), config(B))
    pool = agg.pool
    assert pool.slots == 8
    assert kinds(agg.on_interest(ask(A, 3, 0), PS, 1.0)) == ["interest", "interest"]
    held = pool.index(A, 0)
    # B's segment hashed to A's slot: unavailable, whoever holds it
    clash = ask(B, 7, segments(pool, B, held)[0])
    assert nacked(agg.on_interest(clash, PS, 1.2)) == [clash.name]
    assert agg.counters.collisions == 1 and pool.use(B).collisions == 1
    assert agg.counters.overlaps == 0                # a refused claim takes no slot
    # another of B's slots while A's is live: the two rounds met
    free = segments(pool, B, held, avoid=True)[0]
    assert kinds(agg.on_interest(ask(B, 7, free), PS, 1.5)) == ["interest", "interest"]
    event = {"t": 1.5, "training": "/ps/b", "version": 7, "other": "/ps/a", "other_version": 3}
    assert agg.counters.overlaps == 1 and list(agg.overlap_log) == [event]
    assert agg.first_overlap == event
    # A's slot past its deadline (2.0), not yet swept: no overlap; B's own live slot is none
    third = next(s for s in range(100) if pool.index(B, s) not in (held, pool.index(B, free)))
    assert kinds(agg.on_interest(ask(B, 7, third), PS, 2.1)) == ["interest", "interest"]
    assert agg.counters.overlaps == 1
    status = agg.status()
    assert status["counters"]["overlaps"] == 1 and status["overlap_log"] == [event]
    assert [(t["training"], t["overlaps"]) for t in status["trainings"]] == [
        ("/ps/a", 0), ("/ps/b", 1)]


def test_a_stale_slot_of_another_training_is_ended_when_one_needs_it():
    agg = shared(config(A), config(B))
    a = ask(A, 3, 0)
    agg.on_interest(a, PS, 0.0)
    ops = agg.on_interest(ask(B, 7, segments(agg.pool, B, agg.pool.index(A, 0))[0]), PS, 1.5)
    assert kinds(ops) == ["nack", "interest", "interest"] and nacked(ops) == [a.name]
    assert agg.trainings[A].pending == {} and agg.counters.abandoned == 1
    assert len(agg.trainings[B].pending) == 1 and agg.counters.overlaps == 0


def test_disjoint_ranges_never_overlap_nor_collide_with_each_other():
    agg = shared(config(A, first=0, slots=4), config(B, first=4, slots=4))
    for seg in range(20):
        agg.on_interest(ask(A, 1, seg), PS, 0.0)
        agg.on_interest(ask(B, 1, seg), PS, 0.1)
    a, b = agg.pool.use(A), agg.pool.use(B)
    assert a is not None and b is not None
    assert sorted(a.held) == [0, 1, 2, 3] and sorted(b.held) == [4, 5, 6, 7]
    # each refused claim met its own training's slot
    assert (a.collisions, b.collisions, agg.counters.collisions) == (16, 16, 32)
    assert agg.counters.overlaps == 0 and not agg.overlap_log


def test_configuring_or_removing_one_training_keeps_the_others_slots_and_sums():
    agg = shared(config(A), config(B))
    pool = agg.pool
    sa = 0
    sb = segments(pool, B, pool.index(A, sa), avoid=True)[0]
    agg.on_interest(ask(A, 3, sa), PS, 0.0)
    agg.on_interest(ask(B, 5, sb), PS, 0.0)
    b_key = SlotKey(B, 5, sb)
    b_waiting = {n: w for n, w in agg._waiting.items() if w[0] == B}
    assert len(b_waiting) == 2
    agg.configure(config(A, timeout=2.0), now=0.5)     # again: A's slots start empty
    assert agg.trainings[A].pending == {} and pool.get(SlotKey(A, 3, sa)) is None
    assert list(agg.trainings[B].pending) == [b_key] and pool.get(b_key) is not None
    assert agg._waiting == b_waiting and pool.counters.dropped == 1
    agg.on_interest(ask(A, 3, sa), PS, 0.6)
    assert agg.remove(A, now=0.7)
    assert list(agg.trainings[B].pending) == [b_key] and len(pool) == 1
    assert agg._waiting == b_waiting and pool.slots == 8
    assert agg.remove(B, now=0.8) and len(pool) == 0 and pool.slots == 1
    assert not agg.remove(B, now=0.9)


def test_each_slot_expires_at_its_own_trainings_timeout():
    agg = shared(config(A, timeout=1.0), config(B, timeout=3.0))
    a = ask(A, 3, 0)
    b = ask(B, 3, segments(agg.pool, B, agg.pool.index(A, 0), avoid=True)[0])
    agg.on_interest(a, PS, 0.0)
    agg.on_interest(b, PS, 0.0)
    assert agg.next_timer() == 1.0
    assert nacked(agg.on_timer(1.0)) == [a.name]
    assert agg.next_timer() == 3.0 and agg.on_timer(2.9) == []
    assert nacked(agg.on_timer(3.0)) == [b.name] and agg.next_timer() is None


def test_busy_seconds_accumulate_per_training_and_for_the_pool():
    agg = shared(config(A, first=0, slots=8, timeout=3.0), config(B, first=8, slots=8,
                                                                   timeout=5.0))
    agg.on_interest(ask(A, 1, 0), PS, 1.0)
    agg.on_interest(ask(B, 7, 0), PS, 2.0)
    assert len(agg.on_timer(4.0)) == 1                 # A's deadline: A busy 1.0 .. 4.0
    assert len(agg.on_push(B + tail(8, 0), now=6.0)) == 1   # B's next version: 2.0 .. 6.0

    def busy() -> tuple[float, float, float]:
        s = agg.status()
        a, b = s["trainings"]
        return a["busy_seconds"], b["busy_seconds"], s["pool"]["busy_seconds"]

    assert busy() == (3.0, 4.0, 5.0)
    agg.on_interest(ask(A, 2, 0), PS, 10.0)
    agg.on_timer(10.5)
    assert busy() == (3.5, 4.0, 5.5)                   # open: counted to the last trigger
    agg.on_push(A + tail(3, 0), now=10.5)             # A's next version: its slot freed
    agg.on_timer(20.0)
    assert busy() == (3.5, 4.0, 5.5)


def test_the_status_reports_the_pool_and_each_trainings_range():
    agg = shared(config(A, first=0, slots=8), config(B, first=8, slots=24, timeout=1.5))
    agg.on_interest(ask(B, 1, 0), PS, 1.0)
    s = agg.status()
    assert {k: s["pool"][k] for k in ("size", "held", "claimed", "collisions")} == {
        "size": 32, "held": 1, "claimed": 1, "collisions": 0}
    assert s["trainings"][1] == {"training": "/ps/b", "node": "agg", "first": 8, "slots": 24,
                                 "timeout": 1.5, "held": 1, "busy_seconds": 0.0,
                                 "claimed": 1, "collisions": 0, "overlaps": 0}
    assert s["overlap_log"] == [] and s["overlap_first"] is None
