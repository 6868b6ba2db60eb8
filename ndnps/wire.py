"""Fixed-shape NDN packet encoders and a Data decoder for the apps' hot paths.

python-ndn's generic TLV model (``make_data``, ``parse_data``, ``make_interest``) costs
30-50 µs per packet, most of it in the model machinery rather than in the bytes (issue 7,
``bench/micro_apps.py``).  The packets the apps send and receive have one fixed shape, so
these functions write and read that shape directly:

- ``encode_data``: Name, MetaInfo, Content, SignatureInfo, SignatureValue, byte-identical to
  ``ndn.encoding.make_data`` with the signers of ``ndnps.security`` (tests/unit/test_wire.py
  compares them over many shapes);
- ``encode_interest``: Name, CanBePrefix, MustBeFresh, Nonce, InterestLifetime, HopLimit,
  byte-identical to ``ndn.encoding.make_interest`` for an Interest without
  ApplicationParameters, signature or ForwardingHint;
- ``parse_data``: the same four values as ``ndn.encoding.parse_data`` (memoryviews into the
  wire, a ``MetaInfo``, a ``SignaturePtrs``) for a Data whose elements are all ones it knows,
  and ``None`` for anything else, so the caller falls back to python-ndn, which then decides
  (and rejects malformed packets) exactly as before;
- ``parse_interest``: the name and ``InterestParam`` of ``ndn.encoding.parse_interest`` for an
  Interest of the shape ``encode_interest`` writes (no ApplicationParameters, signature or
  ForwardingHint), ``None`` for any other.
"""
from __future__ import annotations

import struct
from typing import Callable, Sequence

from ndn.encoding import (FormalName, InterestParam, KeyLocator, MetaInfo, SignatureInfo,
                          SignaturePtrs)

# TLV types (NDN packet format v0.3)
INTEREST = 0x05
DATA = 0x06
NAME = 0x07
CAN_BE_PREFIX = 0x21
MUST_BE_FRESH = 0x12
NONCE = 0x0A
INTEREST_LIFETIME = 0x0C
HOP_LIMIT = 0x22
META_INFO = 0x14
CONTENT = 0x15
SIGNATURE_INFO = 0x16
SIGNATURE_VALUE = 0x17
CONTENT_TYPE = 0x18
FRESHNESS_PERIOD = 0x19
FINAL_BLOCK_ID = 0x1A
SIGNATURE_TYPE = 0x1B
KEY_LOCATOR = 0x1C

_pack_H = struct.Struct("!H").pack
_pack_I = struct.Struct("!I").pack
_CAN_BE_PREFIX = b"\x21\x00"
_MUST_BE_FRESH = b"\x12\x00"
# first byte of a component python-ndn's make_interest rejects in a name without parameters:
# type 0 (invalid) and 2 (ParametersSha256DigestComponent)
_INVALID_INTEREST_COMPONENT = (0x00, 0x02)

# Signs the covered blocks (Name .. SignatureInfo, in order) and returns the value.
SignFn = Callable[[Sequence[bytes | memoryview]], bytes]


def _varnum(n: int) -> bytes:
    if n < 253:
        return bytes((n,))
    if n <= 0xFFFF:
        return b"\xfd" + _pack_H(n)
    if n <= 0xFFFFFFFF:
        return b"\xfe" + _pack_I(n)
    return b"\xff" + n.to_bytes(8, "big")


def tl(typ: int, length: int) -> bytes:
    """Type and Length, each a VAR-NUMBER (the types written here are all < 253)."""
    if length < 253:
        return bytes((typ, length))
    return bytes((typ,)) + _varnum(length)


def nonneg(typ: int, value: int) -> bytes:
    """A NonNegativeInteger element in its shortest of 1, 2, 4 or 8 bytes (python-ndn's rule)."""
    if value < 0:
        raise ValueError(f"{value} is not a non-negative integer")
    size = 1 if value <= 0xFF else 2 if value <= 0xFFFF else 4 if value <= 0xFFFFFFFF else 8
    return bytes((typ, size)) + value.to_bytes(size, "big")


def encode_name(name: Sequence[bytes]) -> bytes:
    """A Name element from a FormalName (components with their TL)."""
    value = b"".join(name)
    return tl(NAME, len(value)) + value


def encode_meta_info(freshness_ms: int | None = None, final_block_id: bytes | None = None,
                     content_type: int | None = 0) -> bytes:
    """The MetaInfo element ``make_data`` writes for ``MetaInfo(content_type, freshness_ms,
    final_block_id)`` (python-ndn always writes ContentType, BLOB = 0 by default)."""
    value = b""
    if content_type is not None:
        value += nonneg(CONTENT_TYPE, content_type)
    if freshness_ms is not None:
        value += nonneg(FRESHNESS_PERIOD, freshness_ms)
    if final_block_id is not None:
        value += tl(FINAL_BLOCK_ID, len(final_block_id)) + bytes(final_block_id)
    return tl(META_INFO, len(value)) + value


def encode_signature_info(signature_type: int, key_name: Sequence[bytes] | None = None) -> bytes:
    """SignatureInfo: SignatureType (1 byte, as python-ndn writes it) and a KeyLocator Name."""
    value = bytes((SIGNATURE_TYPE, 1, signature_type))
    if key_name is not None:
        kl = encode_name(key_name)
        value += tl(KEY_LOCATOR, len(kl)) + kl
    return tl(SIGNATURE_INFO, len(value)) + value


def encode_data(name: Sequence[bytes], meta_info: bytes, content: bytes | memoryview | None,
                signature_info: bytes, sign: SignFn, value_size: int = 32) -> bytes:
    """One signed Data packet.  ``meta_info`` and ``signature_info`` are whole elements
    (``encode_meta_info``, ``encode_signature_info``), encoded once per object; ``sign``
    gets the covered blocks and returns a SignatureValue of ``value_size`` bytes.  The content
    is copied once, into the result."""
    name_el = encode_name(name)
    if content is None:
        covered: tuple[bytes | memoryview, ...] = (name_el, meta_info, signature_info)
        clen = 0
    else:
        ctl = tl(CONTENT, len(content))
        covered = (name_el, meta_info, ctl, content, signature_info)
        clen = len(ctl) + len(content)
    value = sign(covered)
    if len(value) != value_size:
        raise ValueError("signature value of unexpected size")
    sv = tl(SIGNATURE_VALUE, value_size) + value
    length = len(name_el) + len(meta_info) + clen + len(signature_info) + len(sv)
    return b"".join((tl(DATA, length), *covered, sv))


def encode_interest(name: Sequence[bytes], nonce: int | None, lifetime: int | None = 4000,
                    can_be_prefix: bool = False, must_be_fresh: bool = False,
                    hop_limit: int | None = None) -> bytes:
    """An Interest without ApplicationParameters, signature or ForwardingHint, in
    ``make_interest``'s element order and integer widths (Nonce 4 bytes, HopLimit 1).
    ValueError where make_interest raises too (a component of type 0 or a
    ParametersSha256DigestComponent, a nonce or hop limit out of range); TypeError for
    components that are not bytes-like."""
    for comp in name:
        if not comp or comp[0] in _INVALID_INTEREST_COMPONENT:
            raise ValueError("component make_interest refuses without ApplicationParameters")
    if nonce is not None and not 0 <= nonce <= 0xFFFFFFFF:
        raise ValueError("nonce out of range")
    if hop_limit is not None and not 0 <= hop_limit <= 0xFF:
        raise ValueError("hop limit out of range")
    name_el = encode_name(name)
    parts = [name_el]
    if can_be_prefix:
        parts.append(_CAN_BE_PREFIX)
    if must_be_fresh:
        parts.append(_MUST_BE_FRESH)
    if nonce is not None:
        parts.append(b"\x0a\x04" + _pack_I(nonce))
    if lifetime is not None:
        parts.append(nonneg(INTEREST_LIFETIME, lifetime))
    if hop_limit is not None:
        parts.append(bytes((HOP_LIMIT, 1, hop_limit)))
    body = b"".join(parts)
    return tl(INTEREST, len(body)) + body


# ---- decoding -------------------------------------------------------------------------------

def _read_tl(buf: memoryview, pos: int, end: int) -> tuple[int, int, int]:
    """(type, value start, value end) of the element at ``pos``; IndexError past ``end``."""
    typ = buf[pos]
    pos += 1
    if typ >= 253:
        if typ == 253:
            typ = (buf[pos] << 8) | buf[pos + 1]
            pos += 2
        elif typ == 254:
            typ = int.from_bytes(buf[pos:pos + 4], "big")
            pos += 4
        else:
            typ = int.from_bytes(buf[pos:pos + 8], "big")
            pos += 8
    length = buf[pos]
    pos += 1
    if length >= 253:
        if length == 253:
            length = (buf[pos] << 8) | buf[pos + 1]
            pos += 2
        elif length == 254:
            length = int.from_bytes(buf[pos:pos + 4], "big")
            pos += 4
        else:
            length = int.from_bytes(buf[pos:pos + 8], "big")
            pos += 8
    vend = pos + length
    if vend > end:
        raise IndexError("element beyond its parent")
    return typ, pos, vend


def _uint(buf: memoryview, start: int, end: int) -> int:
    if end - start not in (1, 2, 4, 8):
        raise ValueError("bad NonNegativeInteger length")
    return int.from_bytes(buf[start:end], "big")


def _name(buf: memoryview, start: int, end: int) -> list[memoryview]:
    comps = []
    pos = start
    while pos < end:
        if buf[pos] < 253 and buf[pos + 1] < 253:      # the usual 1-byte type and length
            cend = pos + 2 + buf[pos + 1]
            if cend > end:
                raise IndexError("component beyond its name")
        else:
            _, _, cend = _read_tl(buf, pos, end)
        comps.append(buf[pos:cend])
        pos = cend
    return comps


def parse_data(wire) -> tuple | None:
    """``(name, meta_info, content, sig_ptrs)`` as ``ndn.encoding.parse_data(wire,
    with_tl=True)`` returns them, or None when the packet is not of the shape handled here
    (any unknown, repeated or out-of-order element, or malformed)."""
    try:
        return _parse_data(memoryview(wire))
    except (IndexError, ValueError):
        return None


def _parse_data(buf: memoryview) -> tuple | None:
    total = len(buf)
    typ, vstart, vend = _read_tl(buf, 0, total)
    if typ != DATA or vend != total:
        return None
    # python-ndn hands out slices of the Value part: do the same, offsets relative to it
    val = buf[vstart:vend]
    end = vend - vstart
    typ, nstart, pos = _read_tl(val, 0, end)
    if typ != NAME:
        return None
    name = _name(val, nstart, pos)
    typ, s, e = _read_tl(val, pos, end)
    if typ == META_INFO:
        meta = _meta_info(val, s, e)
        if meta is None:
            return None
        pos = e
        typ, s, e = _read_tl(val, pos, end)
    else:
        meta = MetaInfo()                      # parse_data's default when absent
    content = None
    if typ == CONTENT:
        content = val[s:e]
        pos = e
        typ, s, e = _read_tl(val, pos, end)
    if typ != SIGNATURE_INFO:
        return None
    info = _signature_info(val, s, e)
    if info is None:
        return None
    covered_end = e
    typ, s, e = _read_tl(val, covered_end, end)
    if typ != SIGNATURE_VALUE or e != end:
        return None
    sig = SignaturePtrs(signature_info=info, signature_covered_part=[val[0:covered_end]],
                        signature_value_buf=val[s:e])
    return name, meta, content, sig


def _meta_info(val: memoryview, pos: int, end: int) -> MetaInfo | None:
    content_type = freshness = final = None
    last = 0
    while pos < end:
        typ, s, e = _read_tl(val, pos, end)
        if typ <= last:                        # repeated or out of order: python-ndn decides
            return None
        last = typ
        if typ == CONTENT_TYPE:
            content_type = _uint(val, s, e)
        elif typ == FRESHNESS_PERIOD:
            freshness = _uint(val, s, e)
        elif typ == FINAL_BLOCK_ID:
            final = val[s:e]
        else:
            return None
        pos = e
    meta = MetaInfo(content_type=content_type, freshness_period=freshness, final_block_id=final)
    return meta


def _signature_info(val: memoryview, pos: int, end: int) -> SignatureInfo | None:
    typ, s, e = _read_tl(val, pos, end)
    if typ != SIGNATURE_TYPE or e - s != 1:
        return None
    info = SignatureInfo()
    info.signature_type = val[s]
    pos = e
    if pos < end:
        typ, s, e = _read_tl(val, pos, end)
        if typ != KEY_LOCATOR:
            return None
        ntyp, ns, ne = _read_tl(val, s, e)
        if ntyp != NAME or ne != e:
            return None
        kl = KeyLocator()
        kl.name = _name(val, ns, ne)
        info.key_locator = kl
        if e != end:
            return None
    return info


def parse_interest(wire) -> tuple[FormalName, InterestParam] | None:
    """``(name, param)`` as ``ndn.encoding.parse_interest(wire, with_tl=True)`` returns them
    (name components as memoryviews into the wire), for an Interest with no
    ApplicationParameters, signature or ForwardingHint; None for any other shape or a
    malformed packet (the caller falls back to python-ndn)."""
    try:
        return _parse_interest(memoryview(wire))
    except (IndexError, ValueError):
        return None


# the optional elements after the Name, in the order v0.3 requires
_INTEREST_ORDER = {CAN_BE_PREFIX: 0, MUST_BE_FRESH: 1, NONCE: 2, INTEREST_LIFETIME: 3,
                   HOP_LIMIT: 4}


def _parse_interest(buf: memoryview) -> tuple[FormalName, InterestParam] | None:
    total = len(buf)
    typ, vstart, vend = _read_tl(buf, 0, total)
    if typ != INTEREST or vend != total:
        return None
    typ, nstart, pos = _read_tl(buf, vstart, vend)
    if typ != NAME or nstart == pos:
        return None
    name = _name(buf, nstart, pos)
    if any(c[0] in _INVALID_INTEREST_COMPONENT for c in name):
        return None                     # a parameters digest: python-ndn's path checks it
    param = InterestParam(lifetime=None)
    last = -1
    while pos < vend:
        typ, s, e = _read_tl(buf, pos, vend)
        rank = _INTEREST_ORDER.get(typ)
        if rank is None or rank <= last:
            return None                 # unknown, repeated or out of order
        last = rank
        if typ == CAN_BE_PREFIX:
            if e != s:
                return None
            param.can_be_prefix = True
        elif typ == MUST_BE_FRESH:
            if e != s:
                return None
            param.must_be_fresh = True
        elif typ == NONCE:
            if e - s != 4:
                return None
            param.nonce = int.from_bytes(buf[s:e], "big")
        elif typ == INTEREST_LIFETIME:
            param.lifetime = _uint(buf, s, e)
        else:
            if e - s != 1:
                return None
            param.hop_limit = buf[s]
        pos = e
    return name, param
