"""Persistent PIT rules of the forwarder (docs/design.md, "Forwarder semantics beyond NFD"):
`*insert*` / `*remove*` Interests and pushed `*distribute*` Data, sans-I/O on a fake clock."""
from __future__ import annotations

import pytest
from ndn.encoding import Component

from ndnps.ndn.packet import NACK_DUPLICATE, NACK_NO_ROUTE
from ndnps.ndn.tlv import name_to_str

from tests.support.fwkit import DISTRIBUTE, INSERT, REMOVE, Bench, data, interest, lp, marked, vs

INS = marked(INSERT, "/ps/t")            # /*insert*/ps/t
REM = marked(REMOVE, "/ps/t")            # /*remove*/ps/t
CONFIRM = marked(DISTRIBUTE, "/ps/t")    # /*distribute*/ps/t


def members(b: Bench) -> dict[str, list[int]]:
    """Persistent entries: prefix URI -> member faces."""
    return {name_to_str(e.prefix): sorted(e.faces) for e in b.fw.ppit.entries()}


def push(b: Bench, from_face: int, v: int = 1, s: int = 0, prefix: str = "/ps/t") -> tuple:
    """A pushed segment arrives on `from_face`: (its bytes, sorted [(face, bytes)] sent)."""
    wire = data(vs(prefix, v, s), fresh=1000, content=b"params %d/%d" % (v, s))
    return wire, sorted(b.raw(from_face, wire))


@pytest.fixture
def net():
    """A forwarder with the PS upstream and three worker faces; only /ps has a route."""
    b = Bench()
    ps = b.face()
    w1, w2, w3 = b.faces(3)
    b.route("/ps", ps)
    return b, ps, w1, w2, w3


def register(b: Bench, ps: int, *workers: int, prefix: str = "/ps/t") -> None:
    """Each worker inserts and the PS confirms."""
    for w in workers:
        wire = interest(marked(INSERT, prefix))
        assert b.raw(w, wire) == [(ps, wire)]
        conf = data(marked(DISTRIBUTE, prefix), content=b"")
        assert (w, conf) in b.raw(ps, conf)


# ---- insert --------------------------------------------------------------------------------

def test_insert_joins_the_entry_and_is_routed_by_the_stripped_name(net):
    b, ps, w1, _, _ = net
    wire = interest(INS)
    assert b.raw(w1, wire) == [(ps, wire)]            # via the FIB entry of /ps
    assert members(b) == {"/ps/t": [w1]}
    assert len(b.fw.pit) == 1                         # and an ordinary PIT entry


def test_insert_without_a_route_for_the_stripped_name_is_nacked():
    b = Bench()
    w = b.face()
    b.route("/*insert*/ps", b.face())                 # a route for the marker name is not used
    [(face, p)] = b.rx(w, interest(INS))
    assert (face, p.kind, p.reason) == (w, "N", NACK_NO_ROUTE)


def test_confirmation_satisfies_the_insert_exactly_once(net):
    b, ps, w1, _, w3 = net
    b.raw(w1, lp(interest(INS), token=b"reg"))
    conf = data(CONFIRM, content=b"")
    [(face, p)] = b.rx(ps, conf)                      # w1 is a member AND has the PIT entry
    assert (face, p.kind, p.token, p.net) == (w1, "D", b"reg", conf)
    assert len(b.fw.pit) == 0
    assert b.fw.counters.satisfied == 1


def test_inserts_from_several_workers_are_aggregated(net):
    b, ps, w1, w2, _ = net
    first = interest(INS)
    assert b.raw(w1, first) == [(ps, first)]
    assert b.raw(w2, interest(INS)) == []             # pending: one insert upstream per link
    assert members(b) == {"/ps/t": [w1, w2]}
    conf = data(CONFIRM, content=b"")
    assert sorted(b.raw(ps, conf)) == sorted([(w1, conf), (w2, conf)])


def test_refresh_insert_is_forwarded_again(net):
    b, ps, w1, _, _ = net
    register(b, ps, w1)
    b.later(30.0)
    again = interest(INS)
    assert b.raw(w1, again) == [(ps, again)]          # refreshes upstream soft state too
    assert members(b) == {"/ps/t": [w1]}


# ---- push ----------------------------------------------------------------------------------

def test_push_goes_to_every_member_once_never_to_others(net):
    b, ps, w1, w2, w3 = net
    register(b, ps, w1, w2)
    c = b.fw.counters
    before = (c.pushes_in, c.pushes_out, b.counters(w1).out_distribute,
              b.counters(ps).in_distribute)
    for v in range(3):
        wire, out = push(b, ps, v=v)
        assert out == sorted([(w1, wire), (w2, wire)])    # not w3, never back to ps
    assert b.counters(w3).out_data == 0
    after = (c.pushes_in, c.pushes_out, b.counters(w1).out_distribute,
             b.counters(ps).in_distribute)
    assert [y - x for x, y in zip(before, after)] == [3, 6, 3, 3]
    assert members(b) == {"/ps/t": [w1, w2]}              # not consumed


def test_push_is_not_sent_back_to_its_in_face(net):
    b, ps, w1, w2, _ = net
    register(b, ps, w1, w2)
    wire, out = push(b, w1)
    assert out == [(w2, wire)]


def test_push_uses_the_longest_persistent_entry(net):
    b, ps, w1, w2, w3 = net
    register(b, ps, w1)
    register(b, ps, w3, prefix="/ps")
    wire, out = push(b, ps, prefix="/ps/t")
    assert out == [(w1, wire)]
    wire, out = push(b, ps, prefix="/ps/u")
    assert out == [(w3, wire)]


def test_push_reaches_a_member_with_a_probe_pending_exactly_once(net):
    b, ps, w1, w2, w3 = net
    b.route("/*distribute*/ps", ps)                   # probes routable whatever the rule
    register(b, ps, w1, w2)
    probe = interest(vs("/ps/t", 1, 0))
    assert b.raw(w1, lp(probe, token=b"p1")) == [(ps, probe)]
    assert b.raw(w3, interest(vs("/ps/t", 1, 0))) == []   # aggregated (w3 is no member)
    wire, out = push(b, ps)
    assert [f for f, _ in out] == sorted([w1, w2, w3])     # each face once
    assert dict(out) == {w1: lp(wire, token=b"p1"), w2: wire, w3: wire}
    assert len(b.fw.pit) == 0                              # the probes are satisfied
    assert members(b) == {"/ps/t": [w1, w2]}               # w3 did not become a member


def test_push_is_cached_and_answers_a_later_probe(net):
    b, ps, w1, _, w3 = net
    register(b, ps, w1)
    wire, _ = push(b, ps, v=4, s=2)
    out_before = b.counters(ps).out_interests
    assert b.raw(w3, interest(vs("/ps/t", 4, 2))) == [(w3, wire)]
    probe_prefix = vs("/ps/t", 4, 2)[:-1]                  # /*distribute*/ps/t/v=4, CanBePrefix
    assert b.raw(w1, interest(probe_prefix, cbp=True)) == [(w1, wire)]
    assert b.counters(ps).out_interests == out_before     # the PS saw nothing


def test_distribute_with_no_entry_at_all_is_unsolicited(net):
    b, ps, *_ = net
    wire, out = push(b, ps)
    assert out == []
    assert b.fw.counters.unsolicited == 1 and b.drops(ps) == {"unsolicited_data": 1}
    assert len(b.fw.cs) == 0


# ---- soft state, leave, close --------------------------------------------------------------

def test_membership_is_soft_state():
    b = Bench(ppit_lifetime=10.0)
    ps, w1, w2 = b.faces(3)
    b.route("/ps", ps)
    register(b, ps, w1)
    b.later(5.0)
    register(b, ps, w2)
    b.later(4.0)
    register(b, ps, w1)                                    # w1 refreshes at t=9
    b.later(2.0)                                           # t=11: nobody lapsed
    wire, out = push(b, ps, v=1)
    assert out == sorted([(w1, wire), (w2, wire)])
    b.later(4.0)                                           # t=15: w2 lapsed (joined at 5)
    wire, out = push(b, ps, v=2)
    assert out == [(w1, wire)]                             # even before the sweep
    b.fw.tick()
    assert members(b) == {"/ps/t": [w1]}
    b.later(5.0)                                           # t=20: w1 lapsed (refreshed at 9)
    b.fw.tick()
    assert members(b) == {}
    wire, out = push(b, ps, v=3)
    assert out == [] and b.fw.counters.unsolicited == 1


def test_remove_takes_the_face_out(net):
    b, ps, w1, w2, _ = net
    register(b, ps, w1, w2)
    assert b.raw(w1, interest(REM)) == []                  # w2 is left: not forwarded
    assert members(b) == {"/ps/t": [w2]}
    wire, out = push(b, ps)
    assert out == [(w2, wire)]
    last = interest(REM)
    assert b.raw(w2, last) == [(ps, last)]                 # the last one leaves: upstream
    assert members(b) == {}


def test_remove_of_one_worker_keeps_the_link_upstream():
    """Two forwarders: edge (w1, w2) -> core (PS). w1 leaving must not cut w2 off."""
    edge, core = Bench(), Bench()
    w1, w2, e_up = edge.faces(3)
    c_from_edge, ps = core.faces(2)
    edge.route("/ps", e_up)
    core.route("/ps", ps)
    conf = data(CONFIRM, content=b"")
    for w in (w1, w2):
        ins = interest(INS)
        [(face, wire)] = edge.raw(w, ins)
        assert face == e_up
        assert core.raw(c_from_edge, wire) == [(ps, wire)]
        assert core.raw(ps, conf) == [(c_from_edge, conf)]
        assert (w, conf) in edge.raw(e_up, conf)
    for out in edge.raw(w1, interest(REM)):
        assert out[0] == e_up
        core.raw(c_from_edge, out[1])
    wire = data(vs("/ps/t", 1, 0))
    assert core.raw(ps, wire) == [(c_from_edge, wire)]
    assert edge.raw(e_up, wire) == [(w2, wire)]


def test_one_copy_per_link_across_two_forwarders():
    edge, core = Bench(), Bench()
    w1, w2, e_up = edge.faces(3)
    c_from_edge, ps, w3 = core.faces(3)
    edge.route("/ps", e_up)
    core.route("/ps", ps)
    first = interest(INS)
    assert edge.raw(w1, first) == [(e_up, first)]
    assert edge.raw(w2, interest(INS)) == []               # aggregated at the edge
    assert core.raw(c_from_edge, first) == [(ps, first)]
    assert core.raw(w3, interest(INS)) == []               # aggregated at the core
    assert members(edge) == {"/ps/t": [w1, w2]}
    assert members(core) == {"/ps/t": [c_from_edge, w3]}
    wire = data(vs("/ps/t", 7, 0))
    assert sorted(core.raw(ps, wire)) == sorted([(c_from_edge, wire), (w3, wire)])
    assert sorted(edge.raw(e_up, wire)) == sorted([(w1, wire), (w2, wire)])


def test_closed_face_leaves_every_entry(net):
    b, ps, w1, w2, _ = net
    register(b, ps, w1, w2)
    register(b, ps, w1, prefix="/ps/u")
    b.fw.remove_face(w1)
    assert members(b) == {"/ps/t": [w2]}
    wire, out = push(b, ps)
    assert out == [(w2, wire)]
    wire, out = push(b, ps, prefix="/ps/u")
    assert out == []


# ---- bounds --------------------------------------------------------------------------------

@pytest.mark.parametrize("limits,reason", [
    (dict(ppit_entries_per_face=1), "ppit_face_quota"),
    (dict(ppit_entries=1), "ppit_table_full"),
])
def test_caps_refuse_and_count(limits, reason):
    b = Bench(**limits)
    ps, w1 = b.faces(2)
    b.route("/ps", ps)
    register(b, ps, w1, prefix="/ps/a")
    assert b.raw(w1, interest(marked(INSERT, "/ps/b"))) == []   # refused: not forwarded
    assert b.drops(w1) == {reason: 1}
    assert members(b) == {"/ps/a": [w1]}
    wire, out = push(b, ps, prefix="/ps/b")
    assert out == []


def test_faces_per_entry_cap():
    b = Bench(ppit_faces_per_entry=1)
    ps, w1, w2 = b.faces(3)
    b.route("/ps", ps)
    register(b, ps, w1)
    assert b.raw(w2, interest(INS)) == []
    assert b.drops(w2) == {"ppit_entry_full": 1}
    assert members(b) == {"/ps/t": [w1]}


def test_insert_rate_limit():
    b = Bench(ppit_inserts_per_face_per_s=2.0)
    ps, w1 = b.faces(2)
    b.route("/ps", ps)
    sent = [b.raw(w1, interest(marked(INSERT, f"/ps/{i}"))) for i in range(3)]
    assert [len(s) for s in sent] == [1, 1, 0]
    assert b.drops(w1) == {"ppit_rate_limited": 1}
    assert sorted(members(b)) == ["/ps/0", "/ps/1"]


@pytest.mark.parametrize("n,reason", [
    ([bytes(Component.from_bytes(b"*insert*"))], "ppit_empty_prefix"),
    (marked(INSERT, "/" + "/".join(str(i) for i in range(40))), "ppit_too_deep"),
])
def test_unusable_insert_names_are_refused(net, n, reason):
    b, ps, w1, _, _ = net
    assert b.raw(w1, interest(n)) == []
    assert b.drops(w1) == {reason: 1}
    assert members(b) == {}


# ---- known gaps ----------------------------------------------------------------------------

def test_probe_is_routed_by_the_stripped_name(net):
    b, ps, w1, _, _ = net
    probe = interest(vs("/ps/t", 3, 1))
    assert b.raw(w1, probe) == [(ps, probe)]


def test_looping_insert_does_not_join(net):
    b, ps, w1, w2, _ = net
    ins = interest(INS, nonce=1234)
    b.raw(w1, ins)
    [(face, p)] = b.rx(w2, ins)                            # the same Interest, looped back
    assert (face, p.kind, p.reason) == (w2, "N", NACK_DUPLICATE)
    assert members(b) == {"/ps/t": [w1]}


def test_a_probe_answer_is_not_pushed_again_where_the_push_already_passed(net):
    """The PS answers a probe with the same Data it pushed: a forwarder that holds it already
    (here stale, so the MustBeFresh probe went upstream) sends it only to the prober."""
    b, ps, w1, w2, w3 = net
    b.route("/*distribute*/ps", ps)
    register(b, ps, w1, w2, w3)
    wire = data(vs("/ps/t", 1, 0), fresh=10)
    assert [f for f, _ in sorted(b.raw(ps, wire))] == [w1, w2, w3]
    b.later(1.0)
    probe = interest(vs("/ps/t", 1, 0), mbf=True)
    assert b.raw(w2, probe) == [(ps, probe)]
    assert b.raw(ps, wire) == [(w2, wire)]                 # the answer: to the prober only
    assert b.raw(ps, wire) == []                           # a repeat with no one asking
    assert b.drops(ps) == {"unsolicited_data": 1}


def test_a_copy_lost_above_a_forwarder_is_pushed_again_below_it():
    """Two forwarders; the push never reached the edge. A probe from one worker there fetches
    it from the core's CS, and the edge pushes it to all its members, who all missed it."""
    edge, core = Bench(), Bench()
    w1, w2, e_up = edge.faces(3)
    c_from_edge, ps = core.faces(2)
    edge.route("/ps", e_up)
    core.route("/ps", ps)
    first = interest(INS)
    edge.raw(w1, first)
    edge.raw(w2, interest(INS))
    core.raw(c_from_edge, first)
    wire = data(vs("/ps/t", 3, 1))
    assert core.raw(ps, wire) == [(c_from_edge, wire)]     # ... and lost on the link
    probe = interest(vs("/ps/t", 3, 1))
    assert edge.raw(w1, probe) == [(e_up, probe)]
    assert core.raw(c_from_edge, probe) == [(c_from_edge, wire)]   # the core's CS answers
    assert sorted(edge.raw(e_up, wire)) == sorted([(w1, wire), (w2, wire)])


def test_other_bytes_under_a_held_name_are_pushed_again_and_replace_the_cached_copy(net):
    """A restarted PS that makes a version again differently (another set of gradients) pushes
    other bytes under the same name: a new object, so every member gets it, and a later probe
    is answered with it, not with the first incarnation's segment."""
    b, ps, w1, w2, w3 = net
    register(b, ps, w1, w2, w3)
    first = data(vs("/ps/t", 4, 0), fresh=1000, content=b"incarnation 1")
    again = data(vs("/ps/t", 4, 0), fresh=1000, content=b"incarnation 2")
    assert [f for f, _ in sorted(b.raw(ps, first))] == [w1, w2, w3]
    assert sorted(b.raw(ps, again)) == [(w1, again), (w2, again), (w3, again)]
    assert b.raw(ps, again) == []               # the same bytes once more: no one asked
    assert b.raw(w2, interest(vs("/ps/t", 4, 0))) == [(w2, again)]
