"""What every transport-backed face offers the daemon."""
from __future__ import annotations

import asyncio
import ipaddress
from typing import Callable, Protocol

from ndnps.ndn.reliable_link import ReliableLink

from ..face_table import FaceInfo

# Bytes queued toward one stream face beyond which further packets are dropped (and counted).
# NFD's stream transports queue without bound; ours is bounded, but above what a local app
# short of CPU can fall behind by in a training: a version's push is the model (4 MB for 1M
# parameters) and the next waits for its gradients. At 4 MiB the tails of 1 Gbit/s pushes to
# 16 workers on two cores were dropped (5-13 % of segments repaired, 40 % more time a version).
QUEUE_LIMIT_BYTES = 16 << 20


class FaceOwner(Protocol):
    """The daemon, as faces see it."""

    def face_up(self, face: "Face", local: bool, remote_uri: str, local_uri: str,
                persistency: int) -> FaceInfo: ...

    def receive(self, face: "Face", wire: bytes) -> None: ...

    def receive_batch(self, face: "Face", wires: list[bytes]) -> None: ...

    def face_down(self, face: "Face") -> None: ...


class Face:
    info: FaceInfo
    on_send: Callable[[bytes], None] | None = None
    reliable: ReliableLink | None = None          # NDNLPv2 reliability, set by faces/update

    def send(self, wire: bytes) -> None:
        """Send one packet toward the peer (through the link emulation, if any).  With link
        reliability on, the instance's `send` is its ReliableLink's, which calls this one: the
        path without it costs nothing more."""
        raise NotImplementedError

    def set_reliability(self, on: bool) -> None:
        if on and self.reliable is None:
            link_send = self.send               # the class's: straight toward the peer
            self.reliable = ReliableLink(link_send, asyncio.get_running_loop())
            self.send = self.reliable.send      # type: ignore[method-assign]
        elif not on and self.reliable is not None:
            self.reliable.close()
            self.reliable = None
            del self.send

    def send_many(self, wires: list[bytes]) -> None:
        for wire in wires:
            self.send(wire)

    def flush(self) -> None:
        """Send now what is queued for the end of this loop turn (no queue: nothing)."""

    def close(self) -> None:
        raise NotImplementedError


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def ip_uri(scheme: str, host: str, port: int) -> str:
    if ":" in host:
        return f"{scheme}6://[{host}]:{port}"
    return f"{scheme}4://{host}:{port}"
