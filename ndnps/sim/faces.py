"""The simulated network's faces, as the daemon sees its real ones (faces/base.py's `Face`):
the daemon brings them up, hands them its packets and is told what they receive, so its own
code (dispatch, management, link reliability, the core's timer) runs on them unchanged.

`LinkFace` is one end of a simulated link (link.py): what the forwarder sends it goes on its
outgoing channel, what the other channel delivers goes up to the forwarder.  `AppFace` is a
local face to an app in the same process: the forwarder side of an `AppTransport`, which the
app's own client `Face` (ndnps.client.face) is connected to as if to a unix socket.  A packet
from the app reaches the forwarder at once; one to the app arrives in a later turn of the loop
(`call_soon`), as a socket read would: an app link takes no time, as a unix socket's
microseconds are nothing beside a network link's.  Unless it is given a `Link`: the
conditions a real forwarder's `[app_links]` emulate on an app's face (a rate, delay and loss
toward the app, the same loss from it), as the link's two channels (`ab` toward the app).
"""
from __future__ import annotations

import asyncio
from typing import Any

from ndnps.client.face import Face as ClientFace
from ndnps.forwarder.faces.base import Face, FaceOwner
from ndnps.forwarder.faces.udp import ON_DEMAND, PERMANENT
from ndnps.ndn.reliability import WRAP_OVERHEAD
from ndnps.ndn.reliable_link import ReliableLink

from .link import Channel, Link


class LinkFace(Face):
    """One end of a link: `out` carries what the forwarder sends, `inbound` brings what the
    other end sends (its delivery calls `arrive`)."""

    def __init__(self, owner: FaceOwner, out: Channel, inbound: Channel, remote_uri: str,
                 local_uri: str) -> None:
        self.owner = owner
        self.out = out
        self.inbound = inbound
        inbound.deliver = self.arrive
        self.info = owner.face_up(self, False, remote_uri, local_uri, PERMANENT)
        self.info.mtu = out.spec.mtu
        self.info.lp_fragmentation = out.fragmentation
        self.info.send_queue = out.queue.counters
        self.closed = False

    def send(self, wire: bytes) -> None:
        self.out.send(wire)

    def set_reliability(self, on: bool) -> None:
        """NDNLPv2 reliability below fragmentation, as a UDP face's: each fragment a frame of
        its own, resent alone."""
        out = self.out
        if on and self.reliable is None:
            reliable = self.reliable = ReliableLink(out.emit, asyncio.get_running_loop(),
                                                    mtu=out.spec.mtu)
            out.wrap, out.room = reliable.wrap_many, out.spec.mtu - WRAP_OVERHEAD
            self.inbound.unwrap = lambda frame: reliable.receive_many([frame])
        elif not on and self.reliable is not None:
            self.reliable.close()
            self.reliable = None
            out.wrap, out.room, self.inbound.unwrap = None, out.spec.mtu, None

    def arrive(self, wire: bytes) -> None:
        if not self.closed:
            self.owner.receive(self, wire)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.set_reliability(False)
            self.out.close()
            self.owner.face_down(self)


class AppFace(Face):
    """The forwarder's face toward an app of this process; with `link`, over its channels
    (`ab` toward the app, `ba` from it)."""

    def __init__(self, owner: FaceOwner, client: ClientFace, uri: str,
                 link: Link | None = None) -> None:
        self.owner = owner
        self.client = client
        self.link = link
        self.info = owner.face_up(self, True, uri, "sim://forwarder", ON_DEMAND)
        self.closed = False
        if link is not None:
            link.ab.deliver = self._to_app
            link.ba.deliver = self._from_app
        client.connection_made(AppTransport(self))      # type: ignore[arg-type]

    def send(self, wire: bytes) -> None:
        if self.closed:
            return
        if self.link is not None:
            self.link.ab.send(wire)
        else:
            # the loop of the moment: an app may be made before its loop runs
            asyncio.get_running_loop().call_soon(self._to_app, wire)

    def from_app(self, wire: bytes) -> None:
        """A packet the app wrote: to the forwarder now, or onto the link."""
        if self.link is not None:
            self.link.ba.send(wire)
        else:
            self._from_app(wire)

    def _from_app(self, wire: bytes) -> None:
        if not self.closed:
            self.owner.receive(self, wire)

    def _to_app(self, wire: bytes) -> None:
        if not self.closed:
            self.client.data_received(wire)

    def close(self) -> None:
        """Either side hangs up: the forwarder drops the face, the app sees the connection
        lost (in a later turn, as a socket's end)."""
        if not self.closed:
            self.closed = True
            if self.link is not None:
                self.link.close()
            self.owner.face_down(self)
            asyncio.get_running_loop().call_soon(self.client.connection_lost, None)


class AppTransport:
    """The app's side of an AppFace, as its client Face uses a stream transport: each write
    is whole packets (the client writes nothing else), handed to the forwarder now."""

    def __init__(self, face: AppFace) -> None:
        self.face = face

    def write(self, data: bytes) -> None:
        if not self.face.closed:
            self.face.from_app(bytes(data))

    def writelines(self, packets: list[bytes]) -> None:
        for data in packets:
            self.write(data)

    def close(self) -> None:
        self.face.close()

    def is_closing(self) -> bool:
        return self.face.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default
