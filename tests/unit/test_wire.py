"""ndnps.client.wire: the fixed-shape encoders write exactly python-ndn's bytes, and the Data decoder
returns exactly what python-ndn's parse_data returns — or None, leaving the packet to it."""
from __future__ import annotations

import itertools
import os
import random

import pytest
from ndn.encoding import (Component, InterestParam, KeyLocator, MetaInfo, Name, SignatureInfo,
                          make_data, make_interest, parse_data, parse_interest)
from ndn.security import HmacSha256Signer

from ndnps.protocol import names
from ndnps.client import wire
from ndnps.ndn import packet
from ndnps.ndn.tlv import tl
from ndnps.client.security import DigestSigner, HmacSigner, Security
from ndnps.client.segments import sign_segments
from ndnps.ndn.conventions import segment_component

KEY = b"training-key"
HMAC = HmacSigner(KEY, names.key("ps", "t1"))
DIGEST = DigestSigner()
SIGNERS = {"hmac": HMAC, "digest": DIGEST}

NAMES = [
    names.distribute("ps", "t1", 7, 0),
    names.collect("gpu1", "ps", "t1", 300, 70000),
    names.confirm("ps", "t1"),
    [Component.from_bytes(b"x" * 300)],                 # a component with a 3-byte length
    [Component.from_bytes(b"a")] * 40,                  # a Name TLV with a 3-byte length
]
CONTENTS = [None, b"", b"c", os.urandom(252), os.urandom(253), os.urandom(8000),
            os.urandom(70000)]                                 # 5-byte length
FRESHNESS = [None, 0, 255, 256, 10_000, 70_000, 2 ** 32]
FINAL = [None, 0, 255, 256, 70000]


def reference(name, fresh, final, content, signer) -> bytes:
    fbi = None if final is None else segment_component(final)
    return bytes(make_data(name, MetaInfo(freshness_period=fresh, final_block_id=fbi), content,
                           signer=signer))


def fast(name, fresh, final, content, signer) -> bytes:
    fbi = None if final is None else segment_component(final)
    return packet.encode_data(name, packet.encode_meta_info(fresh, fbi), content,
                            signer.signature_info, signer.sign)


def same_parse(a, b) -> None:
    """Two parse_data results hold the same values (python-ndn's own equality for models)."""
    (n1, m1, c1, s1), (n2, m2, c2, s2) = a, b
    assert [bytes(c) for c in n1] == [bytes(c) for c in n2]
    assert type(m1) is type(m2) and m1 == m2
    assert (m1.content_type, m1.freshness_period) == (m2.content_type, m2.freshness_period)
    assert (None if m1.final_block_id is None else bytes(m1.final_block_id)) == \
        (None if m2.final_block_id is None else bytes(m2.final_block_id))
    assert (None if c1 is None else bytes(c1)) == (None if c2 is None else bytes(c2))
    assert s1.signature_info == s2.signature_info
    assert s1.signature_info.signature_type == s2.signature_info.signature_type
    kl1, kl2 = s1.signature_info.key_locator, s2.signature_info.key_locator
    assert (kl1 is None) == (kl2 is None)
    if kl1 is not None:
        assert [bytes(c) for c in kl1.name] == [bytes(c) for c in kl2.name]
    assert [bytes(p) for p in s1.signature_covered_part] == \
        [bytes(p) for p in s2.signature_covered_part]
    assert bytes(s1.signature_value_buf) == bytes(s2.signature_value_buf)
    assert s1.digest_covered_part == s2.digest_covered_part == []
    assert s1.digest_value_buf is None and s2.digest_value_buf is None


@pytest.mark.parametrize("signer", SIGNERS, ids=str)
def test_data_is_byte_identical_to_make_data_and_parses_back(signer):
    s = SIGNERS[signer]
    sec = Security(KEY if signer == "hmac" else None, names.key("ps", "t1"))
    for name, content, fresh, final in itertools.product(NAMES, CONTENTS, FRESHNESS, FINAL):
        ref = reference(name, fresh, final, content, s)
        got = fast(name, fresh, final, content, s)
        assert got == ref, (name, fresh, final, None if content is None else len(content))
        theirs, ours = parse_data(got), wire.parse_data(got)
        assert ours is not None
        same_parse(theirs, ours)
        assert sec.verify(ours[3]) and sec.verify(theirs[3])


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
            ref = bytes(make_data(names.distribute("ps", "t1", 3, i), meta, part, signer=s))
            assert got[i] == ref, i


def test_sign_segments_takes_str_names_and_other_signers():
    """A NonStrictName and a foreign signer take python-ndn's path, with the same result."""
    blob = os.urandom(9000)
    got = sign_segments(blob, lambda i: f"/a/b/seg={i}", HMAC, 5)
    meta = MetaInfo(freshness_period=5, final_block_id=segment_component(1))
    assert got == [bytes(make_data(f"/a/b/seg={i}", meta, blob[i * 8000:(i + 1) * 8000], signer=HMAC))
                   for i in range(2)]
    theirs = HmacSha256Signer(names.key("ps", "t1"), KEY)
    other = sign_segments(blob, lambda i: names.distribute("ps", "t1", 3, i), theirs)
    assert Security(KEY, names.key("ps", "t1")).verify(parse_data(other[1])[3])


def test_signature_info_elements():
    assert DIGEST.signature_info == b"\x16\x03\x1b\x01\x00"
    info = SignatureInfo()
    HMAC.write_signature_info(info)
    assert HMAC.signature_info == b"\x16" + bytes([len(info.encode())]) + bytes(info.encode())


@pytest.mark.parametrize("prefix,fresh,lifetime,hop", list(itertools.product(
    [False, True], [False, True], [None, 0, 1, 500, 4000, 70_000, 2 ** 33], [None, 0, 64, 255])))
def test_interest_is_byte_identical_to_make_interest(prefix, fresh, lifetime, hop):
    for name in NAMES:
        nonce = random.randint(1, 2 ** 32 - 1)
        param = InterestParam(can_be_prefix=prefix, must_be_fresh=fresh, nonce=nonce,
                              lifetime=lifetime, hop_limit=hop)
        ref = bytes(make_interest(name, param))
        got = packet.encode_interest(name, nonce, lifetime, prefix, fresh, hop)
        assert got == ref
        back = parse_interest(got)
        assert back[1] == param and [bytes(c) for c in back[0]] == [bytes(c) for c in name]
        ours = wire.parse_interest(got)               # and our reader gives the same values
        assert ours is not None and ours[1] == back[1]
        assert [bytes(c) for c in ours[0]] == [bytes(c) for c in back[0]]
    assert packet.encode_interest(NAMES[0], None) == bytes(make_interest(NAMES[0], InterestParam()))


def test_parse_interest_leaves_other_shapes_to_python_ndn():
    nm = packet.encode_name(names.collect("gpu1", "ps", "t1", 3, 4))
    nonce, life = _tlv(0x0A, b"\x00\x00\x00\x07"), _tlv(0x0C, b"\x01\xf4")
    good = _tlv(5, nm + _tlv(0x21, b"") + nonce + life)
    name, param = wire.parse_interest(good)
    assert param == InterestParam(can_be_prefix=True, nonce=7, lifetime=500)
    assert param == parse_interest(good)[1]
    signed = make_interest(names.insert("ps", "t1"), InterestParam(), b"params",
                           signer=HMAC)
    bad = [
        good[:-1], good + b"\x00", b"", b"\x05",
        _tlv(6, nm + nonce),                                       # a Data
        _tlv(5, nonce + nm),                                       # Name not first
        _tlv(5, nm + life + nonce),                                # out of order
        _tlv(5, nm + nonce + nonce),                               # repeated
        _tlv(5, nm + _tlv(0x0A, b"\x07")),                          # 1-byte Nonce
        _tlv(5, nm + _tlv(0x21, b"x")),                            # CanBePrefix with a value
        _tlv(5, nm + _tlv(0x0C, b"\x01\x02\x03")),                  # 3-byte lifetime
        _tlv(5, nm + _tlv(0x1E, nm)),                              # ForwardingHint
        _tlv(5, nm + _tlv(0x24, b"p")),                            # ApplicationParameters
        _tlv(5, _tlv(7, b"")),                                     # empty name
        bytes(signed),                                             # signed, with parameters
    ]
    for raw in bad:
        assert wire.parse_interest(raw) is None, raw.hex()


def test_parse_data_matches_python_ndn_for_other_shapes():
    """Shapes the apps do not send but may receive: every one python-ndn parses is parsed the
    same, or left to it (None)."""
    nm = names.distribute("ps", "t1", 1, 0)
    shapes = [
        make_data(nm, MetaInfo(content_type=None), b"x", signer=DIGEST),     # MetaInfo empty
        make_data(nm, MetaInfo(content_type=3), b"x", signer=DIGEST),        # app Nack
        make_data(nm, MetaInfo(), None, signer=None),                        # unsigned
        make_data([], MetaInfo(), b"x", signer=DIGEST),                      # empty name
        make_data(nm, MetaInfo(), b"x", signer=HmacSha256Signer("/k/KEY", KEY)),
    ]
    for raw in shapes:
        raw = bytes(raw)
        ours = wire.parse_data(raw)
        try:
            theirs = parse_data(raw)
        except Exception:
            assert ours is None
            continue
        if ours is not None:
            same_parse(theirs, ours)


def _tlv(typ: int, value: bytes) -> bytes:
    return tl(typ, len(value)) + value


def test_parse_data_leaves_unknown_shapes_to_python_ndn():
    nm = packet.encode_name(names.distribute("ps", "t1", 1, 0))
    meta = packet.encode_meta_info(10, segment_component(0))
    info = HMAC.signature_info
    value = _tlv(0x17, b"v" * 32)
    good = _tlv(6, nm + meta + _tlv(0x15, b"c") + info + value)
    assert wire.parse_data(good) is not None
    key_digest_info = _tlv(0x16, b"\x1b\x01\x04" + _tlv(0x1c, _tlv(0x1d, b"d" * 32)))
    bad = [
        good[:-1],                                                 # truncated
        good + b"\x00",                                            # trailing byte
        _tlv(5, nm + meta + info + value),                         # an Interest
        _tlv(6, meta + nm + info + value),                         # out of order
        _tlv(6, nm + meta + meta + info + value),                  # repeated MetaInfo
        _tlv(6, nm + meta + info),                                 # no SignatureValue
        _tlv(6, nm + meta + _tlv(0x15, b"c")),                     # no signature at all
        _tlv(6, nm + meta + info + value + _tlv(0xFC, b"x")),      # unknown element after
        _tlv(6, nm + _tlv(0x14, _tlv(0x19, b"\x01\x02\x03")) + info + value),  # 3-byte uint
        _tlv(6, nm + _tlv(0x14, _tlv(0x20, b"x")) + info + value),  # unknown MetaInfo element
        _tlv(6, nm + key_digest_info + value),                     # KeyLocator by digest
        _tlv(6, nm + _tlv(0x16, b"\x1b\x01\x04\x26\x01\x01") + value),  # SignatureNonce
        _tlv(6, _tlv(7, b"\x08\x05ab") + info + value),            # component past its name
        b"",
        b"\x06",
    ]
    for raw in bad:
        assert wire.parse_data(raw) is None, raw.hex()
    # python-ndn still parses the ones it accepts: those go through it unchanged
    n, _, _, sig = parse_data(_tlv(6, nm + key_digest_info + value))
    assert [bytes(c) for c in n] == [bytes(c) for c in names.distribute("ps", "t1", 1, 0)]
    assert bytes(sig.signature_info.key_locator.key_digest) == b"d" * 32


def test_forged_data_parses_and_fails_verification():
    sec = Security(KEY, names.key("ps", "t1"))
    nm = names.distribute("ps", "t1", 2, 0)
    forged = fast(nm, None, 0, b"evil", HmacSigner(b"other", names.key("ps", "t1")))
    digest = fast(nm, None, 0, b"evil", DIGEST)
    unsigned = bytes(make_data(nm, MetaInfo(), b"evil", signer=None))
    for raw in (forged, digest):
        parsed = wire.parse_data(raw)
        assert parsed is not None and not sec.verify(parsed[3])
    parsed = wire.parse_data(unsigned) or parse_data(unsigned)
    assert not sec.verify(parsed[3])
    flipped = bytearray(fast(nm, None, 0, b"good", HMAC))
    flipped[-40] ^= 1
    assert not sec.verify(wire.parse_data(bytes(flipped))[3])


def test_key_locator_name_kept():
    parsed = wire.parse_data(fast(NAMES[0], 1, 0, b"x", HMAC))
    kl = parsed[3].signature_info.key_locator
    assert isinstance(kl, KeyLocator)
    assert Name.to_str(kl.name) == Name.to_str(names.key("ps", "t1"))
