"""The app's face to its forwarder: an asyncio protocol on a unix, TCP or UDP socket.

Per-packet module (typed; its framing, counting and batching compile with mypyc).

The transport is named as python-ndn names it: ``transport_uri()`` reads NDN_CLIENT_TRANSPORT,
else the ``transport`` key of the first client.conf found (~/.ndn, /usr/local/etc/ndn,
/opt/local/etc/ndn, /etc/ndn), else unix:///run/nfd/nfd.sock; ``unix:///path``,
``tcp://host[:port]`` and ``udp://host[:port]`` (port 6363 by default; tcp4/tcp6/udp4/udp6
too).

Receiving: a stream read is framed by ``ndnps.ndn.tlv.StreamFramer`` (a packet within a read
is copied once, out of it) and every packet it completes is handed to ``receive`` in that one
call, the read's answers written together after it; a datagram is one packet (NDNLPv2
fragments reassembled: ``ndnps.ndn.fragmentation``).  With link reliability on (NDNLPv2,
``ndnps.ndn.reliable_link.ReliableLink``) a read's frames go through it as one batch first.
An oversize length (framing lost) closes the face, as the forwarder does.

Sending: a packet sent while nothing else left this loop turn is written at once; those that
follow it in the same turn, or that a read's handling sends, wait and leave together in one
``writelines`` (one writev) at the end of the turn or of the read: a lone packet is never
delayed, a burst costs one system call.  ``drain()`` writes what waits and, when the
transport's buffer is above its high-water mark, waits for it to drain (pacing).  A send
while the connection is down, or one the closing connection could not take, is lost as on a
lossy link and counted (``lost_sends``).
"""
from __future__ import annotations

import asyncio
import configparser
import ipaddress
import logging
import os
import socket
from typing import Callable, Final, cast
from urllib.parse import urlparse

from ndnps.ndn.fragmentation import Reassembler
from ndnps.ndn.reliability import ReliabilityCounters
from ndnps.ndn.reliable_link import ReliableLink
from ndnps.ndn.tlv import LP_PACKET, DecodeError, StreamFramer

log = logging.getLogger(__name__)

DEFAULT_TRANSPORT: Final = "unix:///run/nfd/nfd.sock"
NDN_PORT: Final = 6363
CLIENT_CONF_PATHS: Final = ("~/.ndn/client.conf", "/usr/local/etc/ndn/client.conf",
                            "/opt/local/etc/ndn/client.conf", "/etc/ndn/client.conf")
TRANSPORT_ENV: Final = "NDN_CLIENT_TRANSPORT"


def transport_uri() -> str:
    """The forwarder's transport as python-ndn reads it: NDN_CLIENT_TRANSPORT, else the
    client.conf's ``transport``, else the platform default."""
    env = os.environ.get(TRANSPORT_ENV)
    if env:
        return env
    for path in CLIENT_CONF_PATHS:
        full = os.path.expandvars(os.path.expanduser(path))
        if not os.path.exists(full):
            continue
        parser = configparser.ConfigParser()
        try:
            with open(full) as f:
                parser.read_string("[DEFAULT]\n" + f.read())
        except (OSError, configparser.Error) as e:
            log.warning("ignoring %s: %s", full, e)
            return DEFAULT_TRANSPORT
        return parser["DEFAULT"].get("transport", DEFAULT_TRANSPORT)
    return DEFAULT_TRANSPORT


def _ignore(_packet: bytes) -> None:
    pass


def _nothing() -> None:
    pass


class Face:
    """The connection to the forwarder named by `uri` (an asyncio stream or datagram
    protocol); `receive(packet)` gets every network packet (an Interest, a Data, or an
    LpPacket of the forwarder's headers: PIT token, CongestionMark, Nack) once link
    reliability and reassembly have had theirs; `on_down()` is told when the connection is
    lost."""

    def __init__(self, uri: str) -> None:
        url = urlparse(uri)
        self.uri = uri
        self.scheme = url.scheme
        if self.scheme not in ("unix", "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6"):
            raise ValueError(f"transport {uri!r}: unix://, tcp:// or udp:// expected")
        self.path = url.path
        self.host = url.hostname or "127.0.0.1"
        self.port = url.port or NDN_PORT
        self.datagram = self.scheme.startswith("udp")
        self.receive: Callable[[bytes], None] = _ignore
        self.on_down: Callable[[], None] = _nothing
        self.transport: asyncio.BaseTransport | None = None
        self._stream: asyncio.WriteTransport | None = None      # the transport, as either kind
        self._dgram: asyncio.DatagramTransport | None = None
        self.running = False
        self.packets_in = self.packets_out = 0
        self.bytes_in = self.bytes_out = 0
        self.lost_sends = 0
        self.malformed = 0                       # unframeable or unreassemblable input
        # NDNLPv2 reliability with the forwarder: Acks are read and sent from `start_
        # reliability` on; what we send is wrapped once the forwarder has it on too
        self.reliable: ReliableLink | None = None
        self.wrap_out = False
        self.reliability_counters = ReliabilityCounters()     # over every connection
        self._framer = StreamFramer()
        self._reassembler = Reassembler()
        self._out: list[bytes] = []              # waiting for the end of this turn or read
        self._batching = False                   # a packet left this turn, or a read is handled
        self._closed: asyncio.Future[None] | None = None
        self._paused = False
        self._resumed: asyncio.Future[None] | None = None

    def is_local(self) -> bool:
        """A unix socket, or TCP/UDP to a loopback address: commands go to /localhost/nfd."""
        if self.scheme == "unix":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return self.host == "localhost"

    # ---- connection ---------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect (OSError while the forwarder is not there)."""
        loop = asyncio.get_running_loop()
        self._framer = StreamFramer()
        self._out = []
        self._batching = False
        self._paused = False
        self._closed = loop.create_future()
        if self.scheme == "unix":
            await loop.create_unix_connection(lambda: cast(asyncio.Protocol, self), self.path)
        elif self.datagram:
            family = socket.AF_INET6 if self.scheme == "udp6" else \
                socket.AF_INET if self.scheme == "udp4" else 0
            await loop.create_datagram_endpoint(lambda: cast(asyncio.DatagramProtocol, self),
                                                remote_addr=(self.host, self.port), family=family)
        else:
            family = socket.AF_INET6 if self.scheme == "tcp6" else \
                socket.AF_INET if self.scheme == "tcp4" else 0
            await loop.create_connection(lambda: cast(asyncio.Protocol, self), self.host,
                                         self.port, family=family)

    async def run(self) -> None:
        """Returns once the connection is lost (or the face closed)."""
        if self._closed is not None:
            await asyncio.shield(self._closed)

    def close(self) -> None:
        """What waits is written, link reliability stops (counters kept), the socket closes."""
        self.stop_reliability()
        self.flush()
        transport = self.transport
        self.running = False
        self._batching = False
        self._stream = self._dgram = None          # later sends are lost, and counted
        if transport is not None:
            transport.close()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.running = True
        if self.datagram:
            self._dgram = cast(asyncio.DatagramTransport, transport)
        else:
            self._stream = cast(asyncio.WriteTransport, transport)
            sock = transport.get_extra_info("socket")
            if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        self.running = False
        self.transport = self._stream = self._dgram = None
        self._out = []
        self.stop_reliability()
        closed = self._closed
        if closed is not None and not closed.done():
            closed.set_result(None)
        self._wake_drain()
        self.on_down()

    def eof_received(self) -> bool | None:
        return False                            # close: the forwarder went away

    def error_received(self, exc: Exception) -> None:
        """A datagram socket's error (the forwarder's port closed): as a lost packet."""
        log.debug("face %s: %s", self.uri, exc)

    # ---- link reliability ---------------------------------------------------------------------

    def start_reliability(self) -> None:
        self.stop_reliability()
        self.reliable = ReliableLink(self._send_raw, asyncio.get_running_loop(),
                                     self.reliability_counters)

    def stop_reliability(self) -> None:
        """The connection is gone (the forwarder's state with it): counters kept."""
        if self.reliable is not None:
            self.reliable.close()
        self.reliable = None
        self.wrap_out = False

    # ---- receiving ------------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        packets, oversize = self._framer.feed(data)
        self._handle(packets)
        if oversize:
            log.warning("oversize packet from the forwarder at %s: closing the face", self.uri)
            self.malformed += 1
            self.close()

    def datagram_received(self, data: bytes, addr: object) -> None:
        self._handle([data])

    def _handle(self, packets: list[bytes]) -> None:
        """One read's packets: counted, through link reliability (as one batch) and
        reassembly, handed up; what their handling sends leaves together after."""
        if not packets:
            return
        self.packets_in += len(packets)
        for p in packets:
            self.bytes_in += len(p)
        batching = self._batching
        self._batching = True
        try:
            reliable = self.reliable
            if reliable is not None:
                frames = [p for p in packets if p[0] == LP_PACKET]
                if len(frames) == len(packets):
                    packets = reliable.receive_many(packets)
                elif frames:
                    ups = iter(reliable.receive_many(frames))
                    packets = [p if p[0] != LP_PACKET else next(ups, b"") for p in packets]
            receive = self.receive
            for p in packets:
                if self.datagram and p and p[0] == LP_PACKET:
                    whole = self._reassemble(p)
                    if whole is None:
                        continue
                    p = whole
                if p:
                    receive(p)
        finally:
            self._batching = batching
            if not batching:
                self.flush()

    def _reassemble(self, wire: bytes) -> bytes | None:
        try:
            return self._reassembler.receive(wire, asyncio.get_running_loop().time())
        except DecodeError:
            self.malformed += 1
            return None

    # ---- sending --------------------------------------------------------------------------------

    def send(self, wire: bytes) -> None:
        """Send one network packet (wrapped for link reliability when it is on)."""
        self.packets_out += 1
        self.bytes_out += len(wire)
        reliable = self.reliable
        if self.wrap_out and reliable is not None:
            reliable.send(wire)
        else:
            self._send_raw(wire)

    def _send_raw(self, wire: bytes) -> None:
        if self._batching:
            self._out.append(wire)
            return
        try:
            if not self.running:
                self.lost_sends += 1
                return
            if self._stream is not None:
                self._stream.write(wire)
            elif self._dgram is not None:
                self._dgram.sendto(wire)
                return                             # no batching of datagrams
            else:
                self.lost_sends += 1
                return
        except (RuntimeError, ConnectionError, OSError):
            self.lost_sends += 1
            return
        # the next ones of this turn wait for its end and leave together
        self._batching = True
        asyncio.get_running_loop().call_soon(self._end_turn)

    def _end_turn(self) -> None:
        self._batching = False
        self.flush()

    def flush(self) -> None:
        """Write what waits, in one writev."""
        out = self._out
        if not out:
            return
        self._out = []
        try:
            if self._stream is not None:
                if len(out) == 1:
                    self._stream.write(out[0])
                else:
                    self._stream.writelines(out)
            elif self._dgram is not None:
                for wire in out:
                    self._dgram.sendto(wire)
            else:
                self.lost_sends += len(out)
        except (RuntimeError, ConnectionError, OSError):
            # the connection dropped before we noticed: lost, as on a lossy link
            self.lost_sends += len(out)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake_drain()

    def _wake_drain(self) -> None:
        resumed = self._resumed
        self._resumed = None
        if resumed is not None and not resumed.done():
            resumed.set_result(None)

    async def drain(self) -> None:
        """Write what waits, then wait while the transport's buffer is above its high-water
        mark (returns at once when the connection is down)."""
        self.flush()
        while self._paused and self.running:
            if self._resumed is None:
                self._resumed = asyncio.get_running_loop().create_future()
            await self._resumed
