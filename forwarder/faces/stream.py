"""Stream faces (unix and TCP): TLV framing on a byte stream."""
from __future__ import annotations

import asyncio

from ndnps.ndn.tlv import StreamFramer
from .base import QUEUE_LIMIT_BYTES, Face, FaceOwner, ip_uri, is_loopback
from .link import LinkEmulator, LinkParams


class StreamFace(Face, asyncio.Protocol):
    def __init__(self, owner: FaceOwner, kind: str, persistency: int = 1,
                 link: LinkParams | None = None, local: bool | None = None) -> None:
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
        self._outq: list[bytes] = []
        self._queued = 0
        self._flush_scheduled = False
        self._loop = asyncio.get_event_loop()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if self._kind == "unix":
            path = transport.get_extra_info("sockname") or ""
            fd = transport.get_extra_info("socket").fileno()
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
        size = sum(map(len, wires))
        if self._queued + size > QUEUE_LIMIT_BYTES or \
                self.transport.get_write_buffer_size() > QUEUE_LIMIT_BYTES:
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
        if self._queued + len(wire) > QUEUE_LIMIT_BYTES or \
                self.transport.get_write_buffer_size() > QUEUE_LIMIT_BYTES:
            self.info.drop("queue_full")
            return
        self._outq.append(wire)
        self._queued += len(wire)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def flush(self) -> None:
        """Write what is queued now (one writev), rather than at the end of the loop turn."""
        if self._outq and not self._closed and self.transport is not None:
            self.transport.writelines(self._outq)
        self._outq = []
        self._queued = 0

    def _flush(self) -> None:
        self._flush_scheduled = False
        self.flush()

    def close(self) -> None:
        if not self._closed and self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.set_reliability(False)
        if not self._closed:
            self._closed = True
            if self._up:
                self._owner.face_down(self)
