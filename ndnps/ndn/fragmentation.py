"""NDNLPv2 fragmentation and reassembly for one link, sans-I/O — NFD's LpFragmenter and
LpReassembler.

A packet longer than the link's MTU leaves as LpPackets [Sequence, FragIndex, FragCount,
(first fragment only: the packet's other header fields), Fragment], with consecutive
Sequences, each at most MTU octets; the receiver gathers them by message (Sequence −
FragIndex), in any order, and hands up the whole network packet — bare, or in an LpPacket
with the first fragment's header fields (PitToken, Nack, CongestionMark ...), so a mark set
before fragmenting reaches the next hop whole.  Fields in increasing TLV-TYPE order,
Sequence in 8 octets and FragIndex / FragCount as NonNegativeIntegers, as ndn-cxx encodes
and requires them: NFD reassembles our fragments and we reassemble NFD's.

Link reliability sits below: each fragment is a frame of its own (LpReliability reuses the
Sequence a fragment carries as its frame number), so a lost fragment is resent alone.

Reassembly is bounded — partial packets (count and bytes), FragCount, the reassembled size —
and a partial packet not completed `timeout` seconds after its latest fragment is dropped;
time is passed in (`now`), so every rule is a fake-clock test.  Malformed fragments raise
DecodeError after being counted: the face counts the drop as it counts other malformed input.
"""
from __future__ import annotations

import random
import struct
from collections import OrderedDict
from dataclasses import dataclass, fields
from typing import Final, cast

from .tlv import (LP_ACK, LP_FRAG_COUNT, LP_FRAG_INDEX, LP_FRAGMENT, LP_PACKET, LP_SEQUENCE,
                  LP_TX_SEQUENCE, MAX_PACKET_SIZE, DecodeError, decode_nonneg, lp_fragment,
                  nonneg_element, read_tl, short_length, tl)

# NFD's nMaxFragments: FragCount above it is refused (and, sending, a packet needing more
# fragments is dropped).  Below 65536, so FragIndex and FragCount take at most 2 octets.
MAX_FRAGMENTS: Final = 400
# Worst-case octets a fragment adds to its share of the packet, other header fields aside:
# LpPacket TL (1 + 3), Sequence (1 + 1 + 8), FragIndex and FragCount (1 + 1 + 2 each),
# Fragment TL (1 + 3): a network packet is at most MAX_PACKET_SIZE, so lengths take 3 octets.
FRAG_OVERHEAD: Final = 4 + 10 + 4 + 4 + 4
_MASK: Final = (1 << 64) - 1
# Sequence (8 octets), FragIndex and FragCount (1 octet each): how NFD and we begin a fragment
# while FragCount < 256; with the Fragment's TLV-TYPE after them (every fragment but a first
# one with other headers), the reassembler reads them at fixed offsets
_SEQUENCE: Final = struct.Struct(">BBQ")
_HEAD: Final = struct.Struct(">BBQBBBBBB")
_PLAIN: Final = struct.Struct(">BBQBBBBBBB")
_PLAIN_TYPES: Final = (LP_SEQUENCE, 8, LP_FRAG_INDEX, 1, LP_FRAG_COUNT, 1, LP_FRAGMENT)
# header fields of one LpPacket that describe that frame on the link, not the packet it
# carries: never copied from a packet into its fragments, nor from a fragment to the packet
_LINK_FIELDS: Final = frozenset((LP_SEQUENCE, LP_FRAG_INDEX, LP_FRAG_COUNT, LP_ACK,
                                 LP_TX_SEQUENCE))
# the first header field of a fragment (fields come in increasing TLV-TYPE order)
_FRAGMENT_FIRST: Final = frozenset((LP_SEQUENCE, LP_FRAG_INDEX, LP_FRAG_COUNT))


@dataclass
class FragmentationCounters:
    """NDNLPv2 fragmentation on one face: packets sent in fragments, packets reassembled, and
    what reassembly dropped."""
    fragmented: int = 0        # packets sent as fragments
    fragments_out: int = 0
    fragment_errors: int = 0   # packets dropped: the MTU leaves no room, or too many fragments
    fragments_in: int = 0
    reassembled: int = 0
    timed_out: int = 0         # partial packets dropped `timeout` after their latest fragment
    evicted: int = 0           # partial packets dropped to stay within the bounds
    malformed: int = 0         # fragments dropped: bad fields, FragCount changed, oversize
    duplicates: int = 0        # fragments received again

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class ReassemblyOptions:
    timeout: float = 0.5           # s after a partial packet's latest fragment (NFD: 500 ms)
    max_partial: int = 128         # partial packets held (the least recently added to goes)
    max_bytes: int = 1 << 20       # fragment octets held
    max_fragments: int = MAX_FRAGMENTS

    def validate(self) -> None:
        if not self.timeout > 0:
            raise ValueError(f"timeout must be > 0, got {self.timeout}")
        if self.max_partial < 1:
            raise ValueError(f"max_partial must be >= 1, got {self.max_partial}")
        if self.max_bytes < MAX_PACKET_SIZE:
            raise ValueError(f"max_bytes must be >= {MAX_PACKET_SIZE}, got {self.max_bytes}")
        if not 2 <= self.max_fragments <= MAX_FRAGMENTS:
            raise ValueError(f"max_fragments must be within [2, {MAX_FRAGMENTS}]")


def _without_link_fields(headers: bytes) -> bytes:
    """`headers` (whole header fields) less those that describe a frame on the link."""
    kept = []
    off, end = 0, len(headers)
    while off < end:
        start = off
        typ, _, off = read_tl(headers, off, end)
        if typ not in _LINK_FIELDS:
            kept.append(headers[start:off])
    return b"".join(kept)


def _lp_packet(body_parts: list[bytes]) -> bytes:
    length = sum(map(len, body_parts))
    return b"".join([tl(LP_PACKET, length), *body_parts])


def _fragment_head(seq: int, index: int, count: int) -> bytes:
    if count < 256:
        return _HEAD.pack(LP_SEQUENCE, 8, seq, LP_FRAG_INDEX, 1, index, LP_FRAG_COUNT, 1, count)
    return (_SEQUENCE.pack(LP_SEQUENCE, 8, seq) + nonneg_element(LP_FRAG_INDEX, index)
            + nonneg_element(LP_FRAG_COUNT, count))


def _read_plain(wire: bytes) -> tuple[int, int, int, bytes] | None:
    """(Sequence, FragIndex, FragCount, payload) of a fragment shaped [Sequence (8 octets),
    FragIndex, FragCount (1 octet each), Fragment], read at fixed offsets; None for any
    other shape (the general reader takes it)."""
    outer = short_length(wire, 1)
    if outer is None or sum(outer) != len(wire) or len(wire) < outer[0] + _PLAIN.size:
        return None
    t1, l1, seq, t2, l2, index, t3, l3, count, t4 = _PLAIN.unpack_from(wire, outer[0])
    if (t1, l1, t2, l2, t3, l3, t4) != _PLAIN_TYPES:
        return None
    inner = short_length(wire, outer[0] + _PLAIN.size)
    if inner is None or sum(inner) != len(wire):
        return None
    return seq, index, count, wire[inner[0]:]


class Fragmenter:
    """Splits packets longer than an MTU into fragments, numbered from its own Sequence."""

    def __init__(self, counters: FragmentationCounters | None = None,
                 max_fragments: int = MAX_FRAGMENTS) -> None:
        self.counters = counters if counters is not None else FragmentationCounters()
        self.max_fragments = max_fragments
        self.next_sequence = random.getrandbits(63)

    def fragment(self, packet: bytes, mtu: int) -> list[bytes]:
        """`packet` (bare, or an LpPacket) as LpPackets of at most `mtu` octets; [packet] if it
        fits; [] (counted) if it cannot be split: no room for a fragment's headers and one
        octet of payload, too many fragments, a network packet over MAX_PACKET_SIZE (the
        receiver would refuse it), or a malformed LpPacket."""
        if len(packet) <= mtu:
            return [packet]
        try:
            start, fields_end, inner_start, inner_end = lp_fragment(packet)
            headers = _without_link_fields(packet[start:fields_end]) if fields_end > start \
                else b""
            # a bare packet as it is, not sliced (the compiled build's slice copies, even a
            # whole one)
            inner = packet[inner_start:inner_end] if inner_start else packet
        except DecodeError:
            headers, inner = b"", b""
        n = len(inner)
        room = mtu - FRAG_OVERHEAD
        first_room = room - len(headers)
        if n == 0 or first_room < 1 or n > MAX_PACKET_SIZE:
            self.counters.fragment_errors += 1
            return []
        count = 1 + -(-(n - first_room) // room) if n > first_room else 1
        if count > self.max_fragments:
            self.counters.fragment_errors += 1
            return []
        seq = self.next_sequence
        self.next_sequence = (seq + count) & _MASK
        out = []
        begin, end = 0, first_room
        for index in range(count):
            chunk = inner[begin:end]
            out.append(_lp_packet([_fragment_head((seq + index) & _MASK, index, count),
                                   headers if index == 0 else b"",
                                   tl(LP_FRAGMENT, len(chunk)), chunk]))
            begin, end = end, end + room
        self.counters.fragmented += 1
        self.counters.fragments_out += count
        return out


def _read_any(wire: bytes) -> tuple[int, int, int, bytes, bytes | None]:
    """(Sequence, FragIndex, FragCount, other header fields, payload) of an LpPacket of any
    shape; FragIndex 0 and FragCount 1 when absent; DecodeError if malformed."""
    _, off, end = read_tl(wire, 0, len(wire))
    if end != len(wire):
        raise DecodeError("trailing bytes after LpPacket")
    seq: int | None = None
    index, count = 0, 1
    headers: list[bytes] = []
    payload: bytes | None = None
    while off < end:
        start = off
        typ, voff, off = read_tl(wire, off, end)
        if payload is not None:
            raise DecodeError("LpPacket field after Fragment")
        if typ == LP_FRAGMENT:
            payload = wire[voff:off]
        elif typ == LP_SEQUENCE:
            seq = decode_nonneg(wire, voff, off)
        elif typ == LP_FRAG_INDEX:
            index = decode_nonneg(wire, voff, off)
        elif typ == LP_FRAG_COUNT:
            count = decode_nonneg(wire, voff, off)
        elif typ not in _LINK_FIELDS:
            headers.append(wire[start:off])
    if seq is None and count > 1:
        raise DecodeError("fragment without Sequence")
    return seq or 0, index, count, b"".join(headers), payload


class _Partial:
    """A packet some of whose fragments have come (slotted: one per packet in reassembly)."""
    __slots__ = ("count", "fragments", "received", "size", "headers", "deadline")

    def __init__(self, count: int, deadline: float) -> None:
        self.count = count
        self.fragments: list[bytes | None] = [None] * count
        self.received = 0
        self.size = 0
        self.headers = b""          # the first fragment's (less the link fields)
        self.deadline = deadline


class Reassembler:
    """Gathers the fragments of one peer's packets (NFD keys by endpoint too: one per face)."""

    def __init__(self, options: ReassemblyOptions | None = None,
                 counters: FragmentationCounters | None = None) -> None:
        self.options = options if options is not None else ReassemblyOptions()
        self.options.validate()
        self.counters = counters if counters is not None else FragmentationCounters()
        # by message id (Sequence − FragIndex), least recently added to first: expiry stops at
        # the first partial still in time, eviction takes the first
        self._partial: OrderedDict[int, _Partial] = OrderedDict()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._partial)

    def receive(self, wire: bytes, now: float) -> bytes | None:
        """The packet to hand up for `wire`: itself unless it is a fragment (its first header
        field a Sequence, FragIndex or FragCount, and FragCount > 1); the whole packet when
        this fragment completes one; None while incomplete or for a duplicate.  Raises
        DecodeError for a malformed fragment (counted)."""
        if len(wire) < 5 or wire[0] != LP_PACKET:
            return wire
        first = 2 if wire[1] < 253 else 4       # longer TLV-LENGTHs: no datagram is that long
        if wire[first] not in _FRAGMENT_FIRST:
            return wire
        if self._partial:
            self.expire(now)
        try:
            return self._receive(wire, now)
        except DecodeError:
            self.counters.malformed += 1
            raise

    def _receive(self, wire: bytes, now: float) -> bytes | None:
        plain = _read_plain(wire)
        if plain is not None:
            return self._gather(wire, *plain[:3], b"", plain[3], now)
        return self._gather(wire, *_read_any(wire), now)

    def _gather(self, wire: bytes, seq: int, index: int, count: int, headers: bytes,
                payload: bytes | None, now: float) -> bytes | None:
        """One fragment's place in its packet (`headers`: its other header fields)."""
        if index >= count:
            raise DecodeError("FragIndex >= FragCount")
        if count == 1:
            return wire             # a whole packet: the decoder reads its fields
        if count > self.options.max_fragments:
            raise DecodeError(f"FragCount {count} over {self.options.max_fragments}")
        if not payload:
            raise DecodeError("fragment without payload")
        self.counters.fragments_in += 1
        key = (seq - index) & _MASK
        partial = self._partial.get(key)
        if partial is None:
            partial = self._partial[key] = _Partial(count, now + self.options.timeout)
            if len(self._partial) > self.options.max_partial:
                self._evict()
        elif partial.count != count:
            self._drop(key)
            raise DecodeError("FragCount changed")
        elif partial.fragments[index] is not None:
            self.counters.duplicates += 1
            return None
        else:
            self._partial.move_to_end(key)          # kept in order of deadline
            partial.deadline = now + self.options.timeout
        size = len(payload)
        if partial.size + size > MAX_PACKET_SIZE:
            self._drop(key)
            raise DecodeError("reassembled packet over MAX_PACKET_SIZE")
        partial.fragments[index] = payload
        partial.received += 1
        partial.size += size
        self.bytes += size
        if index == 0:
            partial.headers = headers
        if partial.received < count:
            while self.bytes > self.options.max_bytes:
                self._evict()
            return None
        self._drop(key)
        self.counters.reassembled += 1
        inner = b"".join(cast(list[bytes], partial.fragments))     # all present
        if not partial.headers:
            return inner
        return _lp_packet([partial.headers, tl(LP_FRAGMENT, len(inner)), inner])

    def expire(self, now: float) -> None:
        """Drop the partial packets whose time is up."""
        partial = self._partial
        while partial:
            key, oldest = next(iter(partial.items()))
            if oldest.deadline > now:
                return
            self._drop(key)
            self.counters.timed_out += 1

    def _evict(self) -> None:
        self._drop(next(iter(self._partial)))
        self.counters.evicted += 1

    def _drop(self, key: int) -> None:
        self.bytes -= self._partial.pop(key).size

