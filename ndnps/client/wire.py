"""Fixed-shape Data and Interest decoders for the apps' hot paths, into python-ndn's types.

python-ndn's generic TLV model (``parse_data``, ``parse_interest``) costs 30-50 µs per packet,
most of it in the model machinery rather than in the bytes (``bench/micro/apps.py``).  The
packets the apps receive have one fixed shape (the base's encoders, ndnps.ndn.packet, write it),
so these read that shape directly, with the base's TLV reader:

- ``parse_data``: the same four values as ``ndn.encoding.parse_data`` (memoryviews into the
  wire, a ``MetaInfo``, a ``SignaturePtrs``) for a Data whose elements are all ones it knows,
  and ``None`` for anything else, so the caller falls back to python-ndn, which then decides
  (and rejects malformed packets) exactly as before;
- ``parse_interest``: the name and ``InterestParam`` of ``ndn.encoding.parse_interest`` for an
  Interest of the shape the encoder writes (no ApplicationParameters, signature or
  ForwardingHint), ``None`` for any other;
- ``parse_lp``: the network packet of an LpPacket that carries only what a forwarder adds on
  the way to an app (a CongestionMark, a PIT token), with its mark, so that a marked Data takes
  the paths above too; ``None`` for any other LpPacket (a Nack, fragmentation...).
"""
from __future__ import annotations

from ndn.encoding import (FormalName, InterestParam, KeyLocator, MetaInfo, SignatureInfo,
                          SignaturePtrs)

from ndnps.ndn.packet import INVALID_INTEREST_COMPONENT
from ndnps.ndn.tlv import (CAN_BE_PREFIX, CONTENT, CONTENT_TYPE, DATA, FINAL_BLOCK_ID,
                           FRESHNESS_PERIOD, HOP_LIMIT, INTEREST, INTEREST_LIFETIME, KEY_LOCATOR,
                           LP_CONGESTION_MARK, LP_FRAGMENT, LP_PACKET, LP_PIT_TOKEN, META_INFO,
                           MUST_BE_FRESH, NAME, NONCE, SIGNATURE_INFO, SIGNATURE_TYPE,
                           SIGNATURE_VALUE, decode_nonneg, encode_varnum, read_components,
                           read_tl, short_length)

_MARK_TYPE = encode_varnum(LP_CONGESTION_MARK)     # 3 octets; a 1-octet TLV-LENGTH follows


# ---- decoding -------------------------------------------------------------------------------

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
    typ, vstart, vend = read_tl(buf, 0, total)
    if typ != DATA or vend != total:
        return None
    # python-ndn hands out slices of the Value part: do the same, offsets relative to it
    val = buf[vstart:vend]
    end = vend - vstart
    typ, nstart, pos = read_tl(val, 0, end)
    if typ != NAME:
        return None
    name = read_components(val, nstart, pos)
    typ, s, e = read_tl(val, pos, end)
    if typ == META_INFO:
        meta = _meta_info(val, s, e)
        if meta is None:
            return None
        pos = e
        typ, s, e = read_tl(val, pos, end)
    else:
        meta = MetaInfo()                      # parse_data's default when absent
    content = None
    if typ == CONTENT:
        content = val[s:e]
        pos = e
        typ, s, e = read_tl(val, pos, end)
    if typ != SIGNATURE_INFO:
        return None
    info = _signature_info(val, s, e)
    if info is None:
        return None
    covered_end = e
    typ, s, e = read_tl(val, covered_end, end)
    if typ != SIGNATURE_VALUE or e != end:
        return None
    sig = SignaturePtrs(signature_info=info, signature_covered_part=[val[0:covered_end]],
                        signature_value_buf=val[s:e])
    return name, meta, content, sig


def _meta_info(val: memoryview, pos: int, end: int) -> MetaInfo | None:
    content_type = freshness = final = None
    last = 0
    while pos < end:
        typ, s, e = read_tl(val, pos, end)
        if typ <= last:                        # repeated or out of order: python-ndn decides
            return None
        last = typ
        if typ == CONTENT_TYPE:
            content_type = decode_nonneg(val, s, e)
        elif typ == FRESHNESS_PERIOD:
            freshness = decode_nonneg(val, s, e)
        elif typ == FINAL_BLOCK_ID:
            final = val[s:e]
        else:
            return None
        pos = e
    meta = MetaInfo(content_type=content_type, freshness_period=freshness, final_block_id=final)
    return meta


def _signature_info(val: memoryview, pos: int, end: int) -> SignatureInfo | None:
    typ, s, e = read_tl(val, pos, end)
    if typ != SIGNATURE_TYPE or e - s != 1:
        return None
    info = SignatureInfo()
    info.signature_type = val[s]
    pos = e
    if pos < end:
        typ, s, e = read_tl(val, pos, end)
        if typ != KEY_LOCATOR:
            return None
        ntyp, ns, ne = read_tl(val, s, e)
        if ntyp != NAME or ne != e:
            return None
        kl = KeyLocator()
        kl.name = read_components(val, ns, ne)
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
    typ, vstart, vend = read_tl(buf, 0, total)
    if typ != INTEREST or vend != total:
        return None
    typ, nstart, pos = read_tl(buf, vstart, vend)
    if typ != NAME or nstart == pos:
        return None
    name = read_components(buf, nstart, pos)
    if any(c[0] in INVALID_INTEREST_COMPONENT for c in name):
        return None                     # a parameters digest: python-ndn's path checks it
    param = InterestParam(lifetime=None)
    last = -1
    while pos < vend:
        typ, s, e = read_tl(buf, pos, vend)
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
            param.lifetime = decode_nonneg(buf, s, e)
        else:
            if e - s != 1:
                return None
            param.hop_limit = buf[s]
        pos = e
    return name, param


def parse_lp(wire) -> tuple[memoryview, int, bool] | None:
    """``(fragment, congestion mark (0: none), has a PIT token)`` for an LpPacket that holds a
    PitToken and/or a CongestionMark, in that order, then a non-empty Fragment that ends it;
    None for any other LpPacket or a malformed one (python-ndn's path: a Nack, a reliability
    or fragmentation header).  Read at fixed offsets, as the forwarder writes it (a third of
    the cost of a TLV walk); the fragment is a view into the packet."""
    if type(wire) is not bytes:
        wire = bytes(wire)
    try:
        total = len(wire)
        outer = short_length(wire, 1)
        if wire[0] != LP_PACKET or outer is None or outer[0] + outer[1] != total:
            return None
        off = outer[0]
        token = wire[off] == LP_PIT_TOKEN
        if token:
            size = wire[off + 1]
            if not 0 < size <= 32:
                return None
            off += 2 + size
        mark = 0
        if wire.startswith(_MARK_TYPE, off):
            start = off + 4
            off = start + wire[off + 3]
            mark = decode_nonneg(wire, start, off)
        if wire[off] != LP_FRAGMENT:
            return None
        fragment = short_length(wire, off + 1)
    except (IndexError, ValueError):
        return None
    if fragment is None or not fragment[1] or fragment[0] + fragment[1] != total:
        return None
    return memoryview(wire)[fragment[0]:], mark, token
