"""UDP faces: one datagram per packet, as NFD's unicast UDP faces.

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
from collections import OrderedDict
from typing import Callable

from ..face_table import FaceInfo, FaceSystemCounters
from ndnps.ndn.tlv import MAX_PACKET_SIZE
from .base import Face, FaceOwner, ip_uri, is_loopback
from .link import LinkEmulator, LinkParams

ON_DEMAND, PERSISTENT, PERMANENT = 1, 0, 2
IDLE_TIMEOUT = 600.0            # s, NFD's face_system.udp.idle_timeout
MAX_ON_DEMAND_FACES = 1024      # per channel: far above the peers and apps of one job
# drop reasons (pipelines.py's, and oversize here) that make a first datagram garbage
_GARBAGE = ("malformed", "oversize")


class UdpFace(Face):
    def __init__(self, channel: "UdpChannel", addr: tuple, persistency: int,
                 link: LinkParams | None, local: bool | None = None) -> None:
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
        if link is not None and link.active:
            self.emu = LinkEmulator(link, self._write, self.info)

    def send(self, wire: bytes) -> None:
        if self.emu is not None:
            self.emu.send(wire)
        else:
            self._write(wire)

    def _write(self, wire: bytes) -> None:
        if len(wire) > MAX_PACKET_SIZE:
            self.info.drop("oversize_out")
            return
        t = self.channel.transport
        if t is not None and not t.is_closing():
            t.sendto(wire, self.addr)

    def close(self) -> None:
        self.channel.close_face(self)


class UdpChannel(asyncio.DatagramProtocol):
    def __init__(self, owner: FaceOwner, idle_timeout: float = IDLE_TIMEOUT,
                 max_on_demand: int = MAX_ON_DEMAND_FACES, app_link: LinkParams | None = None,
                 counters: FaceSystemCounters | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if max_on_demand < 1:
            raise ValueError(f"max_on_demand must be >= 1, got {max_on_demand}")
        self.owner = owner
        self.app_link = app_link       # emulation on faces opened by a remote peer
        self.idle_timeout = idle_timeout
        self.max_on_demand = max_on_demand
        self.counters = counters if counters is not None else FaceSystemCounters()
        self.clock = clock
        self.transport: asyncio.DatagramTransport | None = None
        self.faces: dict[tuple, UdpFace] = {}
        # The on-demand ones, least recently seen first (each datagram moves its face to the
        # end): eviction takes the first, idle expiry stops at the first still in use.
        self.on_demand_faces: OrderedDict[tuple, UdpFace] = OrderedDict()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

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
                    self.owner.receive(face, wire)
            else:
                self.owner.receive(face, data)
        if first:
            self._admit(face)

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
                  link: LinkParams | None = None, local: bool | None = False) -> UdpFace:
        key = (host, port)
        face = self.faces.get(key)
        if face is None:
            face = self.faces[key] = UdpFace(self, key, persistency, link, local)
            if face.on_demand:
                self.on_demand_faces[key] = face
        return face

    def close_face(self, face: UdpFace) -> None:
        face.set_reliability(False)
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

    def close(self) -> None:
        for face in list(self.faces.values()):
            self.close_face(face)
        if self.transport is not None:
            self.transport.close()
