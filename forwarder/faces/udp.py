"""UDP faces, as NFD's unicast UDP faces with its GenericLinkService.

A packet longer than the face's MTU leaves as NDNLPv2 fragments, so no datagram is split by IP
(one lost IP fragment loses the whole datagram, and a bottleneck's queue fills with the
pieces): 1472 octets toward a non-loopback peer (1452 over IPv6), 8800 toward loopback, or the
face's own `mtu`; fragments received are reassembled on every face.  The kernel send buffer is
small (daemon.py), so a bottleneck pushes back on the socket and the datagrams wait in their
face's queue (queue.py), bounded, measured and marking packets as NFD does; the faces waiting
are served in turn when the socket takes datagrams again.  The channel's faces share its one
socket, so a face behind a slower link holds back the others while its datagrams fill the
kernel buffer (NFD gives each face a connected socket of its own).

A channel owns one listening socket. Datagrams from a new remote address open an on-demand
face (closed after `idle_timeout` without traffic); faces toward other forwarders are created
on the same socket, so the peer sees our well-known port as the source and recognises us.

On-demand faces are bounded, where NFD's are not: any sender that varies its source port
opens a face per datagram, so the table would grow for `idle_timeout` at whatever rate it
sends. A face whose first datagram is dropped as malformed or oversize is closed at once
(garbage never holds a face), and past `max_on_demand` faces the least recently seen one is
closed. Faces made by the config or faces/create (persistent, permanent) neither count nor go.
"""
from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from typing import Callable

from ndnps.ndn.congestion import set_congestion_mark
from ndnps.ndn.fragmentation import (FragmentationCounters, Fragmenter, Reassembler,
                                     ReassemblyOptions)
from ndnps.ndn.reliability import WRAP_OVERHEAD, ReliableLink
from ndnps.ndn.tlv import LP_PACKET, MAX_PACKET_SIZE, DecodeError

from ..face_table import FaceInfo, FaceSystemCounters
from .base import Face, FaceOwner, ip_uri, is_loopback
from .link import LinkEmulator, LinkParams
from .queue import QueueOptions, SendQueue

ON_DEMAND, PERSISTENT, PERMANENT = 1, 0, 2
IDLE_TIMEOUT = 600.0            # s, NFD's face_system.udp.idle_timeout
MAX_ON_DEMAND_FACES = 1024      # per channel: far above the peers and apps of one job
# The longest datagram toward a non-loopback peer that no IP fragmentation splits: an Ethernet
# MTU of 1500 less the IP and UDP headers.  Loopback faces keep the largest NDN packet.
MTU_IPV4 = 1500 - 20 - 8
MTU_IPV6 = 1500 - 40 - 8
MIN_MTU = 576                   # IPv4's minimum datagram: fewer octets leave no room to split
# SO_SNDBUF of the channel's socket (Linux counts ~2 KiB per 1472-octet datagram against twice
# this): small, so a bottleneck's backlog waits in the faces' queues, not in the kernel
SEND_BUFFER_BYTES = 64 << 10
# drop reasons (pipelines.py's, and oversize here) that make a first datagram garbage
_GARBAGE = ("malformed", "oversize")


def check_mtu(mtu: int | None) -> None:
    if mtu is not None and not MIN_MTU <= mtu <= MAX_PACKET_SIZE:
        raise ValueError(f"mtu must be within [{MIN_MTU}, {MAX_PACKET_SIZE}], got {mtu}")


class UdpFace(Face):
    """One peer of the channel, with NFD's GenericLinkService on the way out: a packet gets
    its congestion mark while the queue is congested, is fragmented to the face's MTU, each
    fragment wrapped for link reliability (if on), and the datagrams go to the socket, or wait
    in the face's queue while the socket pushes back.  On the way in: reliability, then
    reassembly.  A packet that fits goes straight to the socket while nothing waits."""

    def __init__(self, channel: "UdpChannel", addr: tuple, persistency: int,
                 link: LinkParams | None, local: bool | None = None,
                 mtu: int | None = None) -> None:
        self.channel = channel
        self.addr = addr
        self.on_demand = persistency == ON_DEMAND      # fixed: faces/update cannot change it
        self.last_seen = channel.clock()
        self.emu: LinkEmulator | None = None
        assert channel.transport is not None        # faces exist once the socket is open
        sock = channel.transport.get_extra_info("sockname")
        is_local = is_loopback(addr[0]) if local is None else local
        self.info: FaceInfo = channel.owner.face_up(
            self, is_local, ip_uri("udp", addr[0], addr[1]), ip_uri("udp", sock[0], sock[1]),
            persistency)
        if mtu is None:
            mtu = MAX_PACKET_SIZE if is_loopback(addr[0]) else channel.default_mtu
        self.mtu = self.info.mtu = mtu
        fragmentation = self.info.lp_fragmentation = FragmentationCounters()
        self.fragmenter = Fragmenter(fragmentation)
        self.reassembler = Reassembler(channel.reassembly, fragmentation)
        self.queue = SendQueue(channel.queue_options)
        self.info.send_queue = self.queue.counters
        if link is not None and link.active:
            self.emu = LinkEmulator(link, self._emit, self.info)
        self._update_path()

    def _update_path(self) -> None:
        # packets up to this long go unfragmented (room left for the reliability headers)
        self._fragment_above = self.mtu - (WRAP_OVERHEAD if self.reliable is not None else 0)
        self._direct = self.reliable is None and self.emu is None

    def set_reliability(self, on: bool) -> None:
        """Reliability below fragmentation: each fragment a frame of its own."""
        if on and self.reliable is None:
            self.reliable = ReliableLink(self._emit, asyncio.get_running_loop(), mtu=self.mtu)
        elif not on and self.reliable is not None:
            self.reliable.close()
            self.reliable = None
        self._update_path()

    def send(self, wire: bytes) -> None:
        ch = self.channel
        if self._direct and not ch.paused and len(wire) <= self._fragment_above:
            ch.transport.sendto(wire, self.addr)        # type: ignore[union-attr]
        else:
            self._send(wire)

    def _send(self, wire: bytes) -> None:
        queue = self.queue
        if self.channel.paused:                         # it will wait in the queue
            if not queue.admits(len(wire)):
                self.info.drop("queue_full")
                return
            if queue.should_mark(self.channel.clock()):
                try:
                    wire = set_congestion_mark(wire)
                except DecodeError:                     # not ours to judge: sent unmarked
                    pass
        frames = [wire] if len(wire) <= self._fragment_above else \
            self.fragmenter.fragment(wire, self._fragment_above)
        if not frames:
            self.info.drop("fragmentation_error")
            return
        if self.reliable is not None:
            frames = self.reliable.wrap_many(frames)
        if self.emu is not None:
            for frame in frames:
                self.emu.send(frame)
            return
        for frame in frames:
            self._put(frame)

    def _emit(self, frame: bytes) -> None:
        """A datagram no packet admission covered: a retransmission, Acks alone, what the
        link emulation delivers."""
        if self.channel.paused and not self.queue.admits(len(frame)):
            self.info.drop("queue_full")
            return
        self._put(frame)

    def _put(self, frame: bytes) -> None:
        ch = self.channel
        if ch.paused:
            self.queue.push(frame, ch.clock())
            if len(self.queue) == 1:
                ch.ready.append(self)
        else:
            ch.transport.sendto(frame, self.addr)       # type: ignore[union-attr]

    def close(self) -> None:
        self.channel.close_face(self)


class UdpChannel(asyncio.DatagramProtocol):
    def __init__(self, owner: FaceOwner, idle_timeout: float = IDLE_TIMEOUT,
                 max_on_demand: int = MAX_ON_DEMAND_FACES, app_link: LinkParams | None = None,
                 counters: FaceSystemCounters | None = None,
                 clock: Callable[[], float] = time.monotonic, mtu: int | None = None,
                 queue: QueueOptions | None = None,
                 reassembly: ReassemblyOptions | None = None) -> None:
        if max_on_demand < 1:
            raise ValueError(f"max_on_demand must be >= 1, got {max_on_demand}")
        check_mtu(mtu)
        self.owner = owner
        self.app_link = app_link       # emulation on faces opened by a remote peer
        self.idle_timeout = idle_timeout
        self.max_on_demand = max_on_demand
        self.counters = counters if counters is not None else FaceSystemCounters()
        self.clock = clock
        self.mtu = mtu                 # non-loopback faces' (None: by address family)
        self.default_mtu = mtu or MTU_IPV4
        self.queue_options = queue if queue is not None else QueueOptions()
        self.reassembly = reassembly if reassembly is not None else ReassemblyOptions()
        self.transport: asyncio.DatagramTransport | None = None
        # The socket pushed back (its kernel buffer is full): datagrams wait in their faces'
        # queues, and `ready` holds the faces with some waiting, served in turn on resume.
        self.paused = True
        self.ready: deque[UdpFace] = deque()
        self.faces: dict[tuple, UdpFace] = {}
        # The on-demand ones, least recently seen first (each datagram moves its face to the
        # end): eviction takes the first, idle expiry stops at the first still in use.
        self.on_demand_faces: OrderedDict[tuple, UdpFace] = OrderedDict()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if self.mtu is None and ":" in str(transport.get_extra_info("sockname")[0]):
            self.default_mtu = MTU_IPV6
        # pause as soon as the kernel refuses a datagram (the transport then holds that one):
        # the rest waits in the faces' queues, measured and marked
        transport.set_write_buffer_limits(high=0)     # type: ignore[attr-defined]
        self.paused = False

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self._drain()

    def connection_lost(self, exc: Exception | None) -> None:
        self.paused = True

    def _drain(self) -> None:
        """Send what waits, one datagram per face in turn, until the socket pushes back
        (`sendto` calls pause_writing) or nothing waits."""
        ready, transport = self.ready, self.transport
        if transport is None:
            return
        now = self.clock()
        while ready and not self.paused:
            face = ready.popleft()
            queue = face.queue
            if not queue:                       # closed meanwhile
                continue
            wire = queue.pop(now)
            if queue:
                ready.append(face)
            transport.sendto(wire, face.addr)

    def datagram_received(self, data: bytes, addr: tuple) -> None:
        key = addr[:2]
        face = self.faces.get(key)
        first = face is None
        if face is None:
            face = self.faces[key] = self.on_demand_faces[key] = UdpFace(
                self, key, ON_DEMAND, self.app_link)
        elif face.on_demand:
            face.last_seen = self.clock()
            self.on_demand_faces.move_to_end(key)
        if len(data) > MAX_PACKET_SIZE:
            face.info.drop("oversize")
        elif face.emu is None or face.emu.admit():
            if face.reliable is not None:
                for wire in face.reliable.receive_many([data]):
                    self._deliver(face, wire)
            elif data and data[0] == LP_PACKET:
                self._deliver(face, data)
            else:
                self.owner.receive(face, data)
        if first:
            self._admit(face)

    def _deliver(self, face: UdpFace, wire: bytes) -> None:
        """Up to the forwarder, through reassembly."""
        if wire and wire[0] == LP_PACKET:       # perhaps a fragment
            try:
                whole = face.reassembler.receive(wire, self.clock())
            except DecodeError:
                face.info.drop("malformed")
                return
            if whole is None:
                return
            wire = whole
        self.owner.receive(face, wire)

    def _admit(self, face: UdpFace) -> None:
        """A new on-demand face has handled its first datagram: it stays if that was a packet
        (making room under the cap), and goes at once if it was garbage."""
        if self.faces.get(face.addr) is not face:
            return
        drops = face.info.counters.drops
        if any(drops[reason] for reason in _GARBAGE):
            self.counters.udp_faces_rejected += 1
            self.close_face(face)
            return
        # Evicted only for a face that sent a real packet, so garbage evicts nobody.
        while len(self.on_demand_faces) > self.max_on_demand:
            self.counters.udp_faces_evicted += 1
            self.close_face(next(iter(self.on_demand_faces.values())))

    def error_received(self, exc: Exception) -> None:
        # e.g. ICMP port unreachable from a peer that is down: the face stays, as in NFD
        pass

    def open_face(self, host: str, port: int, persistency: int = PERSISTENT,
                  link: LinkParams | None = None, local: bool | None = False,
                  mtu: int | None = None) -> UdpFace:
        """A face toward host:port (the one there already, if any).  `mtu`: its datagrams'
        longest (default: MAX_PACKET_SIZE toward loopback, else the channel's)."""
        check_mtu(mtu)
        key = (host, port)
        face = self.faces.get(key)
        if face is None:
            face = self.faces[key] = UdpFace(self, key, persistency, link, local, mtu)
            if face.on_demand:
                self.on_demand_faces[key] = face
        return face

    def close_face(self, face: UdpFace) -> None:
        face.set_reliability(False)
        face.queue.clear()
        if self.faces.get(face.addr) is face:
            del self.faces[face.addr]
            self.on_demand_faces.pop(face.addr, None)
            self.owner.face_down(face)

    def expire_idle(self, now: float) -> None:
        deadline = now - self.idle_timeout
        idle = []
        for face in self.on_demand_faces.values():     # oldest first: stop at the first in use
            if face.last_seen >= deadline:
                break
            idle.append(face)
        for face in idle:
            self.close_face(face)

    def tick(self, now: float) -> None:
        """The daemon's periodic call: idle on-demand faces close, stale partial packets go."""
        self.expire_idle(now)
        for face in self.faces.values():
            if len(face.reassembler):
                face.reassembler.expire(now)

    def close(self) -> None:
        for face in list(self.faces.values()):
            self.close_face(face)
        self.paused = True
        if self.transport is not None:
            self.transport.close()
