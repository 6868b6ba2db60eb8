"""NDNLPv2 CongestionMark (TLV-TYPE 0x0340): the one place that reads and writes it.

A face whose send queue stays above its target marks packets leaving it (NFD's
GenericLinkService, after PCON: Schneider et al., ICN'16); a forwarder carries the mark a
packet arrived with on to its next hop, and a consumer that receives a marked Data shrinks its
window.  The field is in the ignorable range of NDNLPv2 header types (800-959, low two bits
zero), so a peer that does not know it (python-ndn, NDNts) ignores it.

Header fields are kept in increasing TLV-TYPE order, as ndn-cxx requires; the Fragment stays
last.
"""
from __future__ import annotations

from typing import Final

from .tlv import (LP_CONGESTION_MARK, LP_FRAGMENT, LP_PACKET, DecodeError, decode_nonneg,
                  encode_tlv, encode_varnum, nonneg_element, read_tl)

_MARKED: Final = nonneg_element(LP_CONGESTION_MARK, 1)


def congestion_mark_field(mark: int) -> bytes:
    """The CongestionMark header field carrying `mark` (b"" for 0: no field)."""
    return _MARKED if mark == 1 else (nonneg_element(LP_CONGESTION_MARK, mark) if mark else b"")


def set_congestion_mark(wire: bytes, mark: int = 1) -> bytes:
    """`wire` (a bare network packet, or an LpPacket) carrying CongestionMark `mark`: added,
    or replacing the one it had; `mark` 0 removes it.  Raises DecodeError on a malformed
    LpPacket."""
    field = congestion_mark_field(mark)
    if not wire or wire[0] != LP_PACKET:
        if not field:
            return wire
        return encode_tlv(LP_PACKET, field + encode_tlv(LP_FRAGMENT, wire))
    typ, off, end = read_tl(wire, 0, len(wire))
    if end != len(wire):
        raise DecodeError("trailing bytes after LpPacket")
    before: list[bytes] = []
    after: list[bytes] = []
    while off < end:
        start = off
        typ, _, off = read_tl(wire, off, end)
        if typ == LP_CONGESTION_MARK:
            continue
        (after if typ == LP_FRAGMENT or typ > LP_CONGESTION_MARK else before).append(
            wire[start:off])
    body = b"".join(before) + field + b"".join(after)
    if not mark and len(before) + len(after) == 1 and after and after[0][0] == LP_FRAGMENT:
        _, voff, vend = read_tl(after[0], 0, len(after[0]))     # the Fragment alone: unwrap
        return after[0][voff:vend]
    return encode_varnum(LP_PACKET) + encode_varnum(len(body)) + body


def congestion_mark(wire: bytes) -> int:
    """The CongestionMark of `wire` (0: none, or not an LpPacket); DecodeError if malformed."""
    if not wire or wire[0] != LP_PACKET:
        return 0
    _, off, end = read_tl(wire, 0, len(wire))
    while off < end:
        typ, voff, off = read_tl(wire, off, end)
        if typ == LP_CONGESTION_MARK:
            return decode_nonneg(wire, voff, off)
        if typ == LP_FRAGMENT:
            return 0
    return 0
