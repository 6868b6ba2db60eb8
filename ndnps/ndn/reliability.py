"""NDNLPv2 link reliability (TxSequence / Ack) for one face, sans-I/O — NFD's LpReliability.

A face with reliability enabled sends every packet in an LpPacket with a TxSequence and keeps
it until the other end acknowledges that TxSequence (an Ack header, piggybacked on the next
packet it sends, or alone after `ack_delay`, or at once when a TxSequence was skipped); a
Sequence header, the same in every transmission of a frame, lets the receiver drop a frame it
already has, as NFD does.  A frame is retransmitted, under a new TxSequence, once
`loss_threshold` frames sent after it were acknowledged first (NFD waits for 3; a link delivers
in order and Acks leave in the order frames came, so one suffices: an Ack lost with its packet
costs a duplicate the receiver drops), by a tail loss probe, or when it stays unacknowledged
for an RTO; after `max_retx` retransmissions it is given up (counted).  The receiver drops a
Sequence it has delivered recently (a retransmission whose Ack was lost: a pushed Data
delivered twice would be multicast twice) and hands the network packet up without the three
headers.

Fragmentation (fragmentation.py) sits above: a fragment already carries a Sequence, which
becomes its frame number (no second Sequence field), so a lost fragment is resent alone; the
receiver keeps a fragment's Sequence, FragIndex and FragCount for the reassembler.  `mtu`
bounds every LpPacket sent, the Acks it carries included.

So a loss on one lossy hop costs that hop's round trip, not the consumer's end-to-end retry
(NFD does the same; python-ndn and NDNts do not implement it, which is why it is off unless a
face asks for it with faces/update, flag LpReliabilityEnabled).  The adapter (ReliableLink,
reliable_link.py) calls `wrap` for each packet it sends, `receive` for each it reads, and `poll`
when `deadline` has passed.
"""
from __future__ import annotations

import random
import struct
from collections import OrderedDict
from dataclasses import dataclass, field, fields
from typing import Final, Union

from .rto import RtoEstimator
from .tlv import (LP_ACK, LP_FRAG_COUNT, LP_FRAG_INDEX, LP_FRAGMENT, LP_PACKET, LP_SEQUENCE,
                  LP_TX_SEQUENCE, MAX_PACKET_SIZE, decode_nonneg, encode_tlv, encode_varnum,
                  lp_fragment, read_tl, short_length)

# fixed-width 8-octet values, as ndn-cxx encodes Sequence, TxSequence and Ack
_SEQ_HEAD: Final = encode_varnum(LP_SEQUENCE) + b"\x08"
_ACK_HEAD: Final = encode_varnum(LP_ACK) + b"\x08"
_TXSEQ_HEAD: Final = encode_varnum(LP_TX_SEQUENCE) + b"\x08"
_ACK_SIZE: Final = len(_ACK_HEAD) + 8
_LP_TYPE: Final = encode_varnum(LP_PACKET)
# LpPacket TL, Sequence, TxSequence, Fragment TL: what `wrap` adds at most (a fragmenter below
# an MTU leaves this much room)
WRAP_OVERHEAD: Final = 4 + len(_SEQ_HEAD) + 8 + len(_TXSEQ_HEAD) + 8 + 4
_MASK: Final = (1 << 64) - 1
_u64: Final = struct.Struct(">Q").unpack_from
# fixed-shape fields, each with the head of the field after it, read or written in one call
_SEQ_FIELD: Final = struct.Struct(">2sQ")            # Sequence
_SEQ_NEXT: Final = struct.Struct(">2sQ4s")           # Sequence read with the next field's head
_ACK_FIELD: Final = struct.Struct(">4sQ")            # an Ack (written; read with the next head)
_ACK_NEXT: Final = struct.Struct(">Q4s")             # an Ack's value; the next field's head
_TX_FIELD: Final = struct.Struct(">4sQB")            # TxSequence; the Fragment's TLV-TYPE
# a packet to send: bytes, or bytearray as python-ndn builds some — spelled out for the
# optional mypyc build, which checks argument types at run time (what is read is bytes)
Wire = Union[bytes, bytearray]


@dataclass
class ReliabilityCounters:
    """NDNLPv2 link reliability on one face."""
    acknowledged: int = 0
    retransmitted: int = 0
    tail_probes: int = 0           # of which: the newest frame re-sent after 2 round trips
    given_up: int = 0              # dropped after max_retx, or pushed out of max_unacked
    duplicates: int = 0            # received again (its Ack had been lost)
    idle_acks: int = 0             # LpPackets sent that carried only Acks
    gaps: int = 0                  # TxSequences skipped on receipt: Acks sent without delay
    acks_dropped: int = 0
    malformed: int = 0

    def as_dict(self) -> dict[str, int]:
        # not __dict__: the optional mypyc build's classes have none
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class ReliabilityOptions:
    max_retx: int = 3              # retransmissions of one frame before it is given up
    loss_threshold: int = 1        # later frames acknowledged before a frame counts as lost
    # an Ack waits this long for a packet to ride on (NFD: 5 ms).  It is part of every round
    # trip the sender measures on a one-way burst (a push), so of its tail probe's wait: 2 ms
    # and a 4 ms probe floor took 5 % loss from x1.32 to x1.15 of lossless (bench/HISTORY.md)
    ack_delay: float = 0.001
    initial_rto: float = 0.2
    # above the time a busy peer takes to read (a worker computing a 100k gradient: ~10 ms):
    # at 5 ms, a lossless 100k run re-sent ~1,000 frames for nothing, at 30 ms a tail frame
    # lost twice made its version wait 30 ms, about every version at 20 % loss
    min_rto: float = 0.015
    min_pto: float = 0.002         # a tail probe waits 2 smoothed round trips, at least this
    max_rto: float = 2.0
    max_unacked: int = 4096        # frames kept for retransmission (oldest given up first)
    max_acks: int = 8192           # Acks waiting to be sent (oldest dropped: the peer retries)
    recent_rx: int = 8192          # Sequences remembered (the last recent_rx at least, twice
                                   # as many at most) to drop duplicate retransmissions


class _Frame:
    """One frame kept until acknowledged (a slotted class: one is made per packet sent)."""
    __slots__ = ("packet", "frame", "sent", "retx", "later_acked")

    def __init__(self, packet: Wire, frame: int, sent: float) -> None:
        self.packet = packet        # the network-layer packet (or LpPacket) as given to wrap
        self.frame = frame          # its Sequence, the same in each retransmission
        self.sent = sent
        self.retx = 0
        self.later_acked = 0


@dataclass
class LpReliability:
    options: ReliabilityOptions = field(default_factory=ReliabilityOptions)
    # shared by the successive instances of one app's face (reconnects keep its totals)
    counters: ReliabilityCounters = field(default_factory=ReliabilityCounters)
    mtu: int = MAX_PACKET_SIZE          # the longest LpPacket the link carries

    def __post_init__(self) -> None:
        self._next_seq = random.getrandbits(63)
        self._next_frame = random.getrandbits(63)
        self._unacked: OrderedDict[int, _Frame] = OrderedDict()   # by TxSequence = send order
        self._acks: list[int] = []
        self._acks_since: float | None = None
        self._rx_next: int | None = None    # the TxSequence expected next from the peer
        # Acks sent in the last packet, sent once more in the next: an LpPacket lost with its
        # Acks would otherwise make the peer re-send every frame they acknowledged (it takes
        # them as lost once a later one is acknowledged): half the retransmissions at 5 % loss
        self._repeat: list[int] = []
        self._lost: list[int] = []          # TxSequences known lost, for the next poll
        self._probe_armed = True            # one tail probe per Ack received
        # Sequences delivered lately, in two generations of up to recent_rx each: the older
        # set is dropped whole when the newer fills (cheaper than an ordered queue)
        self._recent: set[int] = set()
        self._recent_old: set[int] = set()
        o = self.options
        self._rto = RtoEstimator(o.initial_rto, min_rto=o.min_rto, max_rto=o.max_rto)
        self.rto = self._rto.rto            # cached: read for every frame a poll looks at

    # ---- sending ----------------------------------------------------------------------------

    def wrap(self, packet: Wire, now: float) -> bytes:
        """The LpPacket to send for `packet` (a network packet, an LpPacket carrying a
        PitToken or Nack, or a fragment), with a new TxSequence and as many pending Acks as
        fit; a fragment's Sequence is its frame number."""
        if len(packet) + WRAP_OVERHEAD > self.mtu:
            return bytes(packet)    # no room for the headers: sent unreliable, as it came
        seq = self._next_seq
        self._next_seq = (seq + 1) & _MASK
        frame = _carried_sequence(packet) if packet[0] == LP_PACKET else None
        if frame is None:
            frame = self._next_frame
            self._next_frame = (frame + 1) & _MASK
        self._unacked[seq] = _Frame(packet, frame, now)
        if len(self._unacked) > self.options.max_unacked:
            self._unacked.popitem(last=False)
            self.counters.given_up += 1
        return self._encode(packet, seq, frame)

    def _encode(self, packet: Wire, seq: int, frame: int) -> bytes:
        headers = b""
        inner: Wire = packet
        if packet[0] == LP_PACKET:
            lp = bytes(packet)
            start, fields_end, inner_start, inner_end = lp_fragment(lp)
            headers, inner = lp[start:fields_end], lp[inner_start:inner_end]
            if headers.startswith(_SEQ_HEAD):
                headers = headers[_SEQ_FIELD.size:]     # a fragment's: `frame`, written below
        n = len(inner)
        acks = b""
        if self._acks or self._repeat:
            acks = self._take_acks((self.mtu - len(headers) - n - WRAP_OVERHEAD) // _ACK_SIZE)
        # 1- or 3-octet TLV-LENGTHs: `wrap` sends nothing longer than MAX_PACKET_SIZE wrapped
        fragment_length = bytes((n,)) if n < 253 else b"\xfd" + n.to_bytes(2, "big")
        # header fields in TLV-TYPE order (Sequence, FragIndex / FragCount, PitToken / Nack /
        # CongestionMark, Ack, TxSequence); the network packet is copied once, into the result
        total = (_SEQ_FIELD.size + len(headers) + len(acks) + _TX_FIELD.size
                 + len(fragment_length) + n)
        return b"".join((_LP_TYPE, bytes((total,)) if total < 253 else
                         b"\xfd" + total.to_bytes(2, "big"),
                         _SEQ_FIELD.pack(_SEQ_HEAD, frame), headers, acks,
                         _TX_FIELD.pack(_TXSEQ_HEAD, seq, LP_FRAGMENT), fragment_length, inner))

    def _take_acks(self, room: int) -> bytes:
        """The Ack fields for one packet: waiting Acks first, then the last packet's again."""
        acks, repeat = self._acks, self._repeat
        if not (acks or repeat) or room <= 0:
            return b""
        take, self._acks = acks[:room], acks[room:]
        if not self._acks:
            self._acks_since = None
        again = repeat[:room - len(take)]
        self._repeat = take
        pack = _ACK_FIELD.pack
        return b"".join([pack(_ACK_HEAD, s) for s in take + again])

    # ---- receiving --------------------------------------------------------------------------

    def receive(self, wire: bytes, now: float) -> bytes | None:
        """The packet to hand up for `wire` as read from the face: without TxSequence and Ack
        headers, and without Sequence unless it is a fragment's (a bare network packet when
        nothing else was in its LpPacket); None for an Ack-only packet or a duplicate.
        Malformed LpPackets are handed up unchanged (the forwarder's decoder counts and drops
        them)."""
        if not wire or wire[0] != LP_PACKET:
            return wire
        fast = _read_own(wire)
        if fast is None:
            return self._receive_any(wire, now)
        frame, acked, txseq, start = fast
        if acked:
            self._on_acks(acked, now)
        if start == len(wire):
            return None
        self._queue_ack(txseq, now)
        if self._delivered(frame):
            return None
        return wire[start:]

    def _receive_any(self, wire: bytes, now: float) -> bytes | None:
        """`receive` for an LpPacket of any shape (other headers, other field order, a peer
        that sends no Sequence)."""
        try:
            _, off, end = read_tl(wire, 0, len(wire))
            txseq = frame = None
            acked: list[int] = []
            kept: list[tuple[int, int]] = []        # other headers (PitToken, Nack, ...)
            fragment: tuple[int, int, int] | None = None
            sequence = (0, 0)
            fragmented = False
            while off < end:
                start = off
                typ, voff, off = read_tl(wire, off, end)
                if typ == LP_ACK:
                    acked.append(decode_nonneg(wire, voff, off))
                elif typ == LP_TX_SEQUENCE:
                    txseq = decode_nonneg(wire, voff, off)
                elif typ == LP_SEQUENCE:
                    frame = decode_nonneg(wire, voff, off)
                    sequence = (start, off)
                elif typ == LP_FRAGMENT:
                    fragment = (start, voff, off)
                else:
                    kept.append((start, off))
                    fragmented = fragmented or typ == LP_FRAG_INDEX or typ == LP_FRAG_COUNT
        except Exception:           # DecodeError, IndexError: let the decoder drop it
            self.counters.malformed += 1
            return wire
        if acked:
            self._on_acks(acked, now)
        if fragment is None or fragment[1] == fragment[2]:
            return None
        if txseq is not None:
            self._queue_ack(txseq, now)
        if frame is not None and self._delivered(frame):
            return None
        if fragmented and frame is not None:
            kept.insert(0, sequence)                # the reassembler's; the lowest TLV-TYPE
        if not kept:
            return wire[fragment[1]:fragment[2]]
        return encode_tlv(LP_PACKET, b"".join([wire[a:b] for a, b in kept]
                                               + [wire[fragment[0]:fragment[2]]]))

    def _queue_ack(self, txseq: int, now: float) -> None:
        acks = self._acks
        if len(acks) >= self.options.max_acks:
            acks.pop(0)
            self.counters.acks_dropped += 1
        acks.append(txseq)
        if self._acks_since is None:
            self._acks_since = now
        expected = self._rx_next
        if txseq == expected or expected is None:
            self._rx_next = (txseq + 1) & _MASK
        elif older_than(txseq, expected):
            # TxSequences skipped: the frames between were lost (a link delivers in order).
            # The Acks leave now, not after ack_delay, as TCP acks at once out of order: the
            # peer re-sends on the first later Ack, so the repair costs one link round trip
            # (on a one-way burst, as a push, nothing else would carry them for ack_delay)
            self._rx_next = (txseq + 1) & _MASK
            self._acks_since = min(self._acks_since, now - self.options.ack_delay)
            self.counters.gaps += 1

    def _delivered(self, frame: int) -> bool:
        """Whether this Sequence was handed up lately (a duplicate); remembered if not."""
        recent = self._recent
        if frame in recent or frame in self._recent_old:
            self.counters.duplicates += 1
            return True
        recent.add(frame)
        if len(recent) >= self.options.recent_rx:
            self._recent_old, self._recent = recent, set()
        return False

    def _on_acks(self, acked: list[int], now: float) -> None:
        """The Acks of one received packet: frames acknowledged, one RTT sample (the newest
        frame's: one per packet, as TCP takes one per ACK), and the frames sent before them
        and still unacknowledged one step nearer to being lost."""
        unacked = self._unacked
        newest: _Frame | None = None
        newest_seq = 0
        done = []
        for seq in acked:
            frame = unacked.pop(seq, None)
            if frame is None:
                continue            # late, duplicate, or for a frame already given up
            done.append(seq)
            if newest is None or older_than(seq, newest_seq):
                newest, newest_seq = frame, seq
        if newest is None:
            return
        self.counters.acknowledged += len(done)
        self._probe_armed = True
        self._rto.observe(now - newest.sent)
        self.rto = self._rto.rto
        if not unacked:
            return
        threshold = self.options.loss_threshold
        for older, f in unacked.items():        # in send order: stop at the first newer one
            if not older_than(newest_seq, older):
                break
            later = sum(1 for seq in done if older_than(seq, older))
            if f.later_acked < threshold <= f.later_acked + later:
                self._lost.append(older)
            f.later_acked += later

    # ---- timers -----------------------------------------------------------------------------

    def deadline(self) -> float | None:
        """When `poll` has something to do (an RTO or an Ack that waited long enough)."""
        if self._lost:
            return 0.0
        at = None
        if self._unacked:
            at = next(iter(self._unacked.values())).sent + self.rto
            probe = self._probe_at()
            if probe is not None and probe < at:
                at = probe
        if self._acks_since is not None:
            ack_at = self._acks_since + self.options.ack_delay
            if at is None or ack_at < at:
                at = ack_at
        return at

    def _probe_at(self) -> float | None:
        """When to re-send the newest unacknowledged frame (a tail loss probe, as TCP's): no
        later frame will reveal the loss of a burst's last frames, and the RTO is long; its
        Ack reveals any loss before it.  One probe per Ack received; none before a sample."""
        srtt = self._rto.stats.mean
        if not self._probe_armed or srtt is None or not self._unacked:
            return None
        newest = self._unacked[next(reversed(self._unacked))]
        return newest.sent + max(self.options.min_pto, 2 * srtt)

    def poll(self, now: float) -> list[bytes]:
        """Packets to send now: retransmissions of frames lost (by later Acks) or timed out,
        a tail probe, and an Ack-only LpPacket when Acks waited `ack_delay` for a packet to
        ride on."""
        out = []
        lost, self._lost = self._lost, []
        timed_out = False
        for seq, f in self._unacked.items():        # in send order: the oldest time out first
            if f.sent + self.rto > now:
                break
            lost.append(seq)
            timed_out = True
        if timed_out:       # back off, as TCP: the peer may be busy, not the link lossy
            self._rto.backoff()
            self.rto = self._rto.rto
        probe = self._probe_at()
        if probe is not None and probe <= now:
            lost.append(next(reversed(self._unacked)))
            self._probe_armed = False
            self.counters.tail_probes += 1
        for seq in lost:
            frame = self._unacked.pop(seq, None)
            if frame is None:
                continue            # acknowledged after all, or listed twice
            if frame.retx >= self.options.max_retx:
                self.counters.given_up += 1
                continue
            frame.retx += 1
            frame.later_acked = 0
            frame.sent = now
            new = self._next_seq
            self._next_seq = (new + 1) & _MASK
            self._unacked[new] = frame
            self.counters.retransmitted += 1
            out.append(self._encode(frame.packet, new, frame.frame))
        if self._acks and self._acks_since is not None \
                and now >= self._acks_since + self.options.ack_delay:
            out.append(encode_tlv(LP_PACKET, self._take_acks((self.mtu - 4) // _ACK_SIZE)))
            self.counters.idle_acks += 1
        return out

    @property
    def lost(self) -> bool:
        """Whether frames are known lost (by later Acks) and wait for `poll` to go again."""
        return bool(self._lost)

    @property
    def unacked(self) -> int:
        return len(self._unacked)


def older_than(a: int, b: int) -> bool:
    """Whether TxSequence b was sent before a (64-bit serial arithmetic)."""
    return 0 < ((a - b) & _MASK) < (1 << 63)


def _carried_sequence(packet: Wire) -> int | None:
    """The Sequence an LpPacket carries as its first header field in 8 octets (a fragment's,
    as fragmentation.py writes it), or None."""
    off = 2 if packet[1] < 253 else 4
    if packet[off:off + 2] != _SEQ_HEAD or len(packet) < off + _SEQ_FIELD.size:
        return None
    return int(_u64(packet, off + 2)[0])


def _read_own(wire: bytes) -> tuple[int, list[int], int, int] | None:
    """The headers of an LpPacket shaped as `_encode` writes them (Sequence, Acks, TxSequence,
    then a Fragment to the end, or Acks alone), read at fixed offsets without slicing: (Sequence,
    Acks, TxSequence, where the network packet starts; len(wire) for Acks alone).  None for any
    other shape (the general reader takes it)."""
    try:
        end = len(wire)
        outer = short_length(wire, 1)       # the LpPacket's TLV-LENGTH
        if outer is None or outer[0] + outer[1] != end:
            return None
        off = outer[0]
        acked = []
        if wire[off] != LP_SEQUENCE:
            while wire.startswith(_ACK_HEAD, off):      # Acks alone
                acked.append(_u64(wire, off + 4)[0])
                off += 12
            return (0, acked, 0, off) if off == end and acked else None
        head, frame, after = _SEQ_NEXT.unpack_from(wire, off)
        if head != _SEQ_HEAD:
            return None
        off += 10
        while after == _ACK_HEAD:
            value, after = _ACK_NEXT.unpack_from(wire, off + 4)
            acked.append(value)
            off += 12
        if after != _TXSEQ_HEAD:
            return None
        _, txseq, fragment = _TX_FIELD.unpack_from(wire, off)
        if fragment != LP_FRAGMENT:
            return None
        inner = short_length(wire, off + 13)
    except (IndexError, struct.error):                  # truncated
        return None
    if inner is None or inner[0] + inner[1] != end or inner[1] == 0:
        return None
    return frame, acked, txseq, inner[0]
