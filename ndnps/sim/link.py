"""A simulated point-to-point link: two channels, one each way, in virtual time.

A channel models what a forwarder's UDP face and the wire below it do to a packet, with the
real faces' own pieces rather than copies: a packet longer than the MTU leaves as NDNLPv2
fragments (ndnps.ndn.fragmentation's Fragmenter) and is reassembled at the far end
(Reassembler); frames wait in the face's bounded send queue (faces/queue.py's SendQueue, with
its CoDel-timed marking rule) while the link is busy, and a packet that enters a queue that
has stayed above its target is marked (the CongestionMark, ndnps.ndn.congestion) as the real
face marks one the kernel pushed back; the frames then take the wire one at a time, each for
its serialisation time ((frame + per-frame overhead) × 8 / rate), and arrive one propagation
delay after their last bit has left, unless the seeded random loss took them.  That is
ndnSIM's PointToPointNetDevice and channel (transmit time by size, then the channel's delay)
with NFD's GenericLinkService above it, as ndnSIM runs NFD's.

The real face queues only once the kernel pushes back: its socket's send buffer holds the
frames the wire has not taken yet, up to SO_SNDBUF (faces/udp.py), and only then do packets
wait in the face's queue, where they are judged.  `kernel_bytes` models that buffer between
the queue and the wire (Linux's rule: a datagram is taken while less than the limit is held);
0, the default, is a buffer of the one frame on the wire, so the queue starts at once.

What it does not model: jitter, reordering, and CPU time (a forwarder here forwards in zero
virtual time).

Loss is drawn per frame as it is put on the queue (netem drops on enqueue: a lost frame takes
no wire time), so a lost fragment loses its packet as on a real link.  NDNLPv2 link
reliability, when the faces turn it on, sits below fragmentation as on a UDP face: the
sending face's `wrap` makes each fragment a frame of its own, the receiving face's `unwrap`
reads the frames (Acks, retransmissions) before reassembly; its retransmissions and lone
Acks enter by `emit`.  Time is the scheduler's
(`time()`, `call_at`): the virtual loop's, or any asyncio loop's.
"""
from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Protocol

from ndnps.forwarder.faces.queue import QueueOptions, SendQueue
from ndnps.ndn.congestion import set_congestion_mark
from ndnps.ndn.fragmentation import (FragmentationCounters, Fragmenter, Reassembler,
                                     ReassemblyOptions)
from ndnps.ndn.tlv import LP_PACKET, MAX_PACKET_SIZE, DecodeError

# Octets a frame takes on the wire besides itself: Ethernet (14), IPv4 (20) and UDP (8)
# headers, what a veth's rate limit counts for each datagram of a real run.
WIRE_OVERHEAD = 14 + 20 + 8
_LP = bytes((LP_PACKET,))


class Scheduler(Protocol):
    """What a channel needs of an event loop."""

    def time(self) -> float: ...

    def call_at(self, when: float, callback: Callable[..., object], *args: Any) -> Any: ...


class SocketBuffer:
    """A UDP socket's send buffer (SO_SNDBUF): what the kernel holds of the frames its faces
    sent, until the wire takes them. A forwarder's UDP faces share one socket (faces/udp.py's
    channel), so several links' channels may share one buffer (`LinkSpec.socket`): one busy
    face then leaves less room to the others, whose packets wait — and are judged — in their
    own queues sooner. (A channel takes from its queue when a frame of its own leaves the wire:
    within one frame's time of room appearing, where Linux would wake the face at once.)"""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0


@dataclass
class LinkSpec:
    """One direction of a link (a link's two are usually alike)."""
    rate_mbps: float = 0.0          # 0: unlimited (no serialisation time)
    delay_ms: float = 0.0           # propagation
    loss: float = 0.0               # probability a frame is lost
    mtu: int = MAX_PACKET_SIZE      # the longest frame: longer packets leave as fragments
    overhead: int = WIRE_OVERHEAD   # octets per frame on the wire besides the frame
    kernel_bytes: int = 0           # the socket buffer before the wire (0: the frame on it)
    socket: SocketBuffer | None = None  # a buffer shared with other channels (kernel_bytes unused)
    queue: QueueOptions = field(default_factory=QueueOptions)
    reassembly: ReassemblyOptions = field(default_factory=ReassemblyOptions)

    def validate(self) -> None:
        if self.rate_mbps < 0 or self.delay_ms < 0:
            raise ValueError("rate_mbps and delay_ms must be >= 0")
        if not 0.0 <= self.loss <= 1.0:
            raise ValueError(f"loss must be within [0, 1], got {self.loss}")
        if not 64 <= self.mtu <= MAX_PACKET_SIZE:
            raise ValueError(f"mtu must be within [64, {MAX_PACKET_SIZE}], got {self.mtu}")
        if self.overhead < 0 or self.kernel_bytes < 0:
            raise ValueError("overhead and kernel_bytes must be >= 0")
        self.queue.validate()


@dataclass
class ChannelCounters:
    """One direction's traffic: network packets handed to it and frames on its wire."""
    packets: int = 0            # packets sent (each whole, before fragmentation)
    bytes: int = 0              # their octets: what the sending face's out_bytes counts
    frames: int = 0             # frames that took the wire (fragments counted one by one)
    wire_bytes: int = 0         # their octets with the per-frame overhead
    delivered: int = 0          # packets handed up at the far end (reassembled)
    lost: int = 0               # frames the random loss took
    queue_full: int = 0         # packets dropped: the send queue was full
    fragment_errors: int = 0    # packets that could not be fragmented (dropped)
    malformed: int = 0          # frames reassembly refused

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


class Channel:
    """One direction: send(packet) at one end, `deliver(packet)` at the other, later."""

    def __init__(self, spec: LinkSpec, scheduler: Scheduler, deliver: Callable[[bytes], None],
                 rng: random.Random) -> None:
        spec.validate()
        self.spec = spec
        self.scheduler = scheduler
        self.deliver = deliver
        self.rng = rng
        self.counters = ChannelCounters()
        self.fragmentation = FragmentationCounters()
        self.fragmenter = Fragmenter(self.fragmentation)
        self.reassembler = Reassembler(spec.reassembly, self.fragmentation)
        self.queue = SendQueue(spec.queue)
        self._seconds_per_octet = 8 / (spec.rate_mbps * 1e6) if spec.rate_mbps else 0.0
        self._delay = spec.delay_ms / 1000
        # what the kernel holds, the frame on the wire first, and whether one is on it
        self._kernel: deque[bytes] = deque()
        self._buffer = spec.socket if spec.socket is not None else SocketBuffer(spec.kernel_bytes)
        self._busy = False
        self.closed = False
        # link reliability (faces.py's LinkFace sets them): the sender's, on each packet's
        # frames, with room for its headers; the receiver's, on each frame that arrives
        self.wrap: Callable[[list[bytes]], list[bytes]] | None = None
        self.room = spec.mtu
        self.unwrap: Callable[[bytes], list[bytes]] | None = None

    def send(self, wire: bytes) -> None:
        """A packet from the sending face: queued (marked if the queue is congested), in
        fragments if it is longer than the MTU, or dropped if the queue is full."""
        if self.closed:
            return
        now = self.scheduler.time()
        queue = self.queue
        if queue or not self._kernel_takes():   # it will wait: the face's queue rules apply
            if not queue.admits(len(wire)):
                self.counters.queue_full += 1
                return
            if queue.should_mark(now):
                try:
                    wire = set_congestion_mark(wire)
                except DecodeError:         # not ours to judge: sent unmarked
                    pass
        room = self.room
        frames = [wire] if len(wire) <= room else self.fragmenter.fragment(wire, room)
        if not frames:
            self.counters.fragment_errors += 1
            return
        counters = self.counters
        counters.packets += 1
        counters.bytes += len(wire)
        if self.wrap is not None:
            frames = self.wrap(frames)
        for frame in frames:
            self._enqueue(frame, now)

    def emit(self, frame: bytes) -> None:
        """A frame no packet's admission covered (link reliability's retransmissions and
        lone Acks): dropped if it must wait and the queue is full, as the UDP face's."""
        if self.closed:
            return
        if self._waits() and not self.queue.admits(len(frame)):
            self.counters.queue_full += 1
            return
        self._enqueue(frame, self.scheduler.time())

    def _waits(self) -> bool:
        """Whether a packet sent now waits in the face's queue: the real face's `paused`
        (the kernel takes no more), or frames wait before it."""
        return bool(self.queue) or not self._kernel_takes()

    def _kernel_takes(self) -> bool:
        return not self._kernel or self._buffer.held < self._buffer.limit

    # The per-frame path below runs twice per frame (on the wire, then arrived): the helpers
    # above are inlined in it.

    def _enqueue(self, frame: bytes, now: float) -> None:
        loss = self.spec.loss
        if loss and self.rng.random() < loss:
            self.counters.lost += 1
            return
        kernel, buffer = self._kernel, self._buffer
        if not self.queue and (not kernel or buffer.held < buffer.limit):
            kernel.append(frame)
            buffer.held += len(frame)
        else:
            self.queue.push(frame, now)
        if not self._busy:
            self._transmit(now)

    def _transmit(self, now: float) -> None:
        """The wire is free: the kernel's oldest frame goes on it."""
        frame = self._kernel[0]
        self._busy = True
        octets = len(frame) + self.spec.overhead
        counters = self.counters
        counters.frames += 1
        counters.wire_bytes += octets
        self.scheduler.call_at(now + octets * self._seconds_per_octet, self._sent, frame)

    def _sent(self, frame: bytes) -> None:
        """Its last bit has left: it arrives one delay later; the kernel takes what waits in
        the queue as it has room, and the next frame goes on."""
        self._busy = False
        if self.closed:
            return
        scheduler = self.scheduler
        now = scheduler.time()
        scheduler.call_at(now + self._delay, self._arrive, frame)
        kernel, buffer = self._kernel, self._buffer
        kernel.popleft()
        buffer.held -= len(frame)
        queue = self.queue
        if queue:
            limit = buffer.limit
            while queue and (not kernel or buffer.held < limit):
                wire = queue.pop(now)
                kernel.append(wire)
                buffer.held += len(wire)
        if kernel:
            self._transmit(now)

    def _arrive(self, frame: bytes) -> None:
        if self.closed:
            return
        if self.unwrap is not None and frame[:1] == _LP:
            for wire in self.unwrap(frame):
                self._reassemble(wire)
        elif frame[:1] == _LP:
            self._reassemble(frame)
        else:                               # a whole packet: straight up
            self.counters.delivered += 1
            self.deliver(frame)

    def _reassemble(self, wire: bytes) -> None:
        if wire[:1] == _LP:                 # perhaps a fragment
            try:
                whole = self.reassembler.receive(wire, self.scheduler.time())
            except DecodeError:
                self.counters.malformed += 1
                return
            if whole is None:
                return
            wire = whole
        self.counters.delivered += 1
        self.deliver(wire)

    def close(self) -> None:
        """The link goes down: what waits and what is in flight is lost."""
        self.closed = True
        self.queue.clear()
        self._buffer.held -= sum(map(len, self._kernel))
        self._kernel.clear()


def _nowhere(wire: bytes) -> None:
    """The delivery of a channel whose far end has no face yet: dropped."""


class Link:
    """Two channels between end a and end b: `ab` carries a's packets to b, `ba` b's to a."""

    def __init__(self, scheduler: Scheduler, to_b: Callable[[bytes], None] = _nowhere,
                 to_a: Callable[[bytes], None] = _nowhere, spec: LinkSpec | None = None,
                 spec_ba: LinkSpec | None = None, seed: int | str = 0) -> None:
        """`to_b`, `to_a`: each end's delivery (a face attached later sets its channel's
        `deliver`); `spec` both ways unless `spec_ba` is given for b to a."""
        spec = spec if spec is not None else LinkSpec()
        # each direction its own generator: one direction's traffic never shifts the other's
        # losses, so a run is the same whatever the order its events tie in
        self.ab = Channel(spec, scheduler, to_b, random.Random(f"{seed}/ab"))
        self.ba = Channel(spec_ba or spec, scheduler, to_a, random.Random(f"{seed}/ba"))

    def close(self) -> None:
        self.ab.close()
        self.ba.close()
