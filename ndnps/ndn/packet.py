"""The fixed-shape packet codecs: decode just enough of an incoming packet to forward it, and
encode what the forwarder adds (Nacks, PIT tokens, a Nonce); what the apps send, encoders.py.

The forwarder never re-encodes a Data: it forwards the bytes it received (wrapped in an
NDNLPv2 header only when a PIT token must be echoed or it came with a CongestionMark). An
Interest is forwarded as received, except its HopLimit byte, which is decremented in place.

A packet keeps the CongestionMark it arrived with (`congestion_mark`, 0: none) and carries it on
to the next hop, as NFD keeps the mark's tag on the packet object; a bare packet, the usual
case, pays nothing for it.
"""
from __future__ import annotations

import os
from typing import Final

from .congestion import congestion_mark_field
from .tlv import (
    CAN_BE_PREFIX, DATA, FORWARDING_HINT, FRESHNESS_PERIOD, HOP_LIMIT, INTEREST,
    INTEREST_LIFETIME, LP_ACK, LP_CACHE_POLICY, LP_CONGESTION_MARK, LP_FRAG_COUNT,
    LP_FRAG_INDEX, LP_FRAGMENT, LP_INCOMING_FACE_ID, LP_NACK, LP_NACK_REASON,
    LP_NEXT_HOP_FACE_ID, LP_NON_DISCOVERY, LP_PACKET, LP_PIT_TOKEN, LP_PREFIX_ANNOUNCEMENT,
    LP_SEQUENCE, LP_TX_SEQUENCE, META_INFO, MUST_BE_FRESH, NAME, NONCE, DecodeError,
    component_offsets, decode_nonneg, encode_nonneg, encode_tlv, encode_varnum, read_tl, tl,
)

DEFAULT_LIFETIME_MS: Final = 4000

# Nack reasons (NDNLPv2)
NACK_CONGESTION: Final = 50
NACK_DUPLICATE: Final = 100
NACK_NO_ROUTE: Final = 150
# Least severe first: a downstream Nack carries the least severe reason its upstreams gave.
_SEVERITY: Final = {NACK_CONGESTION: 0, NACK_DUPLICATE: 1, NACK_NO_ROUTE: 2}

# header fields read elsewhere (link reliability) or not at all: skipped
_KNOWN_LP_HEADERS: Final = frozenset((
    LP_SEQUENCE, LP_INCOMING_FACE_ID, LP_NEXT_HOP_FACE_ID, LP_CACHE_POLICY, LP_ACK,
    LP_TX_SEQUENCE, LP_NON_DISCOVERY, LP_PREFIX_ANNOUNCEMENT,
))


# ApplicationParameters, InterestSignatureInfo/Value: carried, not inspected.
_CARRIED_INTEREST_ELEMENTS: Final = frozenset((0x24, 0x2C, 0x2E))
_DELEGATION: Final = 0x1F           # ForwardingHint's element before v0.3 (Preference, Name)


class Interest:
    """The fields forwarding needs, plus the received wire."""

    __slots__ = ("wire", "name", "can_be_prefix", "must_be_fresh", "nonce", "lifetime",
                 "hop_limit", "hop_limit_at", "pit_token", "forwarding_hint", "congestion_mark")

    def __init__(self, wire: bytes, name: bytes, can_be_prefix: bool, must_be_fresh: bool,
                 nonce: bytes | None, lifetime: int, hop_limit: int | None, hop_limit_at: int,
                 pit_token: bytes | None = None,
                 forwarding_hint: tuple[bytes, ...] = (), congestion_mark: int = 0) -> None:
        self.wire = wire
        self.name = name                  # Name TLV-VALUE: concatenated component TLVs
        self.can_be_prefix = can_be_prefix
        self.must_be_fresh = must_be_fresh
        self.nonce = nonce
        self.lifetime = lifetime          # milliseconds
        self.hop_limit = hop_limit
        self.hop_limit_at = hop_limit_at  # offset of the HopLimit value byte in wire, or -1
        self.pit_token = pit_token
        self.forwarding_hint = forwarding_hint    # its Names' TLV-VALUEs, in order
        self.congestion_mark = congestion_mark

    def wire_for_forwarding(self) -> bytes:
        """The received bytes with HopLimit decremented (the caller checked it is > 0), in an
        LpPacket with the CongestionMark the Interest came with, if any (its PIT token is the
        previous hop's, not forwarded)."""
        wire = self.wire
        if self.hop_limit is not None:
            at = self.hop_limit_at
            wire = wire[:at] + bytes((self.hop_limit - 1,)) + wire[at + 1:]
        if self.congestion_mark:
            return lp_wrap(wire, None, None, self.congestion_mark)
        return wire


class Data:
    __slots__ = ("wire", "name", "freshness", "pit_token", "congestion_mark")

    def __init__(self, wire: bytes, name: bytes, freshness: int, pit_token: bytes | None = None,
                 congestion_mark: int = 0) -> None:
        self.wire = wire                  # the Data TLV alone, without any NDNLPv2 header
        self.name = name
        self.freshness = freshness        # FreshnessPeriod in ms, 0 when absent
        self.pit_token = pit_token
        self.congestion_mark = congestion_mark


class Nack:
    __slots__ = ("interest", "reason", "congestion_mark")

    def __init__(self, interest: Interest, reason: int, congestion_mark: int = 0) -> None:
        self.interest = interest
        self.reason = reason
        self.congestion_mark = congestion_mark


class LpIdle(Exception):
    """An LpPacket without a fragment (IDLE / ack-only): nothing to forward."""


class LpFragmented(Exception):
    """An NDNLPv2 fragment (FragCount > 1): this forwarder does not reassemble."""


def _open(wire: bytes, start: int, end: int, kind: int) -> tuple[bytes, int, int, int]:
    """Check the outer TLV of an Interest or Data at `wire[start:end]` and its leading Name;
    returns (the packet's own bytes, value end, name value start, name value end)."""
    # Inline the usual headers (1-byte TYPE; 1- or 3-byte LENGTH); read_tl does the rest.
    if end - start >= 4 and wire[start] == kind and wire[start + 1] <= 253:
        l0 = wire[start + 1]
        if l0 < 253:
            off = start + 2
            vend = off + l0
        else:
            off = start + 4
            vend = off + ((wire[start + 2] << 8) | wire[start + 3])
        if vend != end:
            raise DecodeError("not an Interest" if kind == INTEREST else "not a Data")
    else:
        typ, off, vend = read_tl(wire, start, end)
        if typ != kind or vend != end:
            raise DecodeError("not an Interest" if kind == INTEREST else "not a Data")
    if start or end != len(wire):
        wire = wire[start:end]
        off -= start
        vend -= start
    if off + 2 <= vend and wire[off] == NAME and wire[off + 1] < 253:
        noff = off + 2
        nend = noff + wire[off + 1]
        if nend > vend:
            raise DecodeError("Name exceeds its packet")
        return wire, vend, noff, nend
    typ, noff, nend = read_tl(wire, off, vend)
    if typ != NAME:
        raise DecodeError("packet does not start with a Name")
    return wire, vend, noff, nend


def decode_interest(wire: bytes, start: int, end: int, pit_token: bytes | None = None,
                    congestion_mark: int = 0) -> Interest:
    """`wire[start:end]` is a whole Interest TLV; `start` is where its TYPE begins."""
    wire, vend, noff, nend = _open(wire, start, end, INTEREST)
    name = wire[noff:nend]
    if not name:
        raise DecodeError("Interest with an empty Name")
    cbp = mbf = False
    nonce = None
    lifetime = DEFAULT_LIFETIME_MS
    hop = None
    hop_at = -1
    hint: tuple[bytes, ...] = ()
    off = nend
    while off < vend:
        # inline the common one-byte TYPE and LENGTH; read_tl handles the rest
        typ = wire[off]
        length = wire[off + 1] if off + 1 < vend else 255
        if typ < 253 and length < 253:
            voff = off + 2
            off = voff + length
            if off > vend:
                raise DecodeError("element exceeds the Interest")
        else:
            typ, voff, off = read_tl(wire, off, vend)
        if typ == CAN_BE_PREFIX:
            cbp = True
        elif typ == MUST_BE_FRESH:
            mbf = True
        elif typ == NONCE:
            if off - voff != 4:
                raise DecodeError("Nonce must be 4 bytes")
            nonce = wire[voff:off]
        elif typ == INTEREST_LIFETIME:
            lifetime = decode_nonneg(wire, voff, off)
        elif typ == HOP_LIMIT:
            if off - voff != 1:
                raise DecodeError("HopLimit must be 1 byte")
            hop = wire[voff]
            hop_at = voff
        elif typ == FORWARDING_HINT:
            hint = _hint_names(wire, voff, off)
        elif typ not in _CARRIED_INTEREST_ELEMENTS and (typ < 32 or typ & 1):
            # an unrecognised critical element makes the packet invalid (v0.3 evolvability)
            raise DecodeError(f"unexpected critical element 0x{typ:x} in Interest")
    return Interest(wire, name, cbp, mbf, nonce, lifetime, hop, hop_at, pit_token, hint,
                    congestion_mark)


def _hint_names(wire: bytes, off: int, end: int) -> tuple[bytes, ...]:
    """A ForwardingHint's Names (v0.3: 1*Name; before it, Delegations holding a Preference and
    a Name, as older ndn-cxx sent them), each checked as a name."""
    names = []
    while off < end:
        typ, voff, off = read_tl(wire, off, end)
        if typ == _DELEGATION:
            name = _delegation_name(wire, voff, off)
        elif typ == NAME:
            name = wire[voff:off]
        elif typ < 32 or typ & 1:
            raise DecodeError(f"unexpected critical element 0x{typ:x} in ForwardingHint")
        else:
            continue
        if not name:
            raise DecodeError("empty Name in ForwardingHint")
        component_offsets(name)             # a malformed name raises here, not when routing
        names.append(name)
    if not names:
        raise DecodeError("ForwardingHint without a Name")
    return tuple(names)


def decode_data(wire: bytes, start: int, end: int, pit_token: bytes | None = None,
                congestion_mark: int = 0) -> Data:
    wire, vend, noff, nend = _open(wire, start, end, DATA)
    freshness = 0
    if nend < vend and wire[nend] == META_INFO:
        typ, moff, mend = read_tl(wire, nend, vend)
        while moff < mend:
            typ, voff, moff = read_tl(wire, moff, mend)
            if typ == FRESHNESS_PERIOD:
                freshness = decode_nonneg(wire, voff, moff)
    elif nend < vend:                   # the element after the Name must be well-formed
        if not (wire[nend] < 253 and nend + 1 < vend and wire[nend + 1] < 253 and
                nend + 2 + wire[nend + 1] <= vend):
            read_tl(wire, nend, vend)
    return Data(wire, wire[noff:nend], freshness, pit_token, congestion_mark)


def decode(wire: bytes) -> Interest | Data | Nack:
    """Decode one packet received on a face (bare network packet or LpPacket).

    Raises DecodeError (malformed), LpIdle or LpFragmented; the caller counts and drops.
    """
    first = wire[0] if wire else -1
    if first == INTEREST:
        return decode_interest(wire, 0, len(wire))
    if first == DATA:
        return decode_data(wire, 0, len(wire))
    if first != LP_PACKET:
        raise DecodeError(f"unknown packet type 0x{first:x}" if first >= 0 else "empty packet")
    typ, off, end = read_tl(wire, 0, len(wire))
    if end != len(wire):
        raise DecodeError("trailing bytes after LpPacket")
    pit_token = None
    nack_reason = None
    mark = 0
    frag = None
    while off < end:
        typ, voff, off = read_tl(wire, off, end)
        if frag is not None:
            raise DecodeError("LpPacket field after Fragment")
        if typ == LP_FRAGMENT:
            frag = (voff, off)
        elif typ == LP_PIT_TOKEN:
            if not 1 <= off - voff <= 32:
                raise DecodeError("PitToken must be 1..32 bytes")
            pit_token = wire[voff:off]
        elif typ == LP_NACK:
            nack_reason = 0
            while voff < off:
                t, v, voff = read_tl(wire, voff, off)
                if t == LP_NACK_REASON:
                    nack_reason = decode_nonneg(wire, v, voff)
        elif typ == LP_CONGESTION_MARK:
            mark = decode_nonneg(wire, voff, off)
        elif typ == LP_FRAG_COUNT:
            if decode_nonneg(wire, voff, off) > 1:
                raise LpFragmented()
        elif typ == LP_FRAG_INDEX:
            if decode_nonneg(wire, voff, off) > 0:
                raise LpFragmented()
        elif typ not in _KNOWN_LP_HEADERS and not (800 <= typ <= 959 and typ & 3 == 0):
            raise DecodeError(f"unknown NDNLPv2 header field 0x{typ:x}")
    if frag is None:
        raise LpIdle()
    fstart, fend = frag
    if fstart == fend:
        raise LpIdle()
    inner = wire[fstart]
    if nack_reason is not None:
        if inner != INTEREST:
            raise DecodeError("Nack fragment is not an Interest")
        return Nack(decode_interest(wire, fstart, fend, pit_token), nack_reason, mark)
    if inner == INTEREST:
        return decode_interest(wire, fstart, fend, pit_token, mark)
    if inner == DATA:
        return decode_data(wire, fstart, fend, pit_token, mark)
    raise DecodeError(f"unknown fragment type 0x{inner:x}")


# ---- encoding what the forwarder originates -------------------------------------------------

def lp_wrap(packet: bytes, pit_token: bytes | None = None, nack_reason: int | None = None,
            congestion_mark: int = 0) -> bytes:
    """Wrap a network-layer packet in an LpPacket carrying a PIT token, a Nack and/or a
    CongestionMark (0: none), in increasing TLV-TYPE order as ndn-cxx requires, the Fragment
    last."""
    head = b""
    if pit_token is not None:
        head += encode_tlv(LP_PIT_TOKEN, pit_token)
    if nack_reason is not None:
        # Always with a NackReason: python-ndn reads a reason-less Nack as an Interest.
        head += encode_tlv(LP_NACK, encode_tlv(LP_NACK_REASON, encode_nonneg(nack_reason)))
    if congestion_mark:
        head += congestion_mark_field(congestion_mark)
    body = head + encode_varnum(LP_FRAGMENT) + encode_varnum(len(packet)) + packet
    return encode_varnum(LP_PACKET) + encode_varnum(len(body)) + body


def data_for(data: Data, pit_token: bytes | None) -> bytes:
    """The bytes to send a Data downstream: as received (the same object), wrapped when the
    Interest was tokened or the Data came marked."""
    if pit_token is None and not data.congestion_mark:
        return data.wire
    return lp_wrap(data.wire, pit_token, None, data.congestion_mark)


def nack_for(interest: Interest, reason: int, pit_token: bytes | None,
             congestion_mark: int = 0) -> bytes:
    return lp_wrap(interest.wire, pit_token, reason, congestion_mark)


def less_severe(a: int, b: int) -> int:
    return a if _SEVERITY.get(a, 3) <= _SEVERITY.get(b, 3) else b


def new_nonce() -> bytes:
    return os.urandom(4)


def _delegation_name(wire: bytes, off: int, end: int) -> bytes:
    while off < end:
        typ, voff, off = read_tl(wire, off, end)
        if typ == NAME:
            return wire[voff:off]
    raise DecodeError("Delegation without a Name")


def without_forwarding_hint(interest: Interest) -> Interest:
    """The Interest with its ForwardingHint removed (NFD strips it once the Interest reaches
    the producer's region)."""
    wire = interest.wire
    _, off, vend = read_tl(wire, 0, len(wire))
    pos = off
    while pos < vend:
        t, _, e = read_tl(wire, pos, vend)
        if t == FORWARDING_HINT:
            # the wire without that element; the fields are the Interest's own (not decoded
            # again), the HopLimit's offset moved with the bytes before it
            head = tl(INTEREST, (vend - off) - (e - pos))
            at = interest.hop_limit_at
            if at >= 0:
                at += len(head) - off - (e - pos if at >= e else 0)
            return Interest(head + wire[off:pos] + wire[e:vend], interest.name,
                            interest.can_be_prefix, interest.must_be_fresh, interest.nonce,
                            interest.lifetime, interest.hop_limit, at, interest.pit_token, (),
                            interest.congestion_mark)
        pos = e
    return interest


def with_nonce(interest: Interest) -> Interest:
    """An Interest received without a Nonce gets one before forwarding (as NFD does)."""
    nonce = new_nonce()
    _, off, vend = read_tl(interest.wire, 0, len(interest.wire))
    _, _, nend = read_tl(interest.wire, off, vend)
    # Nonce goes after Name/CanBePrefix/MustBeFresh/ForwardingHint; inserting it right after
    # those keeps element order valid.
    pos = nend
    while pos < vend:
        t, _, e = read_tl(interest.wire, pos, vend)
        if t not in (CAN_BE_PREFIX, MUST_BE_FRESH, 0x1E):
            break
        pos = e
    value = interest.wire[off:pos] + encode_tlv(NONCE, nonce) + interest.wire[pos:vend]
    wire = encode_tlv(INTEREST, value)
    return decode_interest(wire, 0, len(wire), interest.pit_token, interest.congestion_mark)
