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

The channel's socket is read and written in batches (`ndnps.ndn.datagrams`: recvmmsg/sendmmsg
where built): one wake-up reads every datagram the socket holds (up to READ_ROUNDS × BATCH), and
their packets go up in one batch per face; what the faces send during one loop turn leaves in
one system call at its end (at once past FLUSH_AT datagrams) — a lone packet is not held back,
it only shares its turn's call.  When the kernel takes fewer than it was given, the rest is
held by the channel (sent first), the channel pauses and the faces queue until the socket is
writable again.

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
import socket
import time
from collections import OrderedDict, deque
from typing import Any, Callable

from ndnps.ndn import datagrams
from ndnps.ndn.congestion import set_congestion_mark
from ndnps.ndn.fragmentation import (FragmentationCounters, Fragmenter, Reassembler,
                                     ReassemblyOptions)
from ndnps.ndn.reliability import WRAP_OVERHEAD
from ndnps.ndn.reliable_link import ReliableLink
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
READ_ROUNDS = 4                 # batches read per wake-up before other work gets its turn
FLUSH_AT = 256                  # datagrams queued in a turn that leave at once, not at its end


class DatagramSocket:
    """The channel's socket on the event loop: readable -> every datagram it holds, in
    batches, to the channel; `send` hands the kernel a batch; `wait_writable` calls the
    channel's resume_writing once the kernel has room again."""

    def __init__(self, sock: socket.socket, loop: asyncio.AbstractEventLoop | None = None,
                 bufsize: int = MAX_PACKET_SIZE) -> None:
        self.sock = sock
        self.loop = loop or asyncio.get_event_loop()
        self.bufsize = bufsize
        self.channel: UdpChannel | None = None
        self._waiting = False
        sock.setblocking(False)

    def start(self, channel: "UdpChannel") -> None:
        self.channel = channel
        self.loop.add_reader(self.sock.fileno(), self._readable)
        channel.connection_made(self)

    def sockname(self) -> tuple:
        return self.sock.getsockname()

    def call_soon(self, callback: Callable[[], None]) -> None:
        self.loop.call_soon(callback)

    def send(self, frames: list[bytes], addrs: list[Any]) -> int:
        """How many of them the kernel took, in order; -1 if it refused the first with an
        error (ICMP unreachable from a peer that is down: that one is dropped, as asyncio's
        transport drops it)."""
        try:
            return datagrams.send_many(self.sock, frames, addrs)
        except OSError:
            return -1

    def wait_writable(self) -> None:
        if not self._waiting and self.sock.fileno() >= 0:
            self._waiting = True
            self.loop.add_writer(self.sock.fileno(), self._writable)

    def _writable(self) -> None:
        self._waiting = False
        self.loop.remove_writer(self.sock.fileno())
        if self.channel is not None:
            self.channel.resume_writing()

    def _readable(self) -> None:
        channel = self.channel
        for _ in range(READ_ROUNDS):
            try:
                batch = datagrams.recv_many(self.sock, self.bufsize)
            except OSError:             # e.g. ICMP errors queued on the socket: read on
                continue
            if batch and channel is not None:
                channel.datagrams_received(batch)
            if len(batch) < datagrams.BATCH:
                break

    def close(self) -> None:
        fd = self.sock.fileno()
        if fd >= 0:
            self.loop.remove_reader(fd)
            if self._waiting:
                self.loop.remove_writer(fd)
            self.sock.close()
        if self.channel is not None:
            self.channel.connection_lost(None)


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
        assert channel.port is not None             # faces exist once the socket is open
        sock = channel.port.sockname()
        self.sockaddr = datagrams.sockaddr(addr[0], addr[1])
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
            ch.put(wire, self.sockaddr)
        else:
            self._send(wire)

    def flush(self) -> None:
        self.channel.flush()

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
            ch.put(frame, self.sockaddr)

    def close(self) -> None:
        self.channel.close_face(self)


class UdpChannel:
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
        self.port: DatagramSocket | None = None
        # The socket pushed back (its kernel buffer is full): datagrams wait in their faces'
        # queues, and `ready` holds the faces with some waiting, served in turn on resume.
        self.paused = True
        self.ready: deque[UdpFace] = deque()
        # this loop turn's datagrams (sent at its end, in one call), and those the kernel
        # refused last time (sent first once it has room)
        self._frames: list[bytes] = []
        self._addrs: list[Any] = []
        self._flush_scheduled = False
        self._held: tuple[list[bytes], list[Any]] = ([], [])
        self.faces: dict[tuple, UdpFace] = {}
        # The on-demand ones, least recently seen first (each datagram moves its face to the
        # end): eviction takes the first, idle expiry stops at the first still in use.
        self.on_demand_faces: OrderedDict[tuple, UdpFace] = OrderedDict()

    def connection_made(self, port: DatagramSocket) -> None:
        self.port = port
        if self.mtu is None and ":" in str(port.sockname()[0]):
            self.default_mtu = MTU_IPV6
        self.paused = False

    def connection_lost(self, exc: Exception | None) -> None:
        self.paused = True
        self.port = None

    # ---- sending ----------------------------------------------------------------------------

    def put(self, frame: bytes, addr: Any) -> None:
        """A datagram for the end of this loop turn (the channel is not paused)."""
        self._frames.append(frame)
        self._addrs.append(addr)
        if len(self._frames) >= FLUSH_AT:
            self.flush()
        elif not self._flush_scheduled and self.port is not None:
            self._flush_scheduled = True
            self.port.call_soon(self._flush_soon)

    def _flush_soon(self) -> None:
        self._flush_scheduled = False
        self.flush()

    def flush(self) -> None:
        """Hand the kernel this turn's datagrams now, in one call."""
        if self._frames:
            frames, addrs = self._frames, self._addrs
            self._frames, self._addrs = [], []
            self._hand_over(frames, addrs)

    def _hand_over(self, frames: list[bytes], addrs: list[Any]) -> bool:
        """Send; what the kernel does not take is held (sent first when it has room) and the
        channel pauses. True if it took everything."""
        port = self.port
        while frames and port is not None:
            n = port.send(frames, addrs)
            if n < 0:                           # the first refused with an error: dropped
                self.counters.udp_send_errors += 1
                frames, addrs = frames[1:], addrs[1:]
                continue
            if n == len(frames):
                return True
            held_frames, held_addrs = self._held
            held_frames += frames[n:]
            held_addrs += addrs[n:]
            self.paused = True
            port.wait_writable()
            return False
        return not frames

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        """The kernel has room again: what it refused first, then the faces' queues."""
        frames, addrs = self._held
        self._held = ([], [])
        self.paused = False
        if frames and not self._hand_over(frames, addrs):
            return
        self._drain()

    def _drain(self) -> None:
        """Send what waits, one datagram per face in turn, a batch per call, until the
        socket pushes back or nothing waits."""
        ready = self.ready
        while ready and not self.paused and self.port is not None:
            now = self.clock()
            frames: list[bytes] = []
            addrs: list[Any] = []
            while ready and len(frames) < datagrams.BATCH:
                face = ready.popleft()
                queue = face.queue
                if not queue:                       # closed meanwhile
                    continue
                frames.append(queue.pop(now))
                addrs.append(face.sockaddr)
                if queue:
                    ready.append(face)
            if not self._hand_over(frames, addrs):
                return

    # ---- receiving --------------------------------------------------------------------------

    def datagram_received(self, data: bytes, addr: tuple) -> None:
        self.datagrams_received([(data, addr)])

    def datagrams_received(self, batch: list[tuple[bytes, Any]]) -> None:
        """One read's datagrams: each through its face's link layers, then every face's
        packets up to the forwarder in one batch each (in arrival order per face)."""
        arrived: dict[UdpFace, list[bytes]] = {}
        faces, clock = self.faces, self.clock
        for data, addr in batch:
            key = addr[:2]
            face = faces.get(key)
            if face is None:
                # a new face is judged by its first datagram alone: that one goes up now
                face = faces[key] = self.on_demand_faces[key] = UdpFace(
                    self, key, ON_DEMAND, self.app_link)
                self._receive_first(face, data)
                continue
            if face.on_demand:
                face.last_seen = clock()
                self.on_demand_faces.move_to_end(key)
            packets = arrived.get(face)
            if packets is None:
                packets = arrived[face] = []
            self._link_in(face, data, packets)
        for face, packets in arrived.items():
            if packets and faces.get(face.addr) is face:
                self.owner.receive_batch(face, packets)

    def _receive_first(self, face: UdpFace, data: bytes) -> None:
        """A new on-demand face's first datagram, up to the forwarder at once; then whether
        the face stays (_admit)."""
        packets: list[bytes] = []
        self._link_in(face, data, packets)
        if packets:
            self.owner.receive_batch(face, packets)
        self._admit(face)

    def _link_in(self, face: UdpFace, data: bytes, packets: list[bytes]) -> None:
        """One datagram through the face's link layers (emulation, reliability, reassembly):
        the packets it completes onto `packets`."""
        if len(data) > MAX_PACKET_SIZE:
            face.info.drop("oversize")
        elif face.emu is None or face.emu.admit():
            if face.reliable is not None:
                for wire in face.reliable.receive_many([data]):
                    self._deliver(face, wire, packets)
            elif data and data[0] == LP_PACKET:
                self._deliver(face, data, packets)
            else:
                packets.append(data)

    def _deliver(self, face: UdpFace, wire: bytes, packets: list[bytes]) -> None:
        """Through reassembly, onto the face's packets for the forwarder."""
        if wire and wire[0] == LP_PACKET:       # perhaps a fragment
            try:
                whole = face.reassembler.receive(wire, self.clock())
            except DecodeError:
                face.info.drop("malformed")
                return
            if whole is None:
                return
            wire = whole
        packets.append(wire)

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
        self.flush()
        for face in list(self.faces.values()):
            self.close_face(face)
        self.paused = True
        if self.port is not None:
            self.port.close()
