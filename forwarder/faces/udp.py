"""UDP faces: one datagram per packet, as NFD's unicast UDP faces.

A channel owns one listening socket. Datagrams from a new remote address open an on-demand
face (closed after `idle_timeout` without traffic); faces toward other forwarders are created
on the same socket, so the peer sees our well-known port as the source and recognises us.
"""
from __future__ import annotations

import asyncio
import time

from ..face_table import FaceInfo
from ..tlv import MAX_PACKET_SIZE
from .base import Face, FaceOwner, ip_uri, is_loopback
from .link import LinkEmulator, LinkParams

ON_DEMAND, PERSISTENT, PERMANENT = 1, 0, 2


class UdpFace(Face):
    def __init__(self, channel: "UdpChannel", addr: tuple, persistency: int,
                 link: LinkParams | None, local: bool | None = None) -> None:
        self.channel = channel
        self.addr = addr
        self.last_seen = time.monotonic()
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
    def __init__(self, owner: FaceOwner, idle_timeout: float = 600.0,
                 app_link: LinkParams | None = None) -> None:
        self.owner = owner
        self.app_link = app_link       # emulation on faces opened by a remote peer
        self.idle_timeout = idle_timeout
        self.transport: asyncio.DatagramTransport | None = None
        self.faces: dict[tuple, UdpFace] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple) -> None:
        key = addr[:2]
        face = self.faces.get(key)
        if face is None:
            face = self.faces[key] = UdpFace(self, key, ON_DEMAND, self.app_link)
        face.last_seen = time.monotonic()
        if len(data) > MAX_PACKET_SIZE:
            face.info.drop("oversize")
            return
        if face.emu is not None and not face.emu.admit():
            return
        if face.reliable is not None:
            for wire in face.reliable.receive_many([data]):
                self.owner.receive(face, wire)
        else:
            self.owner.receive(face, data)

    def error_received(self, exc: Exception) -> None:
        # e.g. ICMP port unreachable from a peer that is down: the face stays, as in NFD
        pass

    def open_face(self, host: str, port: int, persistency: int = PERSISTENT,
                  link: LinkParams | None = None, local: bool | None = False) -> UdpFace:
        key = (host, port)
        face = self.faces.get(key)
        if face is None:
            face = self.faces[key] = UdpFace(self, key, persistency, link, local)
        return face

    def close_face(self, face: UdpFace) -> None:
        face.set_reliability(False)
        if self.faces.get(face.addr) is face:
            del self.faces[face.addr]
            self.owner.face_down(face)

    def expire_idle(self, now: float) -> None:
        for face in [f for f in self.faces.values()
                     if f.info.persistency == ON_DEMAND and now - f.last_seen > self.idle_timeout]:
            self.close_face(face)

    def close(self) -> None:
        for face in list(self.faces.values()):
            self.close_face(face)
        if self.transport is not None:
            self.transport.close()
