"""The forwarder's tables on their own: FIB, RIB, PIT, CS, dead-nonce list, persistent PIT,
strategy choice (ndnps/forwarder/tables/*.py, strategy.py)."""
from __future__ import annotations

import pytest

from ndnps.ndn.packet import Data, decode
from ndnps.forwarder.strategy import (BestRoute, Multicast, RetxSuppression, UnknownStrategy,
                                strategy_by_name)
from ndnps.forwarder.tables.cs import ContentStore
from ndnps.forwarder.tables.dead_nonce_list import DeadNonceList
from ndnps.forwarder.tables.fib import Fib
from ndnps.forwarder.tables.persistent_pit import InsertResult, PersistentPit
from ndnps.forwarder.tables.pit import InRecord, OutRecord, Pit, PitFull
from ndnps.forwarder.tables.rib import CAPTURE, CHILD_INHERIT, Rib, Route
from ndnps.forwarder.tables.strategy_choice import StrategyChoice
from ndnps.ndn.tlv import component_offsets

from tests.support.fwkit import data, decoded_interest, depth, interest, nv


def offs(n) -> list[int]:
    return component_offsets(nv(n))


# ---- FIB -----------------------------------------------------------------------------------

def fib_with(*prefixes: str) -> Fib:
    fib = Fib()
    for i, p in enumerate(prefixes):
        fib.add_nexthop(nv(p), depth(p), 256 + i, 10)
    return fib


def lpm(fib: Fib, n: str) -> bytes | None:
    e = fib.lookup(nv(n), offs(n))
    return e.prefix if e else None


def test_fib_longest_prefix_match():
    fib = fib_with("/a", "/a/b", "/a/b/c/d")
    assert lpm(fib, "/a/b/c") == nv("/a/b")
    assert lpm(fib, "/a/b/c/d/e") == nv("/a/b/c/d")
    assert lpm(fib, "/a/b") == nv("/a/b")
    assert lpm(fib, "/a/bc") == nv("/a")              # component boundaries, not bytes
    assert lpm(fib, "/a") == nv("/a")
    assert lpm(fib, "/ab") is None
    assert lpm(fib, "/z/a/b") is None


def test_fib_root_route_matches_everything():
    fib = fib_with("/", "/a")
    assert lpm(fib, "/z") == b""
    assert lpm(fib, "/a/x") == nv("/a")


def test_fib_removal_keeps_depth_tracking_right():
    fib = fib_with("/a", "/a/b/c", "/x/y/z")
    fib.set_nexthops(nv("/a/b/c"), 3, {})
    assert len(fib) == 2
    assert lpm(fib, "/a/b/c/d") == nv("/a")
    assert lpm(fib, "/x/y/z/w") == nv("/x/y/z")      # depth 3 still present for /x/y/z
    fib.set_nexthops(nv("/x/y/z"), 3, {})
    assert lpm(fib, "/x/y/z/w") is None
    fib.set_nexthops(nv("/not/there"), 2, {})        # removing what is absent is harmless
    fib.add_nexthop(nv("/a/b/c"), 3, 300, 1)
    assert lpm(fib, "/a/b/c/d") == nv("/a/b/c")


def test_fib_next_hops_sorted_by_cost_then_face():
    fib = Fib()
    p = nv("/a")
    fib.add_nexthop(p, 1, 300, 20)
    fib.add_nexthop(p, 1, 257, 5)
    fib.add_nexthop(p, 1, 256, 20)
    assert fib.find_exact(p).sorted_hops == [(5, 257), (20, 256), (20, 300)]
    fib.add_nexthop(p, 1, 300, 1)                     # cost update
    assert fib.find_exact(p).sorted_hops[0] == (1, 300)
    assert fib.find_exact(p).nexthops == {300: 1, 257: 5, 256: 20}
    fib.set_nexthops(p, 1, {400: 0})                  # replace
    assert fib.find_exact(p).sorted_hops == [(0, 400)]
    assert [e.prefix for e in fib.entries()] == [p]


def test_fib_too_deep_prefix_is_refused():
    fib = Fib(max_depth=3)
    with pytest.raises(ValueError):
        fib.add_nexthop(nv("/a/b/c/d"), 4, 256, 0)
    assert len(fib) == 0
    fib.add_nexthop(nv("/a/b/c"), 3, 256, 0)
    assert lpm(fib, "/a/b/c/d/e/f") == nv("/a/b/c")   # names deeper than that still match


# ---- RIB -----------------------------------------------------------------------------------

def rib() -> tuple[Rib, Fib]:
    fib = Fib()
    return Rib(fib), fib


def add(r: Rib, prefix: str, face: int, cost: int = 10, flags: int = CHILD_INHERIT,
        origin: int = 0, expires: float | None = None) -> None:
    r.add(nv(prefix), depth(prefix), Route(face, origin, cost, flags, expires))


def hops(fib: Fib, prefix: str) -> dict[int, int] | None:
    e = fib.find_exact(nv(prefix))
    return dict(e.nexthops) if e else None


def test_rib_child_inherit():
    r, fib = rib()
    add(r, "/a", 1, cost=5)
    add(r, "/a/b", 2, cost=7, flags=0)
    add(r, "/a/b/c", 3, cost=9)
    assert hops(fib, "/a") == {1: 5}
    assert hops(fib, "/a/b") == {2: 7, 1: 5}
    assert hops(fib, "/a/b/c") == {3: 9, 1: 5}        # /a/b's route has no CHILD_INHERIT
    assert hops(fib, "/a/x") is None                  # no FIB entry without a RIB entry


def test_rib_inheritance_follows_later_ancestor_changes():
    r, fib = rib()
    add(r, "/a/b", 2)
    add(r, "/a", 1)                                   # added after the child
    assert hops(fib, "/a/b") == {2: 10, 1: 10}
    add(r, "/", 9, cost=1)
    assert hops(fib, "/a/b") == {2: 10, 1: 10, 9: 1}
    assert hops(fib, "/") == {9: 1}
    r.remove(nv("/a"), 1, 0)
    assert hops(fib, "/a") is None
    assert hops(fib, "/a/b") == {2: 10, 9: 1}


def test_rib_own_route_wins_over_inherited_and_closer_ancestor_wins():
    r, fib = rib()
    add(r, "/", 1, cost=1)
    add(r, "/a", 1, cost=50)
    add(r, "/a/b", 1, cost=99)
    add(r, "/a/b/c", 2, cost=3)
    assert hops(fib, "/a/b") == {1: 99}
    assert hops(fib, "/a/b/c") == {2: 3, 1: 99}


def test_rib_capture():
    r, fib = rib()
    add(r, "/", 9)
    add(r, "/a", 1)
    add(r, "/a/b", 2, flags=CAPTURE | CHILD_INHERIT)
    add(r, "/a/b/c", 3)
    assert hops(fib, "/a/b") == {2: 10}               # captures: nothing inherited
    assert hops(fib, "/a/b/c") == {3: 10, 2: 10}      # inherits /a/b, stops there
    add(r, "/x", 4, flags=CAPTURE | CHILD_INHERIT)
    add(r, "/x/y", 5)
    assert hops(fib, "/x/y") == {5: 10, 4: 10}        # an ancestor's capture stops above it


def test_rib_cheapest_route_per_face_across_origins():
    r, fib = rib()
    add(r, "/a", 1, cost=30, origin=0)
    add(r, "/a", 1, cost=10, origin=255)
    assert hops(fib, "/a") == {1: 10}
    assert len(r.entries()[0][1]) == 2
    r.remove(nv("/a"), 1, 255)
    assert hops(fib, "/a") == {1: 30}
    assert r.remove(nv("/a"), 1, 255) is False


def test_rib_expiry():
    r, fib = rib()
    add(r, "/a", 1, expires=100.0)
    add(r, "/a", 2, expires=None)
    add(r, "/a/b", 3, expires=50.0)
    assert r.expire(49.9) == 0
    assert r.expire(50.0) == 1
    assert hops(fib, "/a/b") is None
    assert r.expire(200.0) == 1
    assert hops(fib, "/a") == {2: 10}
    assert r.expire(1e9) == 0


def test_rib_remove_face():
    r, fib = rib()
    add(r, "/a", 1)
    add(r, "/a", 2, origin=65)
    add(r, "/a/b", 1, origin=65)
    add(r, "/a/b", 1, origin=0)
    add(r, "/c", 3)
    r.remove_face(1)
    assert hops(fib, "/a") == {2: 10}
    assert hops(fib, "/a/b") is None
    assert hops(fib, "/c") == {3: 10}
    assert sorted(p for p, _ in r.entries()) == sorted([nv("/a"), nv("/c")])


def test_rib_siblings_are_independent():
    r, fib = rib()
    add(r, "/a", 1)
    add(r, "/ab", 2)
    assert hops(fib, "/ab") == {2: 10}
    r.remove(nv("/a"), 1, 0)
    assert hops(fib, "/ab") == {2: 10}


def test_rib_refuses_too_deep_prefix():
    r, fib = rib()
    with pytest.raises(ValueError):
        add(r, "/" + "/".join("x" * 33), 1)
    assert len(r) == 0 and len(fib) == 0


# ---- PIT -----------------------------------------------------------------------------------

def I(n, **kw):
    return decoded_interest(interest(n, **kw))


def test_pit_insert_find_and_keys():
    pit = Pit()
    e1, created = pit.insert(I("/a"))
    assert created
    e2, created = pit.insert(I("/a"))                 # another nonce, same key: aggregated
    assert e2 is e1 and not created
    e3, _ = pit.insert(I("/a", cbp=True))
    e4, _ = pit.insert(I("/a", mbf=True))
    e5, _ = pit.insert(I("/a", cbp=True, mbf=True))
    assert len({id(e) for e in (e1, e3, e4, e5)}) == 4
    assert len(pit) == 4
    assert pit.find(I("/a", mbf=True)) is e4
    assert pit.find(I("/b")) is None
    assert e5.key == (True, True)


def test_pit_full():
    pit = Pit(max_entries=2)
    pit.insert(I("/a"))
    pit.insert(I("/b"))
    pit.insert(I("/a"))                               # existing entry: fine
    with pytest.raises(PitFull):
        pit.insert(I("/c"))
    assert len(pit) == 2


def test_pit_expiry():
    pit = Pit()
    a, _ = pit.insert(I("/a"))
    b, _ = pit.insert(I("/b"))
    pit.set_expiry(a, 10.0)
    pit.set_expiry(b, 10.0)
    pit.set_expiry(b, 20.0)                           # extended: the old deadline is stale
    assert pit.expire(9.99) == []
    assert pit.expire(10.0) == [a]
    assert a.erased and pit.find(I("/a")) is None and len(pit) == 1
    assert pit.expire(19.0) == []
    assert pit.expire(20.0) == [b]
    assert len(pit) == 0


def test_pit_erase_is_idempotent_and_entry_can_be_recreated():
    pit = Pit()
    a, _ = pit.insert(I("/a"))
    pit.set_expiry(a, 5.0)
    pit.erase(a)
    pit.erase(a)
    assert len(pit) == 0
    b, created = pit.insert(I("/a"))
    assert created and b is not a
    pit.set_expiry(b, 50.0)
    assert pit.expire(10.0) == []                     # a's heap item does not touch b
    assert pit.find(I("/a")) is b


def test_pit_data_matches_exact_vs_can_be_prefix():
    pit = Pit()
    entries = {}
    for n, cbp in [("/a", False), ("/a", True), ("/a/b", False), ("/a/b", True),
                   ("/a/b/c", False), ("/a/b/c", True), ("/a/b/c/d", True), ("/a/bc", True)]:
        e, _ = pit.insert(I(n, cbp=cbp))
        pit.set_expiry(e, 100.0)
        entries[(n, cbp)] = e
    got = pit.data_matches(nv("/a/b/c"), offs("/a/b/c"), 0.0)
    assert {id(e) for e in got} == {id(entries[k]) for k in [
        ("/a", True), ("/a/b", True), ("/a/b/c", False), ("/a/b/c", True)]}
    assert len(got) == 4
    assert pit.data_matches(nv("/a/b/c"), offs("/a/b/c"), 100.0) == []   # expired


def test_pit_remove_face():
    pit = Pit()
    a, _ = pit.insert(I("/a"))
    b, _ = pit.insert(I("/b"))
    ia = I("/a")
    a.in_records[1] = InRecord(1, ia, 10.0)
    a.in_records[2] = InRecord(2, ia, 10.0)
    a.out_records[3] = OutRecord(3, ia.nonce, 0.0, 10.0)
    b.in_records[1] = InRecord(1, ia, 10.0)
    b.out_records[2] = OutRecord(2, ia.nonce, 0.0, 10.0)
    pit.remove_face(1)
    assert b.erased and pit.find(I("/b")) is None     # b had no other downstream
    assert not a.erased and list(a.in_records) == [2]
    pit.remove_face(3)
    assert a.out_records == {}
    assert len(pit) == 1


# ---- CS ------------------------------------------------------------------------------------

def D(n, **kw) -> Data:
    pkt = decode(data(n, **kw))
    assert isinstance(pkt, Data)
    return pkt


def test_cs_exact_match():
    cs = ContentStore()
    cs.insert(D("/a/b"), 0.0)
    assert cs.lookup(I("/a/b"), 0.0).name == nv("/a/b")
    assert cs.lookup(I("/a"), 0.0) is None            # shorter Interest without CanBePrefix
    assert cs.lookup(I("/a/b/c"), 0.0) is None
    assert (cs.hits, cs.misses) == (1, 2)


def test_cs_can_be_prefix_match():
    cs = ContentStore()
    cs.insert(D("/a/bc"), 0.0)
    assert cs.lookup(I("/a/b", cbp=True), 0.0) is None     # /a/bc is not under /a/b
    cs.insert(D("/a/b/c"), 0.0)
    assert cs.lookup(I("/a/b", cbp=True), 0.0).name == nv("/a/b/c")
    cs.insert(D("/a/b"), 0.0)
    assert cs.lookup(I("/a/b", cbp=True), 0.0).name == nv("/a/b")   # the name itself matches
    assert cs.lookup(I("/a", cbp=True), 0.0).name == nv("/a/b")     # leftmost, canonical order
    assert cs.lookup(I("/b", cbp=True), 0.0) is None


@pytest.mark.parametrize("fresh,at,expected", [
    (1000, 0.999, True), (1000, 1.0, False), (None, 0.0, False), (0, 0.0, False),
])
def test_cs_must_be_fresh(fresh, at, expected):
    cs = ContentStore()
    cs.insert(D("/a", fresh=fresh), 0.0)
    got = cs.lookup(I("/a", mbf=True), at)
    assert (got is not None) is expected
    assert cs.lookup(I("/a"), 1e6) is not None         # without MustBeFresh, stale is fine


def test_cs_can_be_prefix_and_must_be_fresh_skips_stale():
    cs = ContentStore()
    cs.insert(D("/a/b", fresh=0), 0.0)
    cs.insert(D("/a/c", fresh=10_000), 0.0)
    assert cs.lookup(I("/a", cbp=True, mbf=True), 5.0).name == nv("/a/c")
    assert cs.lookup(I("/a", cbp=True), 5.0).name == nv("/a/b")
    assert cs.lookup(I("/a", cbp=True, mbf=True), 10.0) is None


def test_cs_reinsert_refreshes_freshness():
    cs = ContentStore()
    cs.insert(D("/a", fresh=1000), 0.0)
    cs.insert(D("/a", fresh=1000), 5.0)
    assert cs.lookup(I("/a", mbf=True), 5.5) is not None
    assert len(cs) == 1


def test_cs_lru_by_packets():
    cs = ContentStore(max_packets=3)
    for n in ["/a", "/b", "/c"]:
        cs.insert(D(n), 0.0)
    assert cs.lookup(I("/a"), 0.0) is not None        # /a is now the most recently used
    cs.insert(D("/d"), 0.0)
    assert len(cs) == 3 and cs.evictions == 1
    assert cs.lookup(I("/b"), 0.0) is None
    assert [cs.lookup(I(n), 0.0) is not None for n in ["/a", "/c", "/d"]] == [True] * 3
    cs.insert(D("/e"), 0.0)                           # /a was looked up first: now the oldest
    assert cs.lookup(I("/a"), 0.0) is None
    assert cs.lookup(I("/a", cbp=True), 0.0) is None  # the prefix index forgot it too


def test_cs_lru_by_bytes():
    sizes = {n: len(data(n, content=bytes(100))) for n in ["/a", "/b", "/c"]}
    cs = ContentStore(max_bytes=sizes["/a"] + sizes["/b"] + 10)
    cs.insert(D("/a", content=bytes(100)), 0.0)
    cs.insert(D("/b", content=bytes(100)), 0.0)
    assert cs.bytes == sizes["/a"] + sizes["/b"]
    cs.insert(D("/c", content=bytes(100)), 0.0)
    assert len(cs) == 2 and cs.lookup(I("/a"), 0.0) is None
    assert cs.bytes == sizes["/b"] + sizes["/c"]
    cs.insert(D("/b", content=bytes(50)), 0.0)        # replacing adjusts the byte count
    assert cs.bytes == sizes["/b"] - 50 + sizes["/c"]
    cs.insert(D("/big", content=bytes(1000)), 0.0)    # bigger than the whole store: not kept
    assert len(cs) == 2 and cs.lookup(I("/big"), 0.0) is None


def test_cs_disabled():
    cs = ContentStore(max_packets=0)
    cs.insert(D("/a"), 0.0)
    assert len(cs) == 0 and cs.lookup(I("/a"), 0.0) is None


def test_cs_erase_all():
    cs = ContentStore()
    cs.insert(D("/a"), 0.0)
    cs.erase_all()
    assert (len(cs), cs.bytes) == (0, 0)
    assert cs.lookup(I("/a", cbp=True), 0.0) is None


# ---- dead nonce list -----------------------------------------------------------------------

def test_dead_nonce_list_expiry():
    dnl = DeadNonceList(lifetime=6.0)
    dnl.add(b"n", b"1234", 0.0)
    assert dnl.has(b"n", b"1234", 5.99)
    assert not dnl.has(b"n", b"1235", 1.0) and not dnl.has(b"m", b"1234", 1.0)
    assert not dnl.has(b"n", b"1234", 6.0)
    dnl.add(b"n", b"9999", 3.0)
    dnl.expire(6.0)
    assert len(dnl) == 1 and dnl.has(b"n", b"9999", 6.0)
    dnl.expire(9.0)
    assert len(dnl) == 0


def test_dead_nonce_list_readd_extends():
    dnl = DeadNonceList(lifetime=6.0)
    dnl.add(b"n", b"1", 0.0)
    dnl.add(b"n", b"2", 1.0)
    dnl.add(b"n", b"1", 2.0)                           # refreshed: now expires at 8
    dnl.expire(7.0)
    assert not dnl.has(b"n", b"2", 7.0) and dnl.has(b"n", b"1", 7.0)


def test_dead_nonce_list_capacity_evicts_oldest():
    dnl = DeadNonceList(lifetime=100.0, capacity=3)
    for i in range(5):
        dnl.add(b"n", bytes([i]) * 4, float(i))
    assert len(dnl) == 3
    assert [dnl.has(b"n", bytes([i]) * 4, 5.0) for i in range(5)] == [False, False, True, True,
                                                                       True]


# ---- persistent PIT ------------------------------------------------------------------------

def ppit(**kw) -> PersistentPit:
    kw.setdefault("inserts_per_face_per_s", 1000.0)
    return PersistentPit(**kw)


def ins(pp: PersistentPit, prefix: str, face: int, now: float) -> InsertResult:
    return pp.insert(nv(prefix), depth(prefix), face, now)


def down(pp: PersistentPit, n, now: float) -> list[int]:
    return sorted(pp.downstreams(nv(n), offs(n), now))


def test_ppit_insert_and_longest_match():
    pp = ppit(lifetime=60.0)
    assert ins(pp, "/ps/t", 1, 0.0) is InsertResult.ADDED
    assert ins(pp, "/ps/t", 2, 0.0) is InsertResult.ADDED
    assert ins(pp, "/ps/t", 1, 1.0) is InsertResult.REFRESHED
    assert ins(pp, "/ps", 3, 0.0) is InsertResult.ADDED
    assert len(pp) == 2
    assert down(pp, "/ps/t/v/s", 0.0) == [1, 2]       # the longest entry only
    assert down(pp, "/ps/t", 0.0) == [1, 2]
    assert down(pp, "/ps/u/v", 0.0) == [3]
    assert down(pp, "/ps/tt", 0.0) == [3]
    assert down(pp, "/other", 0.0) == []
    assert InsertResult.ADDED.accepted and not InsertResult.TABLE_FULL.accepted


def test_ppit_soft_state_expiry_and_refresh():
    pp = ppit(lifetime=10.0)
    ins(pp, "/ps/t", 1, 0.0)
    ins(pp, "/ps/t", 2, 0.0)
    ins(pp, "/ps/t", 1, 5.0)                          # refreshed until 15
    assert down(pp, "/ps/t/1", 9.99) == [1, 2]
    assert down(pp, "/ps/t/1", 10.0) == [1]           # lapsed even before the sweep
    assert pp.expire(10.0) == 1
    assert [sorted(e.faces) for e in pp.entries()] == [[1]]
    assert pp.expire(15.0) == 1
    assert len(pp) == 0 and down(pp, "/ps/t/1", 15.0) == []
    assert ins(pp, "/ps/t", 1, 16.0) is InsertResult.ADDED


def test_ppit_remove():
    pp = ppit()
    ins(pp, "/ps/t", 1, 0.0)
    ins(pp, "/ps/t", 2, 0.0)
    assert pp.remove(nv("/ps/t"), 1) is True
    assert pp.remove(nv("/ps/t"), 1) is False
    assert pp.remove(nv("/ps/x"), 2) is False
    assert down(pp, "/ps/t/v", 0.0) == [2]
    assert pp.remove(nv("/ps/t"), 2) is True
    assert len(pp) == 0


def test_ppit_remove_face():
    pp = ppit()
    for p in ["/ps/a", "/ps/b", "/ps/c"]:
        ins(pp, p, 1, 0.0)
    ins(pp, "/ps/b", 2, 0.0)
    pp.remove_face(1)
    assert [(e.prefix, sorted(e.faces)) for e in pp.entries()] == [(nv("/ps/b"), [2])]
    pp.remove_face(1)                                 # twice: harmless
    pp.remove_face(99)


def test_ppit_caps():
    pp = ppit(max_entries=2, max_faces_per_entry=2, max_entries_per_face=2)
    assert ins(pp, "/p/1", 1, 0.0) is InsertResult.ADDED
    assert ins(pp, "/p/2", 1, 0.0) is InsertResult.ADDED
    assert ins(pp, "/p/3", 2, 0.0) is InsertResult.TABLE_FULL
    assert ins(pp, "/p/1", 2, 0.0) is InsertResult.ADDED
    assert ins(pp, "/p/1", 3, 0.0) is InsertResult.ENTRY_FULL
    assert ins(pp, "/p/1", 1, 0.0) is InsertResult.REFRESHED    # refresh is always fine
    pp2 = ppit(max_entries_per_face=2)
    ins(pp2, "/p/1", 1, 0.0)
    ins(pp2, "/p/2", 1, 0.0)
    assert ins(pp2, "/p/3", 1, 0.0) is InsertResult.FACE_QUOTA
    assert ins(pp2, "/p/3", 2, 0.0) is InsertResult.ADDED
    assert len(pp2) == 3
    pp2.remove(nv("/p/1"), 1)                         # quota freed
    assert ins(pp2, "/p/3", 1, 0.0) is InsertResult.ADDED


def test_ppit_quota_freed_by_expiry():
    pp = ppit(max_entries_per_face=1, lifetime=1.0)
    ins(pp, "/p/1", 1, 0.0)
    assert ins(pp, "/p/2", 1, 0.5) is InsertResult.FACE_QUOTA
    pp.expire(1.0)
    assert ins(pp, "/p/2", 1, 1.0) is InsertResult.ADDED


def test_ppit_rate_limit_per_face():
    pp = PersistentPit(inserts_per_face_per_s=4.0)
    results = [ins(pp, "/p/t", 1, 0.0) for _ in range(6)]
    assert results == [InsertResult.ADDED] + [InsertResult.REFRESHED] * 3 + \
        [InsertResult.RATE_LIMITED] * 2
    assert ins(pp, "/p/t", 2, 0.0) is InsertResult.ADDED          # per face
    assert ins(pp, "/p/t", 1, 0.2) is InsertResult.RATE_LIMITED   # 0.8 token so far
    assert ins(pp, "/p/t", 1, 0.25) is InsertResult.REFRESHED     # one token refilled
    assert ins(pp, "/p/t", 1, 0.25) is InsertResult.RATE_LIMITED
    assert ins(pp, "/p/t", 1, 100.0) is InsertResult.REFRESHED
    results = [ins(pp, "/p/t", 1, 100.0) for _ in range(4)]       # the burst is capped
    assert results.count(InsertResult.RATE_LIMITED) == 1


def test_ppit_rate_below_one_per_second_still_admits_inserts():
    pp = PersistentPit(inserts_per_face_per_s=0.5)
    assert ins(pp, "/p/t", 1, 0.0) is InsertResult.ADDED
    assert ins(pp, "/p/t", 1, 1.0) is InsertResult.RATE_LIMITED
    assert ins(pp, "/p/t", 1, 2.0) is InsertResult.REFRESHED


def test_ppit_remove_face_resets_rate_limit():
    pp = PersistentPit(inserts_per_face_per_s=1.0)
    ins(pp, "/p/t", 1, 0.0)
    assert ins(pp, "/p/t", 1, 0.0) is InsertResult.RATE_LIMITED
    pp.remove_face(1)
    assert ins(pp, "/p/t", 1, 0.0) is InsertResult.ADDED


def test_ppit_too_deep_prefix_is_refused_not_raised():
    pp = ppit()
    deep = "/" + "/".join(str(i) for i in range(40))
    result = ins(pp, deep, 1, 0.0)
    assert not result.accepted
    assert len(pp) == 0


# ---- strategy choice -----------------------------------------------------------------------

def test_strategy_choice_longest_match_and_root():
    br, mc = BestRoute(), Multicast()
    sc = StrategyChoice(br)
    assert sc.find(nv("/a/b"), offs("/a/b")) is br
    sc.set(nv("/a"), 1, mc)
    assert sc.find(nv("/a/b"), offs("/a/b")) is mc
    assert sc.find(nv("/ab"), offs("/ab")) is br
    sc.unset(nv("/a"))
    assert sc.find(nv("/a/b"), offs("/a/b")) is br
    sc.unset(b"")                                     # the root always keeps a strategy
    assert sc.find(nv("/x"), offs("/x")) is br
    sc.set(b"", 0, mc)                                # but it can be changed
    assert sc.find(nv("/x"), offs("/x")) is mc
    assert len(sc.items()) == 1


@pytest.mark.parametrize("text,cls", [
    ("best-route", BestRoute), ("multicast", Multicast),
    ("/localhost/nfd/strategy/best-route", BestRoute),
    ("/localhost/nfd/strategy/best-route/v=5", BestRoute),
    ("/localhost/nfd/strategy/multicast/%FD%04/", Multicast),
])
def test_strategy_by_name(text, cls):
    assert type(strategy_by_name(text)) is cls


@pytest.mark.parametrize("text", ["", "asf", "/localhost/nfd/strategy/random"])
def test_strategy_by_unknown_name(text):
    with pytest.raises(UnknownStrategy):
        strategy_by_name(text)


def test_strategy_parameters_as_nfd():
    s = strategy_by_name("/localhost/nfd/strategy/best-route/v=5/retx-suppression-initial~2/"
                         "retx-suppression-max~100/retx-suppression-multiplier~1.5")
    assert type(s) is BestRoute
    assert s.suppression == RetxSuppression(0.002, 0.1, 1.5)
    assert s.name == ("/localhost/nfd/strategy/best-route/retx-suppression-initial~2/"
                      "retx-suppression-max~100/retx-suppression-multiplier~1.5")
    assert strategy_by_name("multicast/retx-suppression-initial~3").suppression.initial == 0.003
    plain = strategy_by_name("best-route")
    assert plain.suppression == RetxSuppression(0.010, 0.250, 2.0)
    assert plain.name == "/localhost/nfd/strategy/best-route"


@pytest.mark.parametrize("params,why", [
    ("retx-suppression-initial", "unknown parameter"),          # no ~value
    ("frobs~3", "unknown parameter"),
    ("retx-suppression-initial~fast", "not a number"),
    ("retx-suppression-initial~0", "need 0 <"),
    ("retx-suppression-initial~300", "need 0 <"),               # above the 250 ms max
    ("retx-suppression-multiplier~0.5", "multiplier >= 1"),
])
def test_bad_strategy_parameters_are_refused_by_name(params, why):
    with pytest.raises(ValueError, match=why) as e:
        strategy_by_name(f"/localhost/nfd/strategy/best-route/v=5/{params}")
    assert not isinstance(e.value, UnknownStrategy)
