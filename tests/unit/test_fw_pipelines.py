"""The forwarding pipelines, sans-I/O: (face id, bytes) in, [(face id, bytes)] out, on a fake
clock. NFD's behaviour is the reference (forwarder.cpp, best-route and multicast strategies)."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ndnps.forwarder.face_table import INTERNAL_FACE
from ndnps.forwarder.mgmt import install
from ndnps.ndn.packet import NACK_CONGESTION, NACK_DUPLICATE, NACK_NO_ROUTE, Interest
from ndnps.forwarder.strategy import Multicast, strategy_by_name
from ndnps.forwarder.tables.rib import CHILD_INHERIT, Route
from ndnps.ndn import tlv

from tests.support.fwkit import (Bench, brief, data, depth, interest, lp, nack, name, nv, parse_out,
                                 uri, with_hop)


@pytest.fixture
def b() -> Bench:
    return Bench()


def pit_faces(b: Bench) -> list[tuple[str, list[int], list[int]]]:
    """(name, in-record faces, out-record faces) of every PIT entry."""
    return sorted((tlv.name_to_str(e.name), sorted(e.in_records), sorted(e.out_records))
                  for e in b.fw.pit)


# ---- Interest forwarding -------------------------------------------------------------------

def test_interest_forwarded_by_fib(b):
    d, up = b.faces(2)
    b.route("/a", up)
    wire = interest("/a/b")
    assert b.raw(d, wire) == [(up, wire)]             # the received bytes, untouched
    assert pit_faces(b) == [("/a/b", [d], [up])]
    assert (b.counters(d).in_interests, b.counters(up).out_interests) == (1, 1)
    assert (b.fw.counters.in_interests, b.fw.counters.out_interests) == (1, 1)


def test_longest_prefix_and_cheapest_next_hop(b):
    d, up1, up2, up3 = b.faces(4)
    b.route("/a", up1)
    b.route("/a/b", up2, cost=10)
    b.route("/a/b", up3, cost=5)
    assert brief(b.rx(d, interest("/a/b/c"))) == [(up3, "I", "/a/b/c")]
    assert brief(b.rx(d, interest("/a/c"))) == [(up1, "I", "/a/c")]
    assert brief(b.rx(d, interest("/a/bc"))) == [(up1, "I", "/a/bc")]


def test_interest_never_goes_back_to_its_in_face(b):
    d, up = b.faces(2)
    b.route("/a", d, cost=0)
    b.route("/a", up, cost=100)
    assert brief(b.rx(d, interest("/a"))) == [(up, "I", "/a")]


def test_interest_without_nonce_gets_one(b):
    d, up = b.faces(2)
    b.route("/a", up)
    [(face, p)] = b.rx(d, interest("/a", nonce=None, hop=3))
    assert face == up and p.nonce is not None and p.hop == 2 and p.name == "/a"


def test_aggregation_and_best_route_retransmission_suppression(b):
    d1, d2, up = b.faces(3)
    b.route("/a", up)
    first = interest("/a")
    assert b.raw(d1, first) == [(up, first)]
    b.later(0.005)
    assert b.raw(d2, interest("/a")) == []            # aggregated, suppressed (< 10 ms)
    assert b.drops(d2) == {"retx_suppressed": 1}
    assert pit_faces(b) == [("/a", [d1, d2], [up])]
    b.later(0.010)                                    # 15 ms after the last send: forwarded
    again = interest("/a")
    assert b.raw(d2, again) == [(up, again)]
    b.later(0.015)                                    # interval is now 20 ms: suppressed
    assert b.raw(d1, interest("/a")) == []
    b.later(0.010)                                    # 25 ms: forwarded
    assert brief(b.rx(d1, interest("/a"))) == [(up, "I", "/a")]
    assert b.drops(d1) == {"retx_suppressed": 1}


def test_best_route_suppression_follows_the_strategys_parameters(b):
    """retx-suppression-initial~2, multiplier 3: 2 ms, then 6 ms once one is forwarded."""
    d1, d2, up = b.faces(3)
    b.route("/a", up)
    b.fw.strategy_choice.set(nv("/a"), depth("/a"),
                             strategy_by_name("best-route/v=5/retx-suppression-initial~2/"
                                              "retx-suppression-multiplier~3"))
    assert brief(b.rx(d1, interest("/a"))) == [(up, "I", "/a")]
    b.later(0.001)
    assert b.raw(d2, interest("/a")) == []            # 1 ms < 2 ms: suppressed
    b.later(0.0015)                                   # 2.5 ms: forwarded, interval now 6 ms
    assert brief(b.rx(d2, interest("/a"))) == [(up, "I", "/a")]
    b.later(0.005)
    assert b.raw(d1, interest("/a")) == []            # 5 ms < 6 ms
    b.later(0.002)
    assert brief(b.rx(d1, interest("/a"))) == [(up, "I", "/a")]
    assert b.drops(d1) == b.drops(d2) == {"retx_suppressed": 1}


def test_retransmission_tries_an_unused_next_hop_then_the_least_recently_used(b):
    d, up1, up2 = b.faces(3)
    b.route("/a", up1, cost=1)
    b.route("/a", up2, cost=2)
    assert brief(b.rx(d, interest("/a"))) == [(up1, "I", "/a")]
    b.later(0.011)
    assert brief(b.rx(d, interest("/a"))) == [(up2, "I", "/a")]
    b.later(0.021)
    assert brief(b.rx(d, interest("/a"))) == [(up1, "I", "/a")]


def test_data_returns_to_every_downstream_once_and_is_cached(b):
    d1, d2, d3, up = b.faces(4)
    b.route("/a", up)
    b.rx(d1, interest("/a/b"))
    b.rx(d2, interest("/a/b"))
    b.rx(d2, interest("/a", cbp=True))                # d2 has two entries the Data satisfies
    b.later(0.1)
    dw = data("/a/b", fresh=1000)
    out = b.raw(up, dw)
    assert sorted(out) == sorted([(d1, dw), (d2, dw)])
    assert len(b.fw.pit) == 0 and len(b.fw.cs) == 1
    assert b.fw.counters.satisfied == 2               # two entries: /a/b and /a (CanBePrefix)
    assert b.raw(up, dw) == []                        # a second copy is unsolicited
    assert b.fw.counters.unsolicited == 1
    assert b.raw(d3, interest("/a/b")) == [(d3, dw)]  # CS hit: not forwarded
    assert b.fw.counters.cs_hits == 1
    assert b.counters(up).out_interests == 2


def test_data_is_not_returned_to_its_in_face(b):
    d1, d2, up = b.faces(3)
    b.route("/a", up)
    b.rx(d1, interest("/a"))
    b.rx(d2, interest("/a"))
    dw = data("/a")
    assert b.raw(d2, dw) == [(d1, dw)]


def test_cs_hit_with_can_be_prefix(b):
    d, up = b.faces(2)
    b.route("/a", up)
    b.rx(d, interest("/a/b/c"))
    dw = data("/a/b/c")
    b.raw(up, dw)
    assert b.raw(d, interest("/a/b", cbp=True)) == [(d, dw)]
    assert brief(b.rx(d, interest("/a/b"))) == [(up, "I", "/a/b")]      # exact: a miss


def full_name(n, wire: bytes) -> list[bytes]:
    """`n` plus the ImplicitSha256DigestComponent of the Data `wire`."""
    return [*name(n), tlv.digest_component(wire)]


def test_a_full_name_interest_takes_only_the_data_of_its_digest(b):
    d, up = b.faces(2)
    b.route("/a", up)
    dw, other = data("/a/b", content=b"one"), data("/a/b", content=b"two")
    wire = interest(full_name("/a/b", dw))
    assert b.raw(d, wire) == [(up, wire)]
    assert b.raw(up, other) == []                     # same name, other bytes: unsolicited
    assert b.fw.counters.unsolicited == 1 and len(b.fw.pit) == 1
    assert b.raw(up, dw) == [(d, dw)]                 # its digest: satisfied
    assert len(b.fw.pit) == 0 and len(b.fw.cs) == 1
    assert b.fw.pit._digest_count == 0                # no such entry left: no more hashing
    # from the CS: the Data whose digest it names, never another; CanBePrefix alike
    assert b.raw(d, interest(full_name("/a/b", dw))) == [(d, dw)]
    assert b.raw(d, interest(full_name("/a/b", dw), cbp=True)) == [(d, dw)]
    assert brief(b.rx(d, interest(full_name("/a/b", other)))) == \
        [(up, "I", uri(full_name("/a/b", other)))]
    assert b.fw.counters.cs_hits == 2


def test_a_generic_component_ending_like_a_digest_is_an_ordinary_name(b):
    d, up = b.faces(2)
    b.route("/a", up)
    tail = b"\x01\x20" + bytes(32)                 # a value whose last 34 bytes look like one
    n = ["a", b"\x08" + bytes([len(tail) + 2]) + b"xy" + tail]
    assert tlv.implicit_digest(nv(n)) is None
    assert tlv.implicit_digest(nv(full_name("/a", data("/a")))) is not None
    b.rx(d, interest(n))
    dw = data(n)
    assert b.raw(up, dw) == [(d, dw)]                 # exact match, no digest involved
    assert b.raw(d, interest(n)) == [(d, dw)]


def hinted(n, *hint: str, nonce: int = 7) -> bytes:
    from ndn.encoding import InterestParam, make_interest
    return bytes(make_interest(name(n), InterestParam(nonce=nonce, forwarding_hint=list(hint))))


def test_a_forwarding_hint_routes_by_its_first_routed_delegation(b):
    d, by_name, isp_x, isp_y = b.faces(4)
    b.route("/a", by_name)
    b.route("/isp/y", isp_y)
    wire = hinted("/a/b", "/isp/x", "/isp/y", nonce=1)
    assert b.raw(d, wire) == [(isp_y, wire)]          # /isp/x has no route: the next one
    b.route("/isp/x", isp_x)
    wire = hinted("/a/c", "/isp/x", "/isp/y", nonce=2)
    assert b.raw(d, wire) == [(isp_x, wire)]
    dw = data("/a/c")
    assert b.raw(isp_x, dw) == [(d, dw)]              # the PIT is by name, as ever
    # no delegation routed: NoRoute, though the name itself has a route (NFD's lookupFib)
    [(face, p)] = b.rx(d, hinted("/a/d", "/isp/z", nonce=3))
    assert (face, p.kind, p.reason) == (d, "N", NACK_NO_ROUTE)


def test_in_the_producer_region_the_hint_is_stripped_and_the_name_routes(b):
    d, by_name, isp = b.faces(3)
    b.route("/a", by_name)
    b.route("/isp", isp)
    b.fw.network_region = [nv("/isp/site")]
    assert b.raw(d, hinted("/a/b", "/isp/site", nonce=4)) == [(by_name, interest("/a/b", nonce=4))]
    # a delegation that is not a prefix of a region name keeps routing by the hint
    wire = hinted("/a/e", "/isp/site/more", nonce=5)
    assert b.raw(d, wire) == [(isp, wire)]


def test_must_be_fresh_with_stale_cs_entry_goes_upstream(b):
    d, up = b.faces(2)
    b.route("/a", up)
    b.rx(d, interest("/a"))
    dw = data("/a", fresh=1000)
    b.raw(up, dw)
    b.later(0.5)
    assert b.raw(d, interest("/a", mbf=True)) == [(d, dw)]
    b.later(0.6)
    assert brief(b.rx(d, interest("/a", mbf=True))) == [(up, "I", "/a")]
    assert b.raw(d, interest("/a")) == [(d, dw)]      # stale is fine without MustBeFresh


def test_unsolicited_data_is_dropped_counted_and_not_cached(b):
    up = b.face()
    assert b.raw(up, data("/a")) == []
    assert b.fw.counters.unsolicited == 1
    assert b.drops(up) == {"unsolicited_data": 1}
    assert len(b.fw.cs) == 0


# ---- Nacks ---------------------------------------------------------------------------------

def test_no_route_nack(b):
    d = b.face()
    wire = interest("/nowhere")
    [(face, p)] = b.rx(d, wire)
    assert (face, p.kind, p.reason, p.net) == (d, "N", NACK_NO_ROUTE, wire)
    assert len(b.fw.pit) == 0
    assert b.fw.counters.out_nacks == 1


def test_duplicate_nonce_from_another_face_is_nacked(b):
    d1, d2, up = b.faces(3)
    b.route("/a", up)
    first = interest("/a", nonce=42)
    b.raw(d1, first)
    b.later(0.05)
    looped = interest("/a", nonce=42, lifetime=2000)
    [(face, p)] = b.rx(d2, looped)
    assert (face, p.kind, p.reason, p.net) == (d2, "N", NACK_DUPLICATE, looped)
    assert b.drops(d2) == {"loop": 1}
    assert pit_faces(b) == [("/a", [d1], [up])]
    # the Interest coming back from the upstream it was sent to is a loop too
    [(face, p)] = b.rx(up, first)
    assert (face, p.kind, p.reason) == (up, "N", NACK_DUPLICATE)


def test_same_nonce_from_the_same_face_is_a_retransmission_not_a_loop(b):
    d, up = b.faces(2)
    b.route("/a", up)
    wire = interest("/a", nonce=7)
    b.raw(d, wire)
    b.later(0.001)
    assert b.raw(d, wire) == []
    assert b.drops(d) == {"retx_suppressed": 1}


def test_dead_nonce_list_detects_a_loop_after_the_entry_was_satisfied(b):
    d1, d2, up = b.faces(3)
    b.route("/a", up)
    b.raw(d1, interest("/a", mbf=True, nonce=99))
    b.raw(up, data("/a", fresh=1000))
    assert len(b.fw.pit) == 0
    b.later(1.0)
    late = interest("/a", mbf=True, nonce=99)         # the CS copy is stale by now
    [(face, p)] = b.rx(d2, late)
    assert (face, p.kind, p.reason, p.net) == (d2, "N", NACK_DUPLICATE, late)
    assert b.drops(d2) == {"loop": 1}
    b.later(5.0)                                      # dead-nonce lifetime (6 s) is over
    b.fw.tick()
    assert len(b.fw.dnl) == 0
    assert b.raw(d2, late) == [(up, late)]


def test_dead_nonce_list_detects_a_loop_after_the_entry_expired(b):
    d1, d2, up = b.faces(3)
    b.route("/a", up)
    b.raw(d1, interest("/a", nonce=98, lifetime=500))
    b.later(0.5)
    b.fw.tick()
    assert len(b.fw.pit) == 0
    [(face, p)] = b.rx(d2, interest("/a", nonce=98))
    assert (face, p.kind, p.reason) == (d2, "N", NACK_DUPLICATE)


def test_satisfied_interest_without_must_be_fresh_leaves_no_dead_nonce(b):
    d1, d2, up = b.faces(3)
    b.route("/a", up)
    b.raw(d1, interest("/a", nonce=97))
    dw = data("/a")
    b.raw(up, dw)
    assert b.raw(d2, interest("/a", nonce=97)) == [(d2, dw)]       # the CS answers


def test_pit_expiry_makes_late_data_unsolicited(b):
    d, up = b.faces(2)
    b.route("/a", up)
    b.raw(d, interest("/a", lifetime=1000))
    b.later(0.999)
    assert len(b.fw.pit) == 1
    b.later(0.001)
    assert b.raw(up, data("/a")) == []                # expired, even before the sweep
    assert b.fw.counters.unsolicited == 1 and b.drops(up) == {"unsolicited_data": 1}
    assert len(b.fw.cs) == 0
    b.fw.tick()
    assert len(b.fw.pit) == 0 and b.fw.counters.unsatisfied == 1


def test_expired_entry_is_replaced_by_a_new_interest(b):
    d, up = b.faces(2)
    b.route("/a", up)
    b.raw(d, interest("/a", lifetime=100))
    b.later(0.2)                                      # expired, not yet swept
    again = interest("/a")
    assert b.raw(d, again) == [(up, again)]
    b.fw.tick()
    assert pit_faces(b) == [("/a", [d], [up])]
    dw = data("/a")
    assert b.raw(up, dw) == [(d, dw)]


def test_upstream_nack_is_propagated_with_its_reason(b):
    d, up = b.faces(2)
    b.route("/a", up)
    wire = interest("/a", nonce=5)
    b.raw(d, lp(wire, token=b"T1"))
    [(face, p)] = b.rx(up, nack(wire, NACK_CONGESTION))
    assert (face, p.kind, p.reason, p.token, p.net) == (d, "N", NACK_CONGESTION, b"T1", wire)
    assert len(b.fw.pit) == 0


def test_nack_waits_for_every_upstream_and_takes_the_least_severe_reason(b):
    d, up1, up2 = b.faces(3)
    b.route("/a", up1, cost=1)
    b.route("/a", up2, cost=2)
    i1 = interest("/a")
    b.raw(d, i1)
    b.later(0.011)
    i2 = interest("/a")
    assert b.raw(d, i2) == [(up2, i2)]
    assert b.raw(up2, nack(i2, NACK_NO_ROUTE)) == []  # up1 may still answer
    [(face, p)] = b.rx(up1, nack(i1, NACK_DUPLICATE))
    assert (face, p.kind, p.reason, p.net) == (d, "N", NACK_DUPLICATE, i2)


def test_stale_or_unknown_nacks_are_dropped(b):
    d, up, other = b.faces(3)
    b.route("/a", up)
    b.raw(d, interest("/a", nonce=1))
    assert b.raw(up, nack(interest("/a", nonce=2), NACK_NO_ROUTE)) == []
    assert b.raw(other, nack(interest("/a", nonce=1), NACK_NO_ROUTE)) == []
    assert b.raw(up, nack(interest("/zz", nonce=1), NACK_NO_ROUTE)) == []
    assert b.drops(up) == {"nack_stale": 1, "nack_no_pit": 1}
    assert b.drops(other) == {"nack_stale": 1}
    assert pit_faces(b) == [("/a", [d], [up])]


def test_upstream_nack_with_an_unknown_large_reason_does_not_crash(b):
    d, up = b.faces(2)
    b.route("/a", up)
    wire = interest("/a")
    b.raw(d, wire)
    out = b.rx(up, nack(wire, 300))
    assert [(f, p.kind) for f, p in out] == [(d, "N")]
    assert out[0][1].reason in (300, 0)    # passed through, or read as NONE as ndn-cxx does


# ---- PIT tokens ----------------------------------------------------------------------------

def test_pit_token_echoed_on_data_per_downstream(b):
    d1, d2, d3, up = b.faces(4)
    b.route("/a", up)
    first = interest("/a")
    assert b.raw(d1, lp(first, token=b"one")) == [(up, first)]    # not sent upstream
    b.raw(d2, lp(interest("/a"), token=b"two"))
    b.raw(d3, interest("/a"))
    dw = data("/a")
    out = {f: p for f, p in b.rx(up, dw)}
    assert {f: (p.kind, p.token, p.net) for f, p in out.items()} == {
        d1: ("D", b"one", dw), d2: ("D", b"two", dw), d3: ("D", None, dw)}
    [(face, p)] = b.rx(d1, lp(interest("/a"), token=b"cs"))       # CS hit
    assert (face, p.kind, p.token, p.net) == (d1, "D", b"cs", dw)


def test_pit_token_echoed_on_nack(b):
    d = b.face()
    wire = interest("/nowhere")
    [(face, p)] = b.rx(d, lp(wire, token=b"\x00\x01"))
    assert (face, p.kind, p.reason, p.token, p.net) == (d, "N", NACK_NO_ROUTE, b"\x00\x01", wire)


def test_pit_token_echoed_on_duplicate_nack(b):
    d1, d2, up = b.faces(3)
    b.route("/a", up)
    b.raw(d1, interest("/a", nonce=3))
    [(face, p)] = b.rx(d2, lp(interest("/a", nonce=3), token=b"dup"))
    assert (face, p.kind, p.reason, p.token) == (d2, "N", NACK_DUPLICATE, b"dup")


# ---- scope and hop limit -------------------------------------------------------------------

def test_localhost_interest_from_non_local_face_is_dropped(b):
    remote = b.face(local=False)
    app, other_app = b.faces(2, local=True)
    b.route("/localhost/x", other_app)
    assert b.raw(remote, interest("/localhost/x")) == []
    assert b.drops(remote) == {"localhost_scope": 1}
    wire = interest("/localhost/x")
    assert b.raw(app, wire) == [(other_app, wire)]
    assert b.raw(remote, data("/localhost/x")) == []  # nor Data
    assert b.drops(remote) == {"localhost_scope": 2}
    dw = data("/localhost/x")
    assert b.raw(other_app, dw) == [(app, dw)]


def test_localhost_interest_never_leaves_on_a_non_local_face(b):
    app = b.face(local=True)
    remote = b.face(local=False)
    b.route("/localhost", remote)
    [(face, p)] = b.rx(app, interest("/localhost/y"))
    assert (face, p.kind, p.reason) == (app, "N", NACK_NO_ROUTE)


def test_hop_limit_zero_from_non_local_face_is_dropped(b):
    d, up = b.faces(2)
    b.route("/a", up)
    assert b.raw(d, interest("/a", hop=0)) == []
    assert b.drops(d) == {"hop_limit": 1}
    assert len(b.fw.pit) == 0


def test_hop_limit_decremented_when_forwarded(b):
    d, up = b.faces(2)
    b.route("/a", up)
    wire = interest("/a", nonce=11, hop=5)
    [(face, sent)] = b.raw(d, wire)
    assert face == up and sent == with_hop(wire, 4)
    assert parse_out(sent).hop == 4


def test_hop_limit_one_can_reach_a_local_face(b):
    d = b.face(local=False)
    app = b.face(local=True)
    b.route("/a", app)
    wire = interest("/a", hop=1)
    assert b.raw(d, wire) == [(app, with_hop(wire, 0))]


def test_hop_limit_zero_from_a_local_face_is_dropped_as_nfd_does(b):
    app, producer = b.faces(2, local=True)
    b.route("/a", producer)
    assert b.raw(app, interest("/a", hop=0)) == []


def test_hop_limit_one_does_not_leave_on_a_non_local_face(b):
    d, up = b.faces(2)
    b.route("/a", up)
    out = b.rx(d, interest("/a", hop=1))
    assert [f for f, p in out if p.kind == "I"] == []


# ---- multicast -----------------------------------------------------------------------------

def test_multicast_sends_to_every_next_hop(b):
    d, up1, up2, up3, d2 = b.faces(5)
    b.fw.strategy_choice.set(nv("/m"), depth("/m"), Multicast())
    for f, cost in [(up1, 3), (up2, 1), (up3, 2), (d, 0)]:
        b.route("/m", f, cost)
    wire = interest("/m/x")
    out = b.raw(d, wire)
    assert sorted(out) == sorted([(up1, wire), (up2, wire), (up3, wire)])   # not back to d
    b.later(0.005)
    again = interest("/m/x")
    assert b.raw(d2, again) == [(d, again)]           # per-upstream suppression: only d is new
    b.later(0.004)
    assert b.raw(d2, interest("/m/x")) == []
    assert b.drops(d2) == {"retx_suppressed": 1}
    b.later(0.011)
    assert sorted(f for f, _ in b.raw(d2, interest("/m/x"))) == sorted([up1, up2, up3, d])
    dw = data("/m/x")
    assert sorted(b.raw(up3, dw)) == sorted([(d, dw), (d2, dw)])
    assert brief(b.rx(d, interest("/b/x"))) == [(d, "N", "/b/x")]   # outside /m: best-route


# ---- faces ---------------------------------------------------------------------------------

def test_face_removal_cleans_pit_routes_and_persistent_entries(b):
    d1, d2, up = b.faces(3)
    b.fw.rib.add(nv("/a"), 1, Route(up, 0, 0, CHILD_INHERIT, None))
    b.fw.rib.add(nv("/ps"), 1, Route(up, 0, 0, CHILD_INHERIT, None))
    b.raw(d1, interest("/a/1"))
    b.raw(d1, interest("/a/2"))
    b.raw(d2, interest("/a/2"))
    b.raw(d1, interest("/*insert*/ps/t"))
    assert len(b.fw.ppit) == 1
    b.fw.remove_face(d1)
    assert pit_faces(b) == [("/a/2", [d2], [up])]
    assert len(b.fw.ppit) == 0
    assert b.raw(d1, interest("/a/3")) == []          # a closed face is ignored
    b.fw.remove_face(up)
    assert len(b.fw.fib) == 0 and len(b.fw.rib) == 0
    assert pit_faces(b) == [("/a/2", [d2], [])]
    [(face, p)] = b.rx(d2, interest("/a/9"))
    assert (face, p.kind, p.reason) == (d2, "N", NACK_NO_ROUTE)
    b.fw.remove_face(up)                              # twice: harmless
    b.fw.remove_face(INTERNAL_FACE)                   # never removed
    assert b.fw.faces.get(INTERNAL_FACE) is not None


def test_interest_to_management_and_its_reply(b):
    app = b.face(local=True)
    asked: list = []
    install(b.fw, lambda sent, in_face: asked.append((sent, in_face)))
    wire = interest("/localhost/nfd/status", nonce=8)
    assert b.raw(app, wire) == []
    (sent, in_face), = asked                          # the object, not bytes; who asked
    assert isinstance(sent, Interest) and sent.wire == wire and in_face == app
    reply = data("/localhost/nfd/status")
    assert b.raw(INTERNAL_FACE, reply) == [(app, reply)]


# ---- robustness ----------------------------------------------------------------------------

def snapshot(b: Bench):
    c = b.fw.counters
    return (len(b.fw.pit), len(b.fw.cs), len(b.fw.fib), len(b.fw.ppit), len(b.fw.dnl),
            c.out_interests, c.out_data, c.out_nacks, c.satisfied, c.unsolicited)


BAD_NAME = tlv.encode_tlv(tlv.INTEREST, tlv.encode_tlv(tlv.NAME, b"\x08\x05ab") +
                          tlv.encode_tlv(tlv.NONCE, b"1234"))


@pytest.mark.parametrize("wire,reason", [
    (b"\x05\x01", "malformed"),
    (b"\xff\xff\xff", "malformed"),
    (b"", "malformed"),
    (BAD_NAME, "malformed"),
    (tlv.encode_tlv(tlv.DATA, tlv.encode_tlv(tlv.NAME, b"\x08\x09ab")), "malformed"),
    (lp(None), "lp_idle"),
    (lp(data("/a"), headers=[(tlv.LP_FRAG_COUNT, b"\x02")]), "lp_fragment"),
])
def test_malformed_packet_is_dropped_and_counted_without_effect(b, wire, reason):
    d, up = b.faces(2)
    b.route("/a", up)
    b.raw(d, interest("/a/pending"))
    before = snapshot(b)
    assert b.raw(d, wire) == []
    assert b.drops(d) == {reason: 1}
    assert snapshot(b) == before
    dw = data("/a/pending")
    assert b.raw(up, dw) == [(d, dw)]                 # the forwarder still works


def test_pit_full_drops_and_counts():
    b = Bench(pit_entries=1)
    d, up = b.faces(2)
    b.route("/a", up)
    b.raw(d, interest("/a/1"))
    assert b.raw(d, interest("/a/2")) == []
    assert b.drops(d) == {"pit_full": 1}
    assert len(b.fw.pit) == 1
    b.raw(up, data("/a/1"))
    assert brief(b.rx(d, interest("/a/2"))) == [(up, "I", "/a/2")]


def test_unknown_face_is_ignored(b):
    assert b.raw(4242, interest("/a")) == []


def test_data_skips_downstreams_whose_interest_expired(b):
    d1, d2, up = b.faces(3)
    b.route("/a", up)
    b.raw(d1, interest("/a", lifetime=100))
    b.raw(d2, interest("/a", lifetime=4000))
    b.later(1.0)
    dw = data("/a")
    assert b.raw(up, dw) == [(d2, dw)]


FUZZ_SEEDS = [
    interest("/a/b", hop=3), interest("/ps/t", cbp=True, mbf=True),
    interest("/*insert*/ps/t"), data("/a/b", fresh=10), data("/*distribute*/ps/t"),
    lp(interest("/a"), token=b"tk"), nack(interest("/a", nonce=1), NACK_NO_ROUTE),
]


@given(st.lists(st.tuples(st.integers(0, 2), st.sampled_from(FUZZ_SEEDS),
                          st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)),
                                   max_size=3)), max_size=12))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_on_receive_never_raises(events):
    b = Bench()
    faces = b.faces(3)
    b.route("/a", faces[1])
    b.route("/ps", faces[2])
    for which, seed, edits in events:
        buf = bytearray(seed)
        for i, v in edits:
            buf[i % len(buf)] = v
        for face, wire in b.raw(faces[which], bytes(buf)):
            assert face in faces and isinstance(wire, bytes)
        b.later(0.004)
