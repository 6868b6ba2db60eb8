"""NDNLPv2 CongestionMark carried end to end (docs/congestion.md): the codec, the forwarder passing
a packet's mark on to the next hop (sans-I/O, fake clock), and the app reading and counting it.
Marks are set the way a congested face sets them (ndnps.ndn.congestion), and what the forwarder
sends is read back by python-ndn too."""
from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ndn.appv2 import InterestTreeNode, NDNApp
from ndn.appv2 import pass_all as pyndn_pass_all
from ndn.encoding import InterestParam, make_interest, parse_data
from ndn.encoding.ndnlp_v2 import parse_lp_packet_v2
from ndn.transport.dummy_face import DummyFace

from ndnps.forwarder.strategy import Multicast
from ndnps.client import wire as client_wire
from ndnps.client.app import App
from ndnps.client.errors import InterestNack
from ndnps.client.security import HmacSigner, Security, pass_all
from ndnps.ndn import tlv
from ndnps.ndn.congestion import congestion_mark, set_congestion_mark
from ndnps.ndn.packet import (NACK_CONGESTION, NACK_NO_ROUTE, Data, Interest, Nack, data_for,
                              decode, lp_wrap, nack_for, with_nonce, without_forwarding_hint)
from ndnps.protocol import names

from tests.support.fwkit import (DISTRIBUTE, INSERT, Bench, data, depth, interest, lp, marked,
                                 nack, nv, parse_out, vs)

pytestmark = pytest.mark.looptime       # the app tests' loop: a fake clock, no wall time


def header_types(wire: bytes) -> list[int]:
    """The TLV-TYPEs of an LpPacket's fields, in order."""
    _, off, end = tlv.read_tl(wire, 0, len(wire))
    types = []
    while off < end:
        typ, _, off = tlv.read_tl(wire, off, end)
        types.append(typ)
    return types


def assert_ndnlp_order(wire: bytes) -> None:
    """Header fields in increasing TLV-TYPE order, the Fragment last (ndn-cxx's rule)."""
    types = header_types(wire)
    assert types[-1] == tlv.LP_FRAGMENT and types[:-1] == sorted(set(types[:-1])), types


# ---- codec ----------------------------------------------------------------------------------

@pytest.mark.parametrize("token", [None, b"\x01\x02"])
@pytest.mark.parametrize("reason", [None, NACK_CONGESTION])
@pytest.mark.parametrize("mark", [1, 7, 300])
def test_lp_wrap_emits_the_mark_in_field_order_and_both_decoders_read_it(token, reason, mark):
    inner = interest("/a", nonce=1)
    wire = lp_wrap(inner, token, reason, mark)
    assert_ndnlp_order(wire)
    assert congestion_mark(wire) == mark
    theirs = parse_lp_packet_v2(wire)                       # python-ndn reads every field
    assert (theirs.congestion_mark, theirs.pit_token and bytes(theirs.pit_token),
            bytes(theirs.fragment)) == (mark, token, inner)
    back = decode(wire)
    if reason is None:
        assert isinstance(back, Interest) and back.wire == inner
    else:
        assert isinstance(back, Nack) and back.reason == reason and back.interest.wire == inner
    assert back.congestion_mark == mark


def test_congestion_mark_is_read_among_the_header_fields_before_the_fragment_only():
    inner = data("/a")
    seq = tlv.encode_tlv(tlv.LP_SEQUENCE, bytes(8))
    marked = tlv.encode_tlv(tlv.LP_PACKET, seq + tlv.encode_tlv(tlv.LP_PIT_TOKEN, b"t")
                            + tlv.nonneg_element(tlv.LP_CONGESTION_MARK, 2)
                            + tlv.encode_tlv(tlv.LP_FRAGMENT, inner))
    assert congestion_mark(marked) == congestion_mark(memoryview(marked)) == 2
    after = tlv.encode_tlv(tlv.LP_PACKET, seq + tlv.encode_tlv(tlv.LP_FRAGMENT, inner)
                           + tlv.nonneg_element(tlv.LP_CONGESTION_MARK, 2))
    assert congestion_mark(after) == 0                      # after the Fragment: not a header
    assert congestion_mark(inner) == congestion_mark(interest("/a")) == congestion_mark(b"") == 0
    with pytest.raises(tlv.DecodeError):
        congestion_mark(marked[:-1])


@pytest.mark.parametrize("token", [None, b"tok"])
def test_the_forwarders_encoding_and_a_faces_marking_are_the_same_bytes(token):
    """A Data marked by the face on its way out (set_congestion_mark) and one passed on marked
    by the pipelines (data_for) cannot be told apart."""
    inner = data("/d")
    assert lp_wrap(inner, token, None, 1) == set_congestion_mark(data_for(decode(inner), token))
    assert lp_wrap(inner, token, NACK_NO_ROUTE, 1) == set_congestion_mark(
        lp_wrap(inner, token, NACK_NO_ROUTE))


def test_bare_and_unmarked_packets_decode_unmarked_and_forward_as_the_same_object():
    for wire in (interest("/a"), data("/a"), lp(data("/a"), token=b"t")):
        assert decode(wire).congestion_mark == 0
    dw = data("/d")
    pkt = decode(dw)
    assert data_for(pkt, None) is pkt.wire
    assert decode(nack(interest("/a"), NACK_NO_ROUTE)).congestion_mark == 0


def test_a_marked_data_forwards_its_bare_bytes_with_the_mark():
    dw = data("/d", fresh=10)
    pkt = decode(set_congestion_mark(lp(dw, token=b"up")))
    assert isinstance(pkt, Data) and (pkt.wire, pkt.pit_token, pkt.congestion_mark) == (
        dw, b"up", 1)
    out = data_for(pkt, None)
    assert_ndnlp_order(out)
    assert (congestion_mark(out), header_types(out)) == (1, [tlv.LP_CONGESTION_MARK,
                                                            tlv.LP_FRAGMENT])
    assert header_types(data_for(pkt, b"down")) == [tlv.LP_PIT_TOKEN, tlv.LP_CONGESTION_MARK,
                                                    tlv.LP_FRAGMENT]


@pytest.mark.parametrize("value", [b"", b"\x00\x01\x02", bytes(9)])
def test_a_malformed_mark_makes_the_packet_malformed(value):
    with pytest.raises(tlv.DecodeError):
        decode(lp(data("/a"), headers=[(tlv.LP_CONGESTION_MARK, value)]))


def test_an_interest_keeps_its_mark_through_hop_limit_nonce_and_hint_rewrites():
    wire = bytes(make_interest("/a", InterestParam(hop_limit=5, nonce=None,
                                                   forwarding_hint=["/h"])))
    pkt = decode(set_congestion_mark(wire, 3))
    assert isinstance(pkt, Interest)
    for rewritten in (with_nonce(pkt), without_forwarding_hint(pkt)):
        assert rewritten.congestion_mark == 3
    out = pkt.wire_for_forwarding()
    assert_ndnlp_order(out)
    fwd = decode(out)
    assert isinstance(fwd, Interest) and (fwd.congestion_mark, fwd.hop_limit) == (3, 4)
    plain = decode(interest("/a", hop=5))
    assert isinstance(plain, Interest) and plain.wire_for_forwarding()[0] == tlv.INTEREST


def test_nack_for_carries_a_given_mark():
    inner = interest("/n", nonce=9)
    wire = nack_for(decode(inner), NACK_CONGESTION, b"tk", 1)
    assert_ndnlp_order(wire)
    out = parse_out(wire)
    assert (out.kind, out.reason, out.token, out.net, congestion_mark(wire)) == (
        "N", NACK_CONGESTION, b"tk", inner, 1)


# ---- the forwarder passes the mark on ---------------------------------------------------------

@pytest.fixture
def b() -> Bench:
    return Bench()


def test_pulled_data_keeps_its_mark_to_each_downstream_but_not_in_the_cs(b):
    d1, d2, up = b.faces(3)
    b.route("/a", up)
    b.raw(d1, lp(interest("/a"), token=b"one"))
    b.raw(d2, interest("/a"))
    dw = data("/a", fresh=10000)
    out = dict(b.raw(up, set_congestion_mark(dw)))
    assert {f: (parse_out(w).token, parse_out(w).net, congestion_mark(w))
            for f, w in out.items()} == {d1: (b"one", dw, 1), d2: (None, dw, 1)}
    for w in out.values():
        assert_ndnlp_order(w)
    [(face, hit)] = b.raw(d2, interest("/a"))                  # from the CS: no stale mark
    assert (face, hit) == (d2, dw)


def test_unmarked_data_still_leaves_as_the_received_bytes(b):
    d, up = b.faces(2)
    b.route("/a", up)
    b.raw(d, interest("/a"))
    dw = data("/a")
    [(face, out)] = b.raw(up, dw)
    assert face == d and out is dw


def test_a_marked_push_is_marked_on_every_persistent_face_and_probe(b):
    ps = b.face()
    workers = b.faces(3)
    b.route("/ps", ps)
    for w in workers:
        b.raw(w, interest(marked(INSERT, "/ps/t")))
        b.raw(ps, data(marked(DISTRIBUTE, "/ps/t"), content=b""))
    push = data(vs("/ps/t", 1, 0), fresh=1000)
    prober = b.face()
    b.raw(prober, lp(interest(vs("/ps/t", 1, 0)), token=b"probe"))
    out = dict(b.raw(ps, set_congestion_mark(push, 2)))
    assert sorted(out) == sorted(workers + [prober])
    for face, w in out.items():
        p = parse_out(w)
        assert (p.net, congestion_mark(w), p.token) == (
            push, 2, b"probe" if face == prober else None)
    again = b.face()                                          # a later probe: from the CS
    assert b.raw(again, interest(vs("/ps/t", 1, 0))) == [(again, push)]


def test_a_marked_interest_goes_upstream_marked_without_its_token(b):
    d, up = b.faces(2)
    b.route("/a", up)
    wire = interest("/a", hop=9)
    [(face, out)] = b.raw(d, set_congestion_mark(lp(wire, token=b"T")))
    assert face == up and header_types(out) == [tlv.LP_CONGESTION_MARK, tlv.LP_FRAGMENT]
    p = parse_out(out)
    assert (p.kind, p.token, p.hop) == ("I", None, 8)


def test_multicast_sends_the_interests_mark_to_every_upstream(b):
    b.fw.strategy_choice.set(nv("/m"), depth("/m"), Multicast())
    d, up1, up2 = b.faces(3)
    b.route("/m", up1)
    b.route("/m", up2)
    out = b.raw(d, set_congestion_mark(interest("/m/x")))
    assert sorted(f for f, _ in out) == [up1, up2]
    assert all(congestion_mark(w) == 1 for _, w in out)


def test_an_upstream_nacks_mark_goes_downstream_with_each_token(b):
    d1, d2, up = b.faces(3)
    b.route("/a", up)
    wire = interest("/a", nonce=5)
    b.raw(d1, lp(wire, token=b"T1"))
    b.raw(d2, lp(interest("/a", nonce=6), token=b"T2"))
    out = b.raw(up, set_congestion_mark(nack(wire, NACK_CONGESTION)))
    assert sorted((f, parse_out(w).kind, parse_out(w).reason, parse_out(w).token,
                   congestion_mark(w)) for f, w in out) == [
        (d1, "N", NACK_CONGESTION, b"T1", 1), (d2, "N", NACK_CONGESTION, b"T2", 1)]
    for _, w in out:
        assert_ndnlp_order(w)


def test_nacks_the_forwarder_makes_are_unmarked_even_for_a_marked_interest(b):
    d = b.face()
    [(face, out)] = b.raw(d, set_congestion_mark(lp(interest("/nowhere"), token=b"x")))
    assert (face, parse_out(out).reason, congestion_mark(out)) == (d, NACK_NO_ROUTE, 0)


# ---- the app reads it ----------------------------------------------------------------------

KEY = b"k" * 16
SEC = Security(KEY, names.key("ps", "t1"))


def signed(name, content=b"payload") -> bytes:
    return App.make_data(name, content, HmacSigner(KEY, names.key("ps", "t1")),
                         freshness_period=1000)


def app_up(on_distribute=None) -> App:
    """An App whose face is up (what it sends is dropped here)."""
    class Sink:
        def write(self, data) -> None:
            pass

        def writelines(self, packets) -> None:
            pass

        def close(self) -> None:
            pass

        def get_extra_info(self, name, default=None):
            return default
    app = App("unix:///nonexistent.sock", on_distribute=on_distribute)
    app.face.connection_made(Sink())                        # type: ignore[arg-type]
    return app


@pytest.mark.parametrize("token", [None, b"\x01\x02\x03\x04"])
async def test_a_marked_data_answers_its_interest_with_the_mark(token):
    app = app_up()
    name = names.collect("w1", "ps", "t1", 2, 0)
    fut = app.express_future(name, SEC.validator, lifetime=1000)
    app.receive(lp_wrap(signed(name), token, None, 1))
    data = await asyncio.wait_for(fut, 1)
    assert bytes(data.content) == b"payload" and data.mark == 1
    assert bytes(data.wire) == signed(name)
    assert app.traffic()["marks_received"] == 1


async def test_an_unmarked_data_has_mark_zero():
    app = app_up()
    name = names.collect("w1", "ps", "t1", 2, 1)
    fut = app.express_future(name, SEC.validator)
    app.receive(signed(name))
    assert (await fut).mark == 0
    assert app.traffic()["marks_received"] == 0


async def test_a_marked_push_reaches_on_distribute_with_the_values_python_ndn_reads_and_the_mark():
    seen = []
    app = app_up(lambda d: seen.append(d))
    push = signed(names.distribute("ps", "t1", 4, 2), b"params")
    app.receive(set_congestion_mark(push))
    (d,) = seen
    name, meta, content, sig = parse_data(push)               # python-ndn, the bare packet
    assert d.mark == 1 and d.name == [bytes(c) for c in name]
    assert d.freshness_period == meta.freshness_period and bytes(d.content) == b"params"
    assert bytes(d.covered) == b"".join(bytes(b) for b in sig.signature_covered_part)
    assert SEC.verify(d) and app.traffic()["marks_received"] == 1


async def test_marked_interests_reach_their_handler_tokened_or_not():
    calls = []
    app = app_up()
    app.attach_handler(names.node("w1"), lambda *a: calls.append(a))
    raw = bytes(make_interest(names.collect("w1", "ps", "t1", 3, 4), InterestParam(nonce=1)))
    app.receive(set_congestion_mark(raw))
    app.receive(lp_wrap(raw, b"tk", None, 1))
    assert [(bytes(c[3]["interest"].wire), c[3]["interest"].mark,
             c[3]["interest"].pit_token) for c in calls] == [(raw, 1, None), (raw, 1, b"tk")]
    assert app.traffic()["marks_received"] == 2


async def test_a_marked_nack_nacks_with_its_reason():
    app = app_up()
    name = names.collect("w1", "ps", "t1", 2, 3)
    fut = app.express_future(name, pass_all, nonce=7)
    app.receive(lp_wrap(bytes(make_interest(name, InterestParam(nonce=7))), None,
                        NACK_CONGESTION, 1))
    with pytest.raises(InterestNack) as err:
        await fut
    assert err.value.reason == NACK_CONGESTION and app.traffic()["marks_received"] == 1


@pytest.mark.parametrize("wire", [
    lp(b"\x06\x00", headers=[(tlv.LP_CONGESTION_MARK, b"\x01\x02\x03")]),   # malformed mark
    lp(b"\x06\x00", token=b"t", headers=[(tlv.LP_CONGESTION_MARK, b"\x01")]),  # out of order
    lp(b"\x06\x00", headers=[(tlv.LP_SEQUENCE, bytes(8))]),                   # another header
    lp(b"\x06\x00", trailer=[(tlv.LP_CONGESTION_MARK, b"\x01")]),             # after Fragment
    lp(b""), lp(None, headers=[(tlv.LP_CONGESTION_MARK, b"\x01")]),            # no network packet
    b"\x64\x05\x50\x02\x06",                                                   # truncated
])
def test_other_lp_packets_are_the_general_readers(wire):
    assert client_wire.parse_lp(wire) is None


@st.composite
def lp_fields(draw) -> list[tuple[int, bytes]]:
    """An LpPacket's fields: mostly the shape parse_lp takes, with odd sizes, and now and then
    another field, the order shuffled or the Fragment left out."""
    fields = []
    if draw(st.booleans()):
        fields.append((tlv.LP_PIT_TOKEN, draw(st.binary(min_size=0, max_size=34))))
    if draw(st.booleans()):
        size = draw(st.sampled_from([1, 2, 4, 8, 3]))
        fields.append((tlv.LP_CONGESTION_MARK, draw(st.binary(min_size=size, max_size=size))))
    if draw(st.integers(0, 5)):
        size = draw(st.sampled_from([1, 200, 300, 9000, 0]))
        fields.append((tlv.LP_FRAGMENT, b"\x06" * size))
    if not draw(st.integers(0, 3)):
        other = draw(st.sampled_from([(tlv.LP_NACK, b""), (tlv.LP_SEQUENCE, bytes(8)),
                                      (tlv.LP_CONGESTION_MARK, b"\x01")]))
        fields.insert(draw(st.integers(0, len(fields))), other)
    if not draw(st.integers(0, 3)):
        fields = draw(st.permutations(fields))
    return fields


def _reference_parse_lp(wire: bytes) -> tuple[bytes, int, bytes | None] | None:
    """parse_lp's rule by a plain TLV walk: [PitToken (1-32 octets)] [CongestionMark] then a
    non-empty Fragment that ends the packet, nothing else."""
    try:
        typ, off, end = tlv.read_tl(wire, 0, len(wire))
        if typ != tlv.LP_PACKET or end != len(wire):
            return None
        fields = []
        while off < end:
            typ, voff, off = tlv.read_tl(wire, off, end)
            fields.append((typ, voff, off))
        if not fields:
            return None
        *head, (ftyp, fstart, fend) = fields
        if ftyp != tlv.LP_FRAGMENT or fstart == fend or \
                [t for t, _, _ in head] not in ([], [tlv.LP_PIT_TOKEN], [tlv.LP_CONGESTION_MARK],
                                                [tlv.LP_PIT_TOKEN, tlv.LP_CONGESTION_MARK]):
            return None
        mark, token = 0, None
        for typ, voff, vend in head:
            if typ == tlv.LP_CONGESTION_MARK:
                mark = tlv.decode_nonneg(wire, voff, vend)
            elif not 1 <= vend - voff <= 32:
                return None
            else:
                token = wire[voff:vend]
        return wire[fstart:fend], mark, token
    except (ValueError, IndexError):
        return None


@given(lp_fields(), st.integers(0, 12))
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_parse_lp_agrees_with_a_plain_tlv_walk(fields, cut):
    wire = tlv.encode_tlv(tlv.LP_PACKET, b"".join(tlv.encode_tlv(t, v) for t, v in fields))
    for candidate in (wire, wire[:len(wire) - cut]):           # truncated ones too
        ours = client_wire.parse_lp(candidate)
        expected = _reference_parse_lp(candidate)
        assert (None if ours is None else (candidate[ours[0]:ours[1]], ours[2], ours[3])) == \
            expected


def test_parse_lp_returns_the_fragments_place_the_mark_and_the_token():
    inner = signed(names.collect("w1", "ps", "t1", 2, 3), bytes(8000))   # 3-octet lengths
    for wire, expected in ((lp_wrap(inner, None, None, 1), (1, None)),
                           (lp_wrap(inner, b"tk", None, 2), (2, b"tk")),
                           (lp_wrap(inner, b"tk"), (0, b"tk"))):
        parsed = client_wire.parse_lp(wire)
        assert parsed is not None
        start, end, mark, token = parsed
        assert wire[start:end] == inner and (mark, token) == expected


async def test_plain_python_ndn_takes_a_marked_data_as_an_unmarked_one():
    """python-ndn's NDNApp (an outside client) on a marked Data: the same result as without
    the mark."""
    app = NDNApp(face=DummyFace(None))
    name = names.collect("w1", "ps", "t1", 9, 0)
    results = []
    for wire in (signed(name), set_congestion_mark(signed(name))):
        fut = asyncio.get_running_loop().create_future()
        node = app._pit.setdefault(name, InterestTreeNode())
        node.append_interest(fut, 2 ** 62, InterestParam(), pyndn_pass_all, b"")
        await app._receive(wire[0], wire)
        results.append(await asyncio.wait_for(fut, 1))
    (n1, c1, _), (n2, c2, _) = results
    assert [bytes(c) for c in n1] == [bytes(c) for c in n2] and bytes(c1) == bytes(c2)
