"""TLV primitives and packet decoding/encoding of the forwarder (forwarder/tlv.py, packet.py).

Packets are built by python-ndn; what the forwarder encodes is read back by python-ndn.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ndn.encoding import Component, InterestParam, Name, make_interest, parse_interest

from ndnps.ndn import tlv
from ndnps.ndn.packet import (
    DEFAULT_LIFETIME_MS, NACK_CONGESTION, NACK_DUPLICATE, NACK_NO_ROUTE, Data, Interest,
    LpFragmented, LpIdle, Nack, data_for, decode, less_severe, lp_wrap, nack_for, with_nonce,
)
from ndnps.ndn.tlv import DecodeError

from tests.support.fwkit import data, interest, lp, name, nack, nv, parse_out

SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
ALLOWED = (DecodeError, LpIdle, LpFragmented)


# ---- TLV numbers ---------------------------------------------------------------------------

@pytest.mark.parametrize("value,size", [
    (0, 1), (252, 1), (253, 3), (0xFFFF, 3), (0x1_0000, 5), (0xFFFF_FFFF, 5),
    (0x1_0000_0000, 9), (2**64 - 1, 9),
])
def test_varnum_round_trip_and_size(value, size):
    enc = tlv.encode_varnum(value)
    assert len(enc) == size
    assert tlv.read_varnum(b"\xaa" + enc + b"\xbb", 1) == (value, 1 + size)


@pytest.mark.parametrize("buf", [b"", b"\xfd", b"\xfd\x01", b"\xfe\x00\x00\x01",
                                 b"\xff" + bytes(7)])
def test_truncated_varnum_raises(buf):
    with pytest.raises(DecodeError):
        tlv.read_varnum(buf, 0)


def test_read_tl_checks_its_container():
    buf = tlv.encode_tlv(7, b"abc") + b"zz"
    assert tlv.read_tl(buf, 0, len(buf)) == (7, 2, 5)
    with pytest.raises(DecodeError):
        tlv.read_tl(buf, 0, 4)           # the container ends inside the value


@pytest.mark.parametrize("n,size", [(0, 1), (255, 1), (256, 2), (0xFFFF, 2), (0x1_0000, 4),
                                    (0xFFFF_FFFF, 4), (0x1_0000_0000, 8)])
def test_nonneg_round_trip(n, size):
    enc = tlv.encode_nonneg(n)
    assert len(enc) == size
    assert tlv.decode_nonneg(enc, 0, len(enc)) == n


@pytest.mark.parametrize("size", [0, 3, 5, 9])
def test_nonneg_of_bad_size_raises(size):
    with pytest.raises(DecodeError):
        tlv.decode_nonneg(bytes(size), 0, size)


def test_outer_length_for_stream_framing():
    small = interest("/a")
    assert tlv.outer_length(small, 0) == (2, len(small) - 2)
    big = data("/a", content=bytes(1000))
    assert tlv.outer_length(big, 0) == (4, len(big) - 4)        # 0x06 FD xx xx
    for cut in range(4):
        assert tlv.outer_length(big[:cut], 0) is None            # header incomplete
    assert tlv.outer_length(b"\x00" + small, 1) == (2, len(small) - 2)
    huge_type = b"\xfd\x03\x20\x05"                               # 3-byte TYPE, LENGTH 5
    assert tlv.outer_length(huge_type, 0) == (4, 5)
    assert tlv.outer_length(huge_type[:3], 0) is None


def test_lp_fragment_finds_the_network_packet_after_the_header_fields():
    """The one walk the markers, congestion marks, reliability and fragmentation share: the
    header fields' span and the Fragment's value, bare packets all packet, bytes or a view."""
    inner = data("/*distribute*/ps/t/1/0", content=bytes(300))       # a 3-octet LENGTH
    token = tlv.encode_tlv(tlv.LP_PIT_TOKEN, b"\x09\x09")
    fields = tlv.encode_tlv(tlv.LP_SEQUENCE, bytes(8)) + token \
        + tlv.nonneg_element(tlv.LP_CONGESTION_MARK, 1)
    wire = tlv.encode_tlv(tlv.LP_PACKET, fields + tlv.encode_tlv(tlv.LP_FRAGMENT, inner))
    for buf in (wire, memoryview(wire)):
        start, end, pstart, pend = tlv.lp_fragment(buf)
        assert (bytes(buf[start:end]), bytes(buf[pstart:pend])) == (fields, inner)
    assert tlv.lp_fragment(wire) == (4, 4 + len(fields), len(wire) - len(inner), len(wire))
    bare = lp(inner)                                            # a Fragment alone
    assert tlv.lp_fragment(bare) == (4, 4, 8, len(bare))
    for packet in (inner, interest("/a/b"), memoryview(interest("/a")), b""):
        assert tlv.lp_fragment(packet) == (0, 0, 0, len(packet))       # bare: all packet
    idle = tlv.encode_tlv(tlv.LP_PACKET, token)                 # no Fragment: all headers
    assert tlv.lp_fragment(idle) == (2, len(idle), len(idle), len(idle))
    after = tlv.encode_tlv(tlv.LP_PACKET, tlv.encode_tlv(tlv.LP_FRAGMENT, b"ab") + b"\xff")
    assert tlv.lp_fragment(after) == (2, 2, 4, 6)               # what follows is not read
    for bad in (wire[:-1], b"\x64", b"\x64\x03\x62\x05\x00"):
        with pytest.raises(DecodeError):
            tlv.lp_fragment(bad)


# ---- names ---------------------------------------------------------------------------------

def test_component_offsets_are_prefix_lengths():
    comps = name("/a/bc") + [bytes(Component.from_version(7)), bytes(Component.from_bytes(
        bytes(300)))]
    value = b"".join(comps)
    offs = tlv.component_offsets(value)
    assert offs == [3, 7, 7 + len(comps[2]), len(value)]
    for k in range(1, len(comps) + 1):          # a k-prefix is a byte prefix of the encoding
        assert value[:offs[k - 1]] == b"".join(comps[:k])
    assert tlv.component_offsets(b"") == []


@given(st.lists(st.tuples(st.sampled_from([8, 1, 2, 0x20, 0x32, 0x36, 300]),
                          st.binary(max_size=300)), max_size=12))
@SETTINGS
def test_component_offsets_property(parts):
    comps = [tlv.encode_tlv(t, v) for t, v in parts]
    value = b"".join(comps)
    ends, acc = [], 0
    for c in comps:
        acc += len(c)
        ends.append(acc)
    assert tlv.component_offsets(value) == ends


@pytest.mark.parametrize("value", [b"\x08\x05ab", b"\x08", b"\x08\xfd\x01", b"\x08\x01a\x08\x03"])
def test_component_offsets_malformed_raises(value):
    with pytest.raises(DecodeError):
        tlv.component_offsets(value)


def test_name_to_str():
    assert tlv.name_to_str(nv("/a/b%2Ac")) == "/a/b%2Ac"
    assert tlv.name_to_str(nv("/*insert*/ps/t")) == "/%2Ainsert%2A/ps/t"
    ver_seg = name("/ps") + [bytes(Component.from_version(3)), bytes(Component.from_segment(12))]
    assert tlv.name_to_str(b"".join(ver_seg)) == "/ps/v=3/seg=12"
    assert tlv.name_to_str(b"") == "/"
    assert tlv.name_to_str(tlv.encode_tlv(9, b"\x01\xff")).startswith("/9=")


@given(st.lists(st.binary(min_size=1, max_size=20).filter(lambda b: set(b) != {0x2E}),
                min_size=1, max_size=6))
@SETTINGS
def test_name_to_str_matches_python_ndn(parts):
    comps = [bytes(Component.from_bytes(p)) for p in parts]
    assert tlv.name_to_str(b"".join(comps)) == Name.to_str(comps)


@pytest.mark.parametrize("value,text", [(b"", "..."), (b".", "...."), (b"...", "......")])
def test_name_to_str_period_only_components_follow_the_ndn_uri_scheme(value, text):
    comps = nv("/a") + tlv.encode_tlv(8, value) + nv("/b")
    assert tlv.name_to_str(comps) == f"/a/{text}/b"
    assert tlv.name_from_str(f"/a/{text}/b") == comps


def test_name_from_str():
    assert tlv.name_from_str("/a/b%2Ac") == b"\x08\x01a\x08\x03b*c"
    assert tlv.name_from_str("/*insert*/ps/t") == nv("/*insert*/ps/t")
    assert tlv.name_from_str("/%2Ainsert%2A/ps/t") == nv("/*insert*/ps/t")
    assert tlv.name_from_str("/") == b""
    assert tlv.name_from_str("a/b/") == nv("/a/b")


@given(st.lists(st.binary(max_size=20), max_size=6))
@SETTINGS
def test_name_str_round_trip(parts):
    value = b"".join(tlv.encode_tlv(8, p) for p in parts)
    assert tlv.name_from_str(tlv.name_to_str(value)) == value


# ---- Interest ------------------------------------------------------------------------------

@pytest.mark.parametrize("cbp,mbf,lifetime,hop", [
    (False, False, 4000, None), (True, False, 100, 3), (False, True, 70000, 0),
    (True, True, 1, 255),
])
def test_decode_interest_fields(cbp, mbf, lifetime, hop):
    wire = interest("/a/b/c", cbp=cbp, mbf=mbf, nonce=0x01020304, lifetime=lifetime, hop=hop)
    pkt = decode(wire)
    assert type(pkt) is Interest
    assert (pkt.name, pkt.can_be_prefix, pkt.must_be_fresh, pkt.nonce, pkt.lifetime,
            pkt.hop_limit, pkt.pit_token) == (nv("/a/b/c"), cbp, mbf, b"\x01\x02\x03\x04",
                                              lifetime, hop, None)
    assert pkt.wire == wire
    if hop is not None:
        assert wire[pkt.hop_limit_at] == hop
    else:
        assert pkt.hop_limit_at == -1


def test_decode_interest_defaults():
    pkt = decode(interest("/a", nonce=None, lifetime=None))
    assert pkt.nonce is None
    assert pkt.lifetime == DEFAULT_LIFETIME_MS == 4000


def test_decode_interest_with_app_parameters_and_forwarding_hint():
    wire = bytes(make_interest(name("/a"), InterestParam(nonce=1, forwarding_hint=["/hint"]),
                               b"params"))
    pkt = decode(wire)
    # python-ndn appends the ParametersSha256DigestComponent
    assert pkt.name.startswith(nv("/a")) and len(tlv.component_offsets(pkt.name)) == 2
    assert pkt.nonce == b"\x00\x00\x00\x01"
    assert pkt.forwarding_hint == (nv("/hint"),)


def _hinted(hint_value: bytes) -> bytes:
    """/a with a ForwardingHint of this TLV-VALUE, in its place (before the Nonce)."""
    wire = interest("/a", nonce=1)
    _, off, end = tlv.read_tl(wire, 0, len(wire))
    _, _, nend = tlv.read_tl(wire, off, end)
    return tlv.encode_tlv(tlv.INTEREST, wire[off:nend] + tlv.encode_tlv(tlv.FORWARDING_HINT,
                                                                         hint_value) + wire[nend:end])


def test_forwarding_hint_names_in_both_encodings_and_stripped_as_nfd_does():
    from ndnps.ndn.packet import without_forwarding_hint
    v03 = bytes(make_interest(name("/a"), InterestParam(nonce=1, forwarding_hint=["/x", "/y/z"])))
    assert decode(v03).forwarding_hint == (nv("/x"), nv("/y/z"))
    # before v0.3: Delegation(Preference, Name)
    delegation = tlv.encode_tlv(0x1F, tlv.encode_tlv(0x1E, b"\x0a") + tlv.encode_tlv(7, nv("/x")))
    assert decode(_hinted(delegation)).forwarding_hint == (nv("/x"),)
    stripped = without_forwarding_hint(decode(v03))
    assert stripped.forwarding_hint == () and stripped.wire == interest("/a", nonce=1)
    assert decode(interest("/a")).forwarding_hint == ()


@pytest.mark.parametrize("hint", [
    b"",                                                    # no Name
    tlv.encode_tlv(7, b""),                                 # an empty Name
    tlv.encode_tlv(7, b"\x08\x05ab"),                       # a malformed Name
    tlv.encode_tlv(0x1F, tlv.encode_tlv(0x1E, b"\x01")),    # a Delegation without a Name
    tlv.encode_tlv(0x09, b"x"),                             # an unknown critical element
])
def test_malformed_forwarding_hints_are_errors(hint):
    with pytest.raises(DecodeError):
        decode(_hinted(hint))


def _append_to_interest(wire: bytes, extra: bytes) -> bytes:
    _, off, end = tlv.read_tl(wire, 0, len(wire))
    return tlv.encode_tlv(tlv.INTEREST, wire[off:end] + extra)


def test_unknown_non_critical_interest_element_is_ignored():
    wire = _append_to_interest(interest("/a", nonce=5), tlv.encode_tlv(0x40, b"x"))
    assert decode(wire).nonce == b"\x00\x00\x00\x05"


@pytest.mark.parametrize("typ", [0x41, 0x1F, 0x03, 0x15])
def test_unknown_critical_interest_element_is_an_error(typ):
    with pytest.raises(DecodeError):
        decode(_append_to_interest(interest("/a"), tlv.encode_tlv(typ, b"x")))


@pytest.mark.parametrize("extra", [
    tlv.encode_tlv(tlv.NONCE, b"\x01\x02\x03"),
    tlv.encode_tlv(tlv.HOP_LIMIT, b"\x01\x02"),
    tlv.encode_tlv(tlv.INTEREST_LIFETIME, b"\x01\x02\x03"),
])
def test_bad_interest_fields_are_errors(extra):
    base = tlv.encode_tlv(tlv.NAME, nv("/a"))
    with pytest.raises(DecodeError):
        decode(tlv.encode_tlv(tlv.INTEREST, base + extra))


@pytest.mark.parametrize("value", [
    tlv.encode_tlv(tlv.NAME, b""),                        # empty Name
    tlv.encode_tlv(tlv.NONCE, b"1234"),                    # no Name first
    b"",                                                   # nothing at all
])
def test_interest_without_a_proper_name_is_an_error(value):
    with pytest.raises(DecodeError):
        decode(tlv.encode_tlv(tlv.INTEREST, value))


# ---- Data ----------------------------------------------------------------------------------

@pytest.mark.parametrize("fresh,expected", [(None, 0), (0, 0), (1000, 1000), (70000, 70000)])
def test_decode_data(fresh, expected):
    wire = data("/a/b", fresh=fresh)
    pkt = decode(wire)
    assert type(pkt) is Data
    assert (pkt.name, pkt.freshness, pkt.pit_token, pkt.wire) == (nv("/a/b"), expected, None,
                                                                  wire)


# ---- NDNLPv2 -------------------------------------------------------------------------------

def test_lp_interest_with_pit_token():
    inner = interest("/a", nonce=9)
    pkt = decode(lp(inner, token=b"\x01\x02\x03"))
    assert type(pkt) is Interest
    assert pkt.pit_token == b"\x01\x02\x03" and pkt.wire == inner and pkt.name == nv("/a")


def test_lp_data_with_pit_token():
    inner = data("/a", fresh=5)
    pkt = decode(lp(inner, token=b"T" * 32))
    assert type(pkt) is Data
    assert (pkt.pit_token, pkt.wire, pkt.freshness) == (b"T" * 32, inner, 5)


def test_lp_plain_fragment_without_headers():
    inner = data("/a")
    assert decode(lp(inner)).wire == inner


@pytest.mark.parametrize("reason", [NACK_CONGESTION, NACK_DUPLICATE, NACK_NO_ROUTE, 0, 1000])
def test_lp_nack_with_reason(reason):
    inner = interest("/a/b", nonce=7)
    pkt = decode(nack(inner, reason, token=b"tk"))
    assert type(pkt) is Nack
    assert pkt.reason == reason
    assert (pkt.interest.wire, pkt.interest.name, pkt.interest.pit_token) == (inner, nv("/a/b"),
                                                                              b"tk")


def test_lp_nack_without_reason_is_reason_none():
    pkt = decode(lp(interest("/a"), nack_without_reason=True))
    assert type(pkt) is Nack and pkt.reason == 0


def test_lp_nack_of_a_data_is_an_error():
    with pytest.raises(DecodeError):
        decode(nack(data("/a"), NACK_NO_ROUTE))


@pytest.mark.parametrize("wire", [
    lp(None),
    lp(b""),
    lp(None, headers=[(tlv.LP_SEQUENCE, bytes(8)), (tlv.LP_ACK, bytes(8))]),
    lp(None, token=b"x"),
])
def test_lp_idle(wire):
    with pytest.raises(LpIdle):
        decode(wire)


@pytest.mark.parametrize("headers", [
    [(tlv.LP_SEQUENCE, bytes(8)), (tlv.LP_FRAG_INDEX, b"\x00"), (tlv.LP_FRAG_COUNT, b"\x02")],
    [(tlv.LP_SEQUENCE, bytes(8)), (tlv.LP_FRAG_INDEX, b"\x01"), (tlv.LP_FRAG_COUNT, b"\x02")],
    [(tlv.LP_FRAG_INDEX, b"\x03")],
])
def test_lp_fragments_are_rejected(headers):
    with pytest.raises(LpFragmented):
        decode(lp(data("/a"), headers=headers))


def test_lp_single_fragment_is_accepted():
    inner = data("/a")
    wire = lp(inner, headers=[(tlv.LP_SEQUENCE, bytes(8)), (tlv.LP_FRAG_INDEX, b"\x00"),
                              (tlv.LP_FRAG_COUNT, b"\x01")])
    assert decode(wire).wire == inner


@pytest.mark.parametrize("typ,value", [
    (tlv.LP_CONGESTION_MARK, b"\x01"), (tlv.LP_TX_SEQUENCE, bytes(8)),
    (tlv.LP_INCOMING_FACE_ID, b"\x01"), (tlv.LP_NEXT_HOP_FACE_ID, b"\x01"),
    (tlv.LP_CACHE_POLICY, tlv.encode_tlv(0x335, b"\x01")), (tlv.LP_NON_DISCOVERY, b""),
    (804, b"x"), (0x3A0, b"x"), (956, b""),          # unknown but ignorable: [800,959], xx00
])
def test_known_and_ignorable_lp_headers_are_skipped(typ, value):
    inner = interest("/a", nonce=1)
    assert decode(lp(inner, headers=[(typ, value)])).wire == inner


@pytest.mark.parametrize("typ", [801, 802, 803, 0x3A1, 799, 960, 964, 0x55, 0x70, 1000])
def test_unknown_non_ignorable_lp_header_is_an_error(typ):
    with pytest.raises(DecodeError):
        decode(lp(interest("/a"), headers=[(typ, b"x")]))


@pytest.mark.parametrize("wire", [
    lp(interest("/a"), trailer=[(tlv.LP_PIT_TOKEN, b"x")]),     # field after Fragment
    lp(interest("/a"), token=b""),                               # PitToken of 0 bytes
    lp(interest("/a"), token=bytes(33)),                         # PitToken of 33 bytes
    lp(interest("/a")) + b"\x00",                                # trailing bytes
    lp(b"\x07\x00"),                                             # a Name is not a packet
    lp(interest("/a") + b"\x00"),                                # Fragment with garbage
    interest("/a") + b"\x00",                                    # trailing bytes
    data("/a")[:-1],                                             # truncated
    b"",
    b"\x00\x00",
    b"\x07\x03\x08\x01a",                                        # a bare Name
])
def test_malformed_packets_raise_decode_error(wire):
    with pytest.raises(DecodeError):
        decode(wire)


# ---- fuzzing: decode never raises anything but its three exceptions ------------------------

def _decode_ok(wire: bytes) -> None:
    try:
        pkt = decode(wire)
    except ALLOWED:
        return
    assert type(pkt) in (Interest, Data, Nack)


@given(st.binary(max_size=300))
@SETTINGS
def test_decode_random_bytes(wire):
    _decode_ok(wire)


@given(st.sampled_from([tlv.INTEREST, tlv.DATA, tlv.LP_PACKET]), st.binary(max_size=200))
@SETTINGS
def test_decode_random_values_of_each_packet_type(typ, value):
    _decode_ok(tlv.encode_tlv(typ, value))


VALID = [
    interest("/a/b", cbp=True, mbf=True, hop=4),
    interest("/a", nonce=None, lifetime=None),
    data("/a/b/c", fresh=100, content=bytes(300)),
    lp(interest("/x", nonce=3), token=b"tok"),
    nack(interest("/x", nonce=3), NACK_NO_ROUTE, token=b"tok"),
    lp(data("/x"), token=b"tok", headers=[(tlv.LP_SEQUENCE, bytes(8))]),
]


@pytest.mark.parametrize("wire", VALID)
def test_every_truncation_of_a_valid_packet_is_decode_error(wire):
    decode(wire)
    for cut in range(len(wire)):
        with pytest.raises(DecodeError):
            decode(wire[:cut])


@given(st.sampled_from(VALID), st.data())
@SETTINGS
def test_mutated_valid_packets(wire, draw):
    buf = bytearray(wire)
    for _ in range(draw.draw(st.integers(1, 4))):
        i = draw.draw(st.integers(0, len(buf) - 1))
        buf[i] = draw.draw(st.integers(0, 255))
    _decode_ok(bytes(buf))


# ---- what the forwarder encodes ------------------------------------------------------------

@given(st.sampled_from([0, NACK_CONGESTION, NACK_DUPLICATE, NACK_NO_ROUTE]),
       st.one_of(st.none(), st.binary(min_size=1, max_size=32)))
@SETTINGS
def test_nack_encoding_always_carries_the_reason(reason, token):
    inner = interest("/n/a", nonce=0x0A0B0C0D)
    wire = nack_for(decode(inner), reason, token)
    out = parse_out(wire)                       # python-ndn reads it
    assert (out.kind, out.reason, out.token, out.net) == ("N", reason, token, inner)
    back = decode(wire)
    assert type(back) is Nack and (back.reason, back.interest.pit_token) == (reason, token)


def test_nack_encoding_of_a_large_reason():
    inner = interest("/n/a")
    assert parse_out(nack_for(decode(inner), 300, None)).reason == 300


def test_data_for_forwards_the_received_bytes():
    inner = data("/d", fresh=10)
    pkt = decode(lp(inner, token=b"zz"))
    assert data_for(pkt, None) == inner
    out = parse_out(data_for(pkt, b"\x07\x08"))
    assert (out.kind, out.token, out.net) == ("D", b"\x07\x08", inner)


def test_lp_wrap_plain():
    inner = interest("/a")
    assert decode(lp_wrap(inner)).wire == inner


@given(st.integers(1, 255), st.lists(st.binary(min_size=1, max_size=8), min_size=1, max_size=4),
       st.booleans(), st.integers(1, 100000))
@SETTINGS
def test_hop_limit_decrement_changes_only_that_byte(hop, parts, cbp, lifetime):
    n = [bytes(Component.from_bytes(p)) for p in parts]
    wire = bytes(make_interest(n, InterestParam(can_be_prefix=cbp, nonce=77, lifetime=lifetime,
                                                hop_limit=hop), b"app"))
    pkt = decode(wire)
    fwd = pkt.wire_for_forwarding()
    assert len(fwd) == len(wire)
    diff = [i for i in range(len(wire)) if wire[i] != fwd[i]]
    assert diff == [pkt.hop_limit_at]
    assert parse_interest(fwd)[1].hop_limit == hop - 1
    expected = bytes(make_interest(n, InterestParam(can_be_prefix=cbp, nonce=77,
                                                    lifetime=lifetime, hop_limit=hop - 1),
                                   b"app"))
    assert fwd == expected


def test_no_hop_limit_forwards_identical_bytes():
    wire = interest("/a", hop=None)
    assert decode(wire).wire_for_forwarding() == wire


@pytest.mark.parametrize("kw", [dict(), dict(cbp=True, mbf=True, hop=9, lifetime=123)])
def test_with_nonce_adds_a_nonce_and_keeps_the_rest(kw):
    wire = interest("/a/b", nonce=None, **kw)
    pkt = decode(wire)
    got = with_nonce(pkt)
    assert got.nonce is not None and len(got.nonce) == 4
    n, p, _, _ = parse_interest(got.wire)         # python-ndn checks the element order
    assert Name.to_str(n) == "/a/b"
    assert (p.can_be_prefix, p.must_be_fresh, p.hop_limit, p.lifetime) == \
        (pkt.can_be_prefix, pkt.must_be_fresh, pkt.hop_limit, pkt.lifetime)
    assert p.nonce == int.from_bytes(got.nonce, "big")


def test_nack_severity_order():
    assert less_severe(NACK_CONGESTION, NACK_DUPLICATE) == NACK_CONGESTION
    assert less_severe(NACK_NO_ROUTE, NACK_DUPLICATE) == NACK_DUPLICATE
    assert less_severe(0, NACK_NO_ROUTE) == NACK_NO_ROUTE       # NONE is the most severe
    assert less_severe(NACK_NO_ROUTE, 0) == NACK_NO_ROUTE


def test_data_without_a_name_is_an_error():
    with pytest.raises(DecodeError):
        decode(lp(tlv.encode_tlv(tlv.DATA, tlv.encode_tlv(tlv.NONCE, b"1234"))))
