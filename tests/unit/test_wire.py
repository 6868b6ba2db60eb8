"""ndnps.client.wire and the base's encoders the client sends with: every packet is exactly
python-ndn's bytes, and the decoders read what python-ndn reads — views of the received bytes,
malformed input a DecodeError (dropped and counted by the app)."""
from __future__ import annotations

import hashlib
import itertools
import os
import random

import pytest
from ndn.app_support import nfd_mgmt
from ndn.encoding import (Component, InterestParam, MetaInfo, Name, make_data, make_interest,
                          parse_data, parse_interest)
from ndn.security import DigestSha256Signer, HmacSha256Signer

from ndnps.client import wire
from ndnps.client.security import DigestSigner, HmacSigner, Security
from ndnps.client.segments import sign_parts, sign_segments
from ndnps.ndn import encoders, nfd, packet
from ndnps.ndn.conventions import segment_component
from ndnps.ndn.tlv import DecodeError, tl
from ndnps.protocol import names

KEY = b"training-key"
HMAC = HmacSigner(KEY, names.key("ps", "t1"))
DIGEST = DigestSigner()
SIGNERS = {"hmac": HMAC, "digest": DIGEST}
THEIRS = {"hmac": HmacSha256Signer(names.key("ps", "t1"), KEY), "digest": DigestSha256Signer()}

NAMES = [
    names.distribute("ps", "t1", 7, 0),
    names.collect("gpu1", "ps", "t1", 300, 70000),
    names.confirm("ps", "t1"),
    [bytes(Component.from_bytes(b"x" * 300))],          # a component with a 3-byte length
    [bytes(Component.from_bytes(b"a"))] * 40,           # a Name TLV with a 3-byte length
]
CONTENTS = [None, b"", b"c", os.urandom(252), os.urandom(253), os.urandom(8000),
            os.urandom(70000)]                                 # 5-byte length
FRESHNESS = [None, 0, 255, 256, 10_000, 70_000, 2 ** 32]
FINAL = [None, 0, 255, 256, 70000]


def reference(name, fresh, final, content, signer) -> bytes:
    fbi = None if final is None else segment_component(final)
    return bytes(make_data(name, MetaInfo(freshness_period=fresh, final_block_id=fbi), content,
                           signer=signer))


def same_as_python_ndn(raw: bytes, ours: wire.Data) -> None:
    """Our Data holds the values python-ndn's parse_data reads off the same bytes."""
    n, meta, content, sig = parse_data(raw)
    assert ours.name == [bytes(c) for c in n] and ours.key == b"".join(ours.name)
    assert ours.content_type == (meta.content_type or 0)
    assert ours.freshness_period == meta.freshness_period
    assert ours.final_block_id == (None if meta.final_block_id is None
                                   else bytes(meta.final_block_id))
    assert bytes(ours.content) == (b"" if content is None else bytes(content))
    info = sig.signature_info
    assert ours.signature_type == (-1 if info is None else info.signature_type)
    kl = None if info is None or info.key_locator is None or info.key_locator.name is None \
        else Name.to_bytes(info.key_locator.name)[2:]
    if kl is not None:
        assert ours.key_locator is not None and Name.to_bytes(
            Name.from_bytes(tl(7, len(ours.key_locator)) + ours.key_locator)) == \
            Name.to_bytes(info.key_locator.name)
    if sig.signature_covered_part:
        assert bytes(ours.covered) == b"".join(bytes(p) for p in sig.signature_covered_part)
        assert ours.signature_value == bytes(sig.signature_value_buf)
    assert bytes(ours.wire) == raw


@pytest.mark.parametrize("signer", SIGNERS, ids=str)
def test_data_is_byte_identical_to_make_data_and_parses_back(signer):
    s = SIGNERS[signer]
    sec = Security(KEY if signer == "hmac" else None, names.key("ps", "t1"))
    for name, content, fresh, final in itertools.product(NAMES, CONTENTS, FRESHNESS, FINAL):
        ref = reference(name, fresh, final, content, THEIRS[signer])
        fbi = None if final is None else segment_component(final)
        got = wire.make_data(name, content, s, fresh, fbi)
        assert got == ref, (name, fresh, final, None if content is None else len(content))
        ours = wire.parse_data(got)
        same_as_python_ndn(got, ours)
        assert sec.verify(ours)
        assert isinstance(ours.content, memoryview)
        assert content is None or ours.content.obj is got                   # no copy


@pytest.mark.parametrize("signer", SIGNERS, ids=str)
@pytest.mark.parametrize("size", [0, 1, 7999, 8000, 8001, 8000 * 256, 8000 * 300 + 5])
def test_sign_segments_matches_make_data(signer, size):
    s = SIGNERS[signer]
    blob = os.urandom(size)
    for fresh in (None, 10_000):
        got = sign_segments(blob, lambda i: names.distribute("ps", "t1", 3, i), s, fresh)
        parts = [blob[i:i + 8000] for i in range(0, size, 8000)] or [b""]
        assert len(got) == len(parts)
        meta = MetaInfo(freshness_period=fresh, final_block_id=segment_component(len(parts) - 1))
        for i, part in enumerate(parts):
            ref = bytes(make_data(names.distribute("ps", "t1", 3, i), meta, part,
                                  signer=THEIRS[signer]))
            assert got[i] == ref, i
        assert got == sign_parts(parts, lambda i: names.distribute("ps", "t1", 3, i), s, fresh)


def test_signature_info_elements():
    assert DIGEST.signature_info == b"\x16\x03\x1b\x01\x00"
    key = encoders.encode_name(names.key("ps", "t1"))
    assert HMAC.signature_info == tl(0x16, 5 + len(key)) + b"\x1b\x01\x04" + \
        tl(0x1C, len(key)) + key


@pytest.mark.parametrize("prefix,fresh,lifetime,hop", list(itertools.product(
    [False, True], [False, True], [None, 0, 1, 500, 4000, 70_000, 2 ** 33], [None, 0, 64, 255])))
def test_interest_is_byte_identical_to_make_interest_and_parses_back(prefix, fresh, lifetime,
                                                                       hop):
    for name in NAMES:
        nonce = random.randint(1, 2 ** 32 - 1)
        param = InterestParam(can_be_prefix=prefix, must_be_fresh=fresh, nonce=nonce,
                              lifetime=lifetime, hop_limit=hop)
        ref = bytes(make_interest(name, param))
        got = encoders.encode_interest(name, nonce, lifetime, prefix, fresh, hop)
        assert got == ref
        i = wire.parse_interest(got)
        assert (i.can_be_prefix, i.must_be_fresh, i.nonce, i.hop_limit) == \
            (prefix, fresh, nonce, hop)
        assert i.lifetime == (4000 if lifetime is None else lifetime)
        assert i.name == [bytes(c) for c in name] and i.app_parameters is None
    assert encoders.encode_interest(NAMES[0], None) == bytes(make_interest(NAMES[0], InterestParam()))


@pytest.mark.parametrize("app_param", [b"", b"params", os.urandom(300)])
@pytest.mark.parametrize("signed", [False, True])
@pytest.mark.parametrize("hint", [(), ("/leaf1",), ("/a/b", "/c")])
def test_interests_with_parameters_signatures_and_hints_are_python_ndns(app_param, signed,
                                                                        hint):
    class Fixed(DigestSha256Signer):
        def write_signature_info(self, signature_info) -> None:
            super().write_signature_info(signature_info)
            signature_info.signature_nonce = int.from_bytes(b"12345678", "big")
            signature_info.signature_time = 1_700_000_000_000

    name = names.insert("ps", "t1")
    param = InterestParam(must_be_fresh=True, nonce=7, lifetime=900,
                          forwarding_hint=list(hint))
    theirs, full = make_interest(name, param, app_param=app_param,
                                 signer=Fixed(for_interest=True) if signed else None,
                                 need_final_name=True)
    info = encoders.encode_interest_signature_info(0, None, b"12345678", 1_700_000_000_000) \
        if signed else None
    ours, digest = encoders.encode_interest_full(
        name, app_param, 7, 900, False, True, None, info, DIGEST.sign if signed else None,
        [wire.normalize(h) for h in hint])
    assert ours == bytes(theirs)
    assert b"".join(name) + digest == Name.to_bytes(full)[2:]
    i = wire.parse_interest(ours)                   # and it reads back, its digest checked
    assert bytes(i.app_parameters) == app_param and i.must_be_fresh
    # a plain Interest with a hint only: no parameters, no digest
    if hint and not signed:
        plain, none = encoders.encode_interest_full(name, None, 7, 900, False, True,
                                                  forwarding_hint=[wire.normalize(h)
                                                                   for h in hint])
        assert none == b"" and plain == bytes(make_interest(name, param))


def test_a_wrong_or_missing_parameters_digest_is_malformed():
    ours, _ = encoders.encode_interest_full(names.insert("ps", "t1"), b"p", 7)
    at = ours.index(b"\x02\x20") + 2
    forged = ours[:at] + bytes(32) + ours[at + 32:]
    with pytest.raises(DecodeError):
        wire.parse_interest(forged)
    nm = encoders.encode_name(names.insert("ps", "t1"))
    with pytest.raises(DecodeError):
        wire.parse_interest(_tlv(5, nm + _tlv(0x24, b"p")))


def _tlv(typ: int, value: bytes) -> bytes:
    return tl(typ, len(value)) + value


def test_parse_interest_refuses_malformed_and_skips_non_critical():
    nm = encoders.encode_name(names.collect("gpu1", "ps", "t1", 3, 4))
    nonce, life = _tlv(0x0A, b"\x00\x00\x00\x07"), _tlv(0x0C, b"\x01\xf4")
    good = _tlv(5, nm + _tlv(0x21, b"") + nonce + life)
    i = wire.parse_interest(good)
    assert (i.can_be_prefix, i.nonce, i.lifetime) == (True, 7, 500)
    assert wire.parse_interest(_tlv(5, nm + nonce + _tlv(0xFC, b"x") + life)).lifetime == 500
    bad = [
        good[:-1], good + b"\x00", b"\x05",
        _tlv(6, nm + nonce),                                       # a Data
        _tlv(5, nonce + nm),                                       # Name not first
        _tlv(5, nm + life + nonce),                                # out of order
        _tlv(5, nm + nonce + nonce),                               # repeated
        _tlv(5, nm + _tlv(0x0A, b"\x07")),                          # 1-byte Nonce
        _tlv(5, nm + _tlv(0x0C, b"\x01\x02\x03")),                  # 3-byte lifetime
        _tlv(5, nm + _tlv(0x23, b"x")),                            # unknown critical element
        _tlv(5, _tlv(7, b"")),                                     # empty name
    ]
    for raw in bad:
        with pytest.raises((DecodeError, IndexError)):
            wire.parse_interest(raw)


def test_parse_data_reads_every_shape_python_ndn_does():
    """Shapes the apps do not send but may receive: parsed as python-ndn parses them."""
    nm = names.distribute("ps", "t1", 1, 0)
    key_digest_info = _tlv(0x16, b"\x1b\x01\x04" + _tlv(0x1c, _tlv(0x1d, b"d" * 32)))
    value = _tlv(0x17, b"v" * 32)
    shapes = [
        make_data(nm, MetaInfo(content_type=None), b"x", signer=DigestSha256Signer()),
        make_data(nm, MetaInfo(content_type=3), b"x", signer=DigestSha256Signer()),  # app Nack
        make_data(nm, MetaInfo(), None, signer=None),                                # unsigned
        make_data([], MetaInfo(), b"x", signer=DigestSha256Signer()),                # empty name
        make_data(nm, MetaInfo(), b"x", signer=HmacSha256Signer("/k/KEY", KEY)),
        _tlv(6, encoders.encode_name(nm) + key_digest_info + value),   # KeyLocator by digest
        _tlv(6, encoders.encode_name(nm) + _tlv(0x16, b"\x1b\x01\x04\x26\x01\x01") + value),
    ]
    for raw in shapes:
        raw = bytes(raw)
        same_as_python_ndn(raw, wire.parse_data(raw))


def test_parse_data_refuses_malformed_packets():
    nm = encoders.encode_name(names.distribute("ps", "t1", 1, 0))
    meta = encoders.encode_meta_info(10, segment_component(0))
    info = HMAC.signature_info
    value = _tlv(0x17, b"v" * 32)
    good = _tlv(6, nm + meta + _tlv(0x15, b"c") + info + value)
    assert bytes(wire.parse_data(good).content) == b"c"
    # a non-critical element anywhere is skipped (v0.3 evolvability)
    assert wire.parse_data(_tlv(6, nm + meta + info + value + _tlv(0xFC, b"x"))) is not None
    bad = [
        good[:-1],                                                 # truncated
        good + b"\x00",                                            # trailing byte
        _tlv(5, nm + meta + info + value),                         # an Interest
        _tlv(6, meta + nm + info + value),                         # out of order
        _tlv(6, nm + meta + meta + info + value),                  # repeated MetaInfo
        _tlv(6, nm + meta + info),                                 # no SignatureValue
        _tlv(6, nm + meta + info + value + _tlv(0x17, b"v")),      # a second SignatureValue
        _tlv(6, nm + _tlv(0x14, _tlv(0x19, b"\x01\x02\x03")) + info + value),  # 3-byte uint
        _tlv(6, nm + _tlv(0x14, _tlv(0x1F, b"x")) + info + value),  # critical in MetaInfo
        _tlv(6, nm + _tlv(0x16, b"") + value),                     # no SignatureType
        b"\x06",
    ]
    for raw in bad:
        with pytest.raises(DecodeError):
            wire.parse_data(raw)
    # a component past its name: checked when the name is read (a pending Interest's name,
    # well-formed, cannot be those bytes)
    with pytest.raises(DecodeError):
        wire.parse_data(_tlv(6, _tlv(7, b"\x08\x05ab") + info + value)).name


def test_forged_data_parses_and_fails_verification():
    sec = Security(KEY, names.key("ps", "t1"))
    nm = names.distribute("ps", "t1", 2, 0)
    forged = wire.make_data(nm, b"evil", HmacSigner(b"other", names.key("ps", "t1")))
    digest = wire.make_data(nm, b"evil", DIGEST)
    unsigned = bytes(make_data(nm, MetaInfo(), b"evil", signer=None))
    for raw in (forged, digest, unsigned):
        assert not sec.verify(wire.parse_data(raw))
    flipped = bytearray(wire.make_data(nm, b"good", HMAC))
    flipped[-40] ^= 1
    assert not sec.verify(wire.parse_data(bytes(flipped)))


def test_a_data_parsed_inside_a_larger_packet_is_a_view_of_it():
    inner = wire.make_data(NAMES[0], b"payload" * 1000, HMAC, 5)
    lp = packet.lp_wrap(inner, b"tok", None, 3)
    start, end, mark, token = wire.parse_lp(lp)
    d = wire.parse_data(lp, start, end, mark)
    assert (bytes(d.wire), d.mark, token) == (inner, 3, b"tok")
    assert d.content.obj is lp and Security(KEY, names.key("ps", "t1")).verify(d)


def test_implicit_digest_of_the_received_bytes():
    raw = wire.make_data(NAMES[0], b"x", DIGEST)
    assert hashlib.sha256(wire.parse_data(raw).wire).digest() == hashlib.sha256(raw).digest()


# ---- management: ControlParameters and ControlResponse --------------------------------------

@pytest.mark.parametrize("kw", [
    {"name": "/ps"}, {"flags": 2, "mask": 2},
    {"name": "/a/b", "origin": 0, "cost": 10, "flags": 1, "expiration_period": 100000,
     "face_id": 300},
    {"uri": "udp4://127.0.0.1:6363", "face_persistency": 1, "mtu": 8800},
    {"name": "/x", "strategy": "/localhost/nfd/strategy/multicast"},
])
def test_control_parameters_are_make_command_v2s(kw):
    theirs = bytes(nfd_mgmt.make_command_v2("rib", "register", None, **{
        k: Name.from_str(v) if k in ("name", "strategy") else v for k, v in kw.items()})[-1])
    ints = {k: v for k, v in kw.items() if isinstance(v, int)}
    name = Name.to_bytes(Name.from_str(kw["name"]))[2:] if "name" in kw else None
    strategy = Name.to_bytes(Name.from_str(kw["strategy"]))[2:] if "strategy" in kw else None
    ours = nfd.command_name("rib", "register", nfd.control_parameters(
        name, ints, uri=kw.get("uri"), strategy=strategy))
    assert ours[-1] == theirs
    assert wire.components(Name.to_bytes(Name.from_str("/localhost/nfd/rib/register"))[2:]) \
        == ours[:4]
    with pytest.raises(ValueError, match="colour"):
        nfd.control_parameters(ints={"colour": 1})


def test_control_responses_decode_as_python_ndn_reads_them():
    params = nfd.control_parameters(Name.to_bytes(Name.from_str("/ps"))[2:],
                                    {"face_id": 260, "origin": 0, "cost": 0, "flags": 1})
    raw = nfd.control_response(200, "OK", params)
    theirs = nfd_mgmt.parse_response(raw)
    r = nfd.parse_control_response(raw)
    assert (r.code, r.text, r.ok) == (theirs["status_code"], theirs["status_text"], True)
    assert r.params.name == Name.to_bytes(theirs["name"])[2:]
    assert r.params.ints == {"face_id": 260, "origin": 0, "cost": 0, "flags": 1}
    bare = nfd.parse_control_response(nfd.control_response(404, "Nope"))
    assert (bare.code, bare.text, bare.params.flags) == (404, "Nope", None)
    for malformed in (b"", params, _tlv(0x65, _tlv(0x67, b"no code")),
                      _tlv(0x65, _tlv(0x66, b"\xc8") + _tlv(0x13, b""))):
        with pytest.raises(DecodeError):
            nfd.parse_control_response(malformed)
