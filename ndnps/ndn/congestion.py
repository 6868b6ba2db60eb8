"""NDNLPv2 CongestionMark (TLV-TYPE 0x0340): the one place that reads and writes it.

A face whose send queue stays above its target marks packets leaving it (NFD's
GenericLinkService, after PCON: Schneider et al., ICN'16); a forwarder carries the mark a
packet arrived with on to its next hop, and a consumer that receives a marked Data shrinks its
window.  The field is in the ignorable range of NDNLPv2 header types (800-959, low two bits
zero), so a peer that does not know it (python-ndn, NDNts) ignores it.

Header fields are kept in increasing TLV-TYPE order, as ndn-cxx requires; the Fragment stays
last.

`MarkingRule` is when a face marks: the one rule of both face kinds, sans-I/O (the face says
whether its queue is above its target, and when). A UDP face judges its own queue's delay
(ndnps/forwarder/faces/queue.py), a stream face the octets waiting toward its peer, as NFD does
(ndnps/forwarder/faces/stream.py).
"""
from __future__ import annotations

import math
from typing import Final

from .tlv import (LP_CONGESTION_MARK, LP_FRAGMENT, LP_PACKET, DecodeError, decode_nonneg,
                  encode_tlv, encode_varnum, lp_fragment, nonneg_element, read_tl)

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


def congestion_mark(wire: bytes | memoryview) -> int:
    """The CongestionMark of `wire` (0: none, or not an LpPacket); DecodeError if malformed."""
    off, end, _, _ = lp_fragment(wire)
    while off < end:
        typ, voff, off = read_tl(wire, off, end)
        if typ == LP_CONGESTION_MARK:
            return decode_nonneg(wire, voff, off)
    return 0


class MarkingRule:
    """NFD's checkCongestionLevel (GenericLinkService) with CoDel's control law (RFC 8289).

    Asked as a packet leaves, with whether the face's queue is above its target then: once it
    has been above for a whole `interval`, that packet is marked, and while it stays above, the
    k-th mark is followed by the next interval/sqrt(k) later: a mark rate that grows until the
    senders slow down. Counted from the mark, not from when it was due, so a packet after a lull
    brings no burst of catch-up marks (NFD adds to the due time). Below the target, or `reset`
    (the queue emptied), the episode is over and the next one starts with a whole interval's
    grace. `every`: above a step threshold, where the packet is marked whatever the timing
    (DCTCP's and L4S's step; the episode's timing is left alone)."""

    def __init__(self, interval: float = 0.1) -> None:
        if not interval > 0:
            raise ValueError(f"interval must be > 0, got {interval}")
        self.interval = interval
        self._next_mark = math.inf      # inf: not above the target
        self._marks = 0                 # marks in this episode

    @property
    def congested(self) -> bool:
        """Whether an episode is going on (above the target at the last look)."""
        return self._next_mark != math.inf

    def check(self, above: bool, now: float, every: bool = False) -> bool:
        """Whether the packet leaving now is to be marked."""
        if not above:
            self.reset()
            return False
        if every:
            return True
        if self._next_mark == math.inf:
            self._next_mark = now + self.interval       # one interval's grace
            return False
        if now < self._next_mark:
            return False
        self._marks += 1
        self._next_mark = now + self.interval / math.sqrt(self._marks)
        return True

    def reset(self) -> None:
        self._next_mark = math.inf
        self._marks = 0
