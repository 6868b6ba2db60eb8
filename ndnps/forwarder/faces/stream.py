"""Stream faces (unix and TCP): TLV framing on a byte stream; a send queue of their own, with
congestion marks as NFD's stream faces set them.

Writing: what the face is given during one loop turn leaves in one writev at its end. The
transport pushes back as soon as the kernel refuses part of a write (its write-buffer limit is
0): from then on packets wait in the face's own queue (ndnps/forwarder/faces/queue.py, bounded at
QUEUE_LIMIT_BYTES, drops counted as `queue_full`), where the forwarder sees how long they wait,
and leave in order as the kernel takes them again (`resume_writing`), DRAIN_BYTES at a time.

Marking (NFD's GenericLinkService congestion detection, with the rule of the UDP faces,
ndnps.ndn.congestion.MarkingRule): the face's queue is above its target when the packet at
its head has waited longer than `target` (CoDel's sojourn time; packets are judged as they
leave, at the head, as CoDel marks, so the mark reaches the consumer ahead of the queue rather
than behind it) or when the socket's kernel send queue with the transport's buffer holds more
than KERNEL_THRESHOLD octets (NFD's StreamTransport measure: SIOCOUTQ, on a unix socket what the
peer has not read yet, on TCP what it has not acknowledged; NFD's defaultCongestionThreshold).
Once above for `interval` (100 ms, NFD's baseCongestionMarkingInterval), a packet leaving is
marked, then the next interval/sqrt(k) later while it stays above; past `step` of waiting,
every packet leaving is.

A unix face (an app on this host) does not mark a *pushed* Data (`*distribute*`), as it marks
pulled Data: the app cannot slow a push, and its face's backlog is the app's own computation
(16 workers on two cores read their sockets between steps), not the path. Marked there, the
workers' reports cut the push rate at 1 Gbit/s where the link sat idle (195 -> 57 Mbit/s over
8 versions, every face between forwarders unmarked). Marks on pushes come from the faces
between forwarders; a consumer too slow for a push still loses segments when its queue is full,
which its reports say.
"""
from __future__ import annotations

import asyncio
import fcntl
import math
import struct
import termios
import time
from typing import Callable

from ndnps.ndn.congestion import MarkingRule, set_congestion_mark
from ndnps.ndn.markers import is_pushed_data
from ndnps.ndn.tlv import DecodeError, StreamFramer
from .base import QUEUE_LIMIT_BYTES, Face, FaceOwner, ip_uri, is_loopback
from .link import LinkEmulator, LinkParams
from .queue import QueueOptions, SendQueue

# NFD's defaultCongestionThreshold: octets waiting in the kernel (and the transport's buffer)
# above which the face counts as congested
KERNEL_THRESHOLD = 64 << 10
# written at a time from the queue: what the kernel does not take of it waits in the
# transport's buffer, where no delay is measured
DRAIN_BYTES = 64 << 10
# s between two reads of the kernel's send queue (a system call): marks act on 100 ms, and a
# busy face flushes every loop turn
KERNEL_SAMPLE = 0.001
_OUTQ = termios.TIOCOUTQ          # == SIOCOUTQ on Linux
_INT = struct.Struct("i")
_ZERO = bytes(_INT.size)


def stream_queue_options() -> QueueOptions:
    """A stream face's queue: QUEUE_LIMIT_BYTES, CoDel's target and interval."""
    return QueueOptions(limit_bytes=QUEUE_LIMIT_BYTES, target=0.005, interval=0.1, step=0.02)


def kernel_send_queue(fd: int) -> int:
    """Octets in the socket's kernel send queue (SIOCOUTQ); 0 where it cannot say."""
    try:
        return _INT.unpack(fcntl.ioctl(fd, _OUTQ, _ZERO))[0]
    except OSError:
        return 0


def _marked(wire: bytes) -> bytes:
    try:
        return set_congestion_mark(wire)
    except DecodeError:                 # not ours to judge: sent unmarked
        return wire


class StreamFace(Face, asyncio.Protocol):
    def __init__(self, owner: FaceOwner, kind: str, persistency: int = 1,
                 link: LinkParams | None = None, local: bool | None = None,
                 queue: QueueOptions | None = None, kernel_threshold: int = KERNEL_THRESHOLD,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._owner = owner
        self._kind = kind                 # "unix" or "tcp"
        self._persistency = persistency
        self._link = link
        self._force_local = local
        self._framer = StreamFramer()
        self.transport: asyncio.Transport | None = None
        self._up = False                  # face_up done: `info` is set
        self._emu: LinkEmulator | None = None
        self._closed = False
        self._outq: list[bytes] = []      # this loop turn's packets, while the kernel takes them
        self._queued = 0
        self._flush_scheduled = False
        self._loop = asyncio.get_event_loop()
        self.queue = SendQueue(queue if queue is not None else stream_queue_options())
        self._rule = MarkingRule(self.queue.options.interval)
        self.kernel_threshold = kernel_threshold
        self._clock = clock
        self._paused = False              # the transport pushed back: packets wait in `queue`
        self._fd = -1                     # the socket's, for its kernel send queue
        self._kernel_octets = 0           # its kernel send queue at the last read
        self._kernel_at = -math.inf       # when that was

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        # a backlog waits in our queue, where its delay is seen, not in the transport's buffer
        transport.set_write_buffer_limits(high=0)   # type: ignore[attr-defined]
        raw = transport.get_extra_info("socket")
        if raw is not None:
            self._fd = raw.fileno()
        if self._kind == "unix":
            path = transport.get_extra_info("sockname") or ""
            fd = self._fd
            remote, local_uri, local = f"fd://{fd}", f"unix://{path}", True
        else:
            peer = transport.get_extra_info("peername")
            sock = transport.get_extra_info("sockname")
            remote = ip_uri("tcp", peer[0], peer[1])
            local_uri = ip_uri("tcp", sock[0], sock[1])
            local = is_loopback(peer[0])
        if self._force_local is not None:
            local = self._force_local
        self.info = self._owner.face_up(self, local, remote, local_uri, self._persistency)
        self.info.send_queue = self.queue.counters
        self._up = True
        if self._link is not None and self._link.active:
            self._emu = LinkEmulator(self._link, self._write, self.info)

    def data_received(self, data: bytes) -> None:
        packets, oversize = self._framer.feed(data)
        if self._emu is not None:
            emu = self._emu
            packets = [p for p in packets if emu.admit()]
        if self.reliable is not None:
            packets = self.reliable.receive_many(packets)
        if packets and not self._closed:
            self._owner.receive_batch(self, packets)        # all of one read in one call
        if oversize:
            # NFD closes a stream face that sends an oversize packet: framing is lost
            self.info.drop("oversize")
            self.close()

    def send(self, wire: bytes) -> None:
        if self._emu is not None:
            self._emu.send(wire)
        else:
            self._write(wire)

    def send_many(self, wires: list[bytes]) -> None:
        """`send` for each, in order; queued in one step while the queue has room for all."""
        if self.reliable is not None:
            wires = self.reliable.wrap_many(wires)
        if self._emu is not None or self.transport is None or self._closed:
            for wire in wires:
                StreamFace.send(self, wire)     # the class's: toward the peer, as wrapped
            return
        if self._paused:
            now = self._clock()
            for wire in wires:
                self._enqueue(wire, now)
            return
        size = sum(map(len, wires))
        if self._queued + size > QUEUE_LIMIT_BYTES:
            for wire in wires:                  # some may not fit: drops counted one by one
                self._write(wire)
            return
        self._outq.extend(wires)
        self._queued += size
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _write(self, wire: bytes) -> None:
        """Queue; everything queued while the loop handles one batch of input leaves in one
        writev. One send per packet would wake the peer once per packet."""
        if self.transport is None or self._closed:
            return
        if self._paused:
            self._enqueue(wire, self._clock())
            return
        if self._queued + len(wire) > QUEUE_LIMIT_BYTES:
            self.info.drop("queue_full")
            return
        self._outq.append(wire)
        self._queued += len(wire)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _enqueue(self, wire: bytes, now: float) -> None:
        if self.queue.admits(len(wire)):
            self.queue.push(wire, now)
        else:
            self.info.drop("queue_full")

    def flush(self) -> None:
        """Write what is queued now (one writev), rather than at the end of the loop turn;
        its last packet marked if the face is congested."""
        outq = self._outq
        if outq and not self._closed and self.transport is not None:
            now = self._clock()
            if self.queue.options.marking and \
                    self._should_mark(now, 0.0, self._backlog(now), outq[-1]):
                outq[-1] = _marked(outq[-1])
            self.transport.writelines(outq)     # may pause us (pause_writing)
        self._outq = []
        self._queued = 0

    def _flush(self) -> None:
        self._flush_scheduled = False
        self.flush()

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        """The kernel took everything: the queue's packets, in order, until it pushes back."""
        self._paused = False
        queue = self.queue
        while queue and not self._paused and not self._closed and self.transport is not None:
            now = self._clock()
            backlog = self._backlog(now)
            batch: list[bytes] = []
            size = 0
            while queue and size < DRAIN_BYTES:
                delay = queue.delay(now)
                wire = queue.pop(now)
                batch.append(_marked(wire) if self._should_mark(now, delay, backlog, wire)
                             else wire)
                size += len(wire)
            self.transport.writelines(batch)

    def _backlog(self, now: float) -> bool:
        """Whether the transport's buffer and the socket's kernel send queue hold more than
        `kernel_threshold` octets (NFD's StreamTransport::getSendQueueLength); the kernel is
        asked at most every KERNEL_SAMPLE."""
        assert self.transport is not None
        waiting = self.transport.get_write_buffer_size()
        if self._fd >= 0 and waiting <= self.kernel_threshold:
            if now - self._kernel_at >= KERNEL_SAMPLE:
                self._kernel_octets = kernel_send_queue(self._fd)
                self._kernel_at = now
            waiting += self._kernel_octets
        return waiting > self.kernel_threshold

    def _should_mark(self, now: float, delay: float, backlog: bool, wire: bytes) -> bool:
        """Whether `wire`, leaving now after waiting `delay` in the queue, is marked: when
        the rule says so, unless it is a push to an app (the module's doc)."""
        opts = self.queue.options
        if not opts.marking:
            return False
        if self._rule.check(backlog or delay > opts.target, now,
                            bool(opts.step) and delay > opts.step):
            if self._kind == "unix" and self._emu is None and is_pushed_data(wire):
                self.queue.counters.pushes_unmarked += 1
                return False
            self.queue.counters.marked += 1
            return True
        return False

    def close(self) -> None:
        if not self._closed and self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.set_reliability(False)
        self.queue.clear()
        if not self._closed:
            self._closed = True
            if self._up:
                self._owner.face_down(self)
