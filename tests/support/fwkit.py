"""Small builders and decoders shared by the forwarder unit tests (tests/unit/test_fw_*.py).

Packets are encoded by python-ndn (what the apps speak), never by the code under test, and the
forwarder's output is decoded by python-ndn too. `Bench` wraps a sans-I/O `Forwarder` with a
fake clock: `b.now` is the time, `b.later(s)` moves it.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from ndn.encoding import (
    Component, InterestParam, MetaInfo, Name, make_data, make_interest, parse_data,
    parse_interest,
)
from ndn.encoding.ndnlp_v2 import parse_lp_packet_v2
from ndn.security import DigestSha256Signer

from ndnps.ndn import tlv
from ndnps.ndn.packet import Interest, decode
from ndnps.forwarder.outgoing import Limits
from ndnps.forwarder.pipelines import Forwarder

INSERT = Component.from_bytes(b"*insert*")
DISTRIBUTE = Component.from_bytes(b"*distribute*")
REMOVE = Component.from_bytes(b"*remove*")

_SIGNER = DigestSha256Signer()
_nonces = itertools.count(0x1000_0001)
AUTO = object()


# ---- names ---------------------------------------------------------------------------------

def name(n) -> list[bytes]:
    """A python-ndn name from a URI ('/a/b', '/*insert*/ps/t') or a list of components."""
    if isinstance(n, str):
        return [bytes(c) for c in Name.from_str(n)]
    return [bytes(c) if not isinstance(c, str) else bytes(Name.from_str(c)[0]) for c in n]


def nv(n) -> bytes:
    """Name TLV-VALUE (the concatenated components): how the forwarder's tables key names."""
    return b"".join(name(n))


def depth(n) -> int:
    return len(name(n))


def uri(n) -> str:
    return Name.to_str(name(n))


def vs(prefix: str, version: int, segment: int, marker=DISTRIBUTE) -> list[bytes]:
    """`/<marker>/<prefix>/v=<version>/seg=<segment>` (marker None: no marker)."""
    head = [bytes(marker)] if marker is not None else []
    return head + name(prefix) + [bytes(Component.from_version(version)),
                                  bytes(Component.from_segment(segment))]


def marked(marker, prefix: str) -> list[bytes]:
    return [bytes(marker)] + name(prefix)


# ---- packets -------------------------------------------------------------------------------

def next_nonce() -> int:
    return next(_nonces)


def interest(n, *, cbp: bool = False, mbf: bool = False, nonce=AUTO, lifetime: int | None = 4000,
             hop: int | None = None, app_param: bytes | None = None) -> bytes:
    """An Interest as python-ndn encodes it. nonce=None: no Nonce element."""
    if nonce is AUTO:
        nonce = next_nonce()
    return bytes(make_interest(name(n), InterestParam(can_be_prefix=cbp, must_be_fresh=mbf,
                                                      nonce=nonce, lifetime=lifetime,
                                                      hop_limit=hop), app_param))


def data(n, *, fresh: int | None = None, content: bytes = b"payload") -> bytes:
    """A Data signed with DigestSha256; fresh = FreshnessPeriod in ms (None: absent)."""
    return bytes(make_data(name(n), MetaInfo(freshness_period=fresh), content, signer=_SIGNER))


def lp(fragment: bytes | None, *, token: bytes | None = None, nack: int | None = None,
       nack_without_reason: bool = False, headers: list[tuple[int, bytes]] = (),
       trailer: list[tuple[int, bytes]] = ()) -> bytes:
    """An LpPacket, encoded field by field so tests control every byte. `headers` go before
    the Fragment, `trailer` after it."""
    body = b"".join(tlv.encode_tlv(t, v) for t, v in headers)
    if token is not None:
        body += tlv.encode_tlv(tlv.LP_PIT_TOKEN, token)
    if nack is not None:
        body += tlv.encode_tlv(tlv.LP_NACK, tlv.encode_tlv(tlv.LP_NACK_REASON,
                                                           tlv.encode_nonneg(nack)))
    elif nack_without_reason:
        body += tlv.encode_tlv(tlv.LP_NACK, b"")
    if fragment is not None:
        body += tlv.encode_tlv(tlv.LP_FRAGMENT, fragment)
    body += b"".join(tlv.encode_tlv(t, v) for t, v in trailer)
    return tlv.encode_tlv(tlv.LP_PACKET, body)


def nack(interest_wire: bytes, reason: int, token: bytes | None = None) -> bytes:
    return lp(interest_wire, token=token, nack=reason)


def decoded_interest(wire: bytes) -> Interest:
    pkt = decode(wire)
    assert isinstance(pkt, Interest)
    return pkt


def with_hop(wire: bytes, hop: int) -> bytes:
    """The same Interest with its HopLimit byte set to `hop` (python-ndn re-encodes)."""
    n, p, app, _ = parse_interest(wire)
    p.hop_limit = hop
    return bytes(make_interest(n, p, app))


# ---- decoding what the forwarder sends -----------------------------------------------------

@dataclass(frozen=True)
class Pkt:
    kind: str                 # "I" Interest, "D" Data, "N" Nack
    name: str                 # NDN URI (python-ndn)
    net: bytes                # the network-layer packet (Interest/Data TLV)
    token: bytes | None = None
    reason: int | None = None
    nonce: int | None = None
    hop: int | None = None
    cbp: bool = False
    mbf: bool = False
    content: bytes | None = None


def parse_out(wire: bytes) -> Pkt:
    """Decode one packet the forwarder sends, with python-ndn."""
    token = reason = None
    net = bytes(wire)
    if net[0] == tlv.LP_PACKET:
        lpv = parse_lp_packet_v2(net)
        token = bytes(lpv.pit_token) if lpv.pit_token is not None else None
        if lpv.nack is not None:
            reason = lpv.nack.nack_reason
            assert reason is not None, "a Nack must carry a NackReason"
        net = bytes(lpv.fragment)
    if net[0] == tlv.INTEREST:
        n, p, _, _ = parse_interest(net)
        return Pkt("N" if reason is not None else "I", Name.to_str(n), net, token, reason,
                   p.nonce, p.hop_limit, p.can_be_prefix, p.must_be_fresh)
    assert reason is None, "a Nack must carry an Interest"
    n, _, content, _ = parse_data(net)
    return Pkt("D", Name.to_str(n), net, token,
               content=bytes(content) if content is not None else None)


def brief(out) -> list[tuple[int, str, str]]:
    """(face, kind, name) of each action, in order."""
    return [(f, p.kind, p.name) for f, p in out]


# ---- a forwarder on a fake clock -----------------------------------------------------------

class Bench:
    def __init__(self, **limits) -> None:
        self.now = 1000.0
        self.fw = Forwarder(Limits(**limits), clock=lambda: self.now)

    def face(self, local: bool = False) -> int:
        return self.fw.add_face(local).id

    def faces(self, n: int, local: bool = False) -> list[int]:
        return [self.face(local) for _ in range(n)]

    def route(self, prefix, face: int, cost: int = 0) -> None:
        self.fw.fib.add_nexthop(nv(prefix), depth(prefix), face, cost)

    def later(self, seconds: float) -> None:
        self.now += seconds

    def raw(self, face: int, wire: bytes) -> list[tuple[int, bytes]]:
        return self.fw.on_receive(face, wire)

    def rx(self, face: int, wire: bytes) -> list[tuple[int, Pkt]]:
        """Receive on `face`; return what the forwarder sends, decoded."""
        return [(f, parse_out(w)) for f, w in self.fw.on_receive(face, wire)]

    def drops(self, face: int) -> dict[str, int]:
        return {k: v for k, v in self.fw.faces.get(face).counters.drops.items() if v}

    def counters(self, face: int):
        return self.fw.faces.get(face).counters


class FakeDatagramPort:
    """What a UDP channel uses of its socket (ndnps.forwarder.faces.udp.DatagramSocket), in memory:
    the kernel takes `room` datagrams (None: any number) and refuses the rest until
    `kernel_sent(n)` makes room, which then resumes the channel; `wire` is what it took, each
    as (bytes, (host, port)). `deferred`: end-of-turn callbacks wait for `run_turn()` (the
    channel's batching), else they run at once."""

    def __init__(self, sockname: tuple = ("127.0.0.1", 6363), room: int | None = None,
                 deferred: bool = False) -> None:
        self._sockname = sockname
        self.room = room
        self.deferred = deferred
        self.channel = None
        self.wire: list[tuple[bytes, tuple]] = []
        self.calls: list[int] = []                 # datagrams per send call
        self.waiting = False
        self.closed = False
        self._soon: list = []

    def start(self, channel) -> "FakeDatagramPort":
        self.channel = channel
        channel.connection_made(self)
        return self

    def sockname(self) -> tuple:
        return self._sockname

    def call_soon(self, callback) -> None:
        if self.deferred:
            self._soon.append(callback)
        else:
            callback()

    def run_turn(self) -> None:
        soon, self._soon = self._soon, []
        for callback in soon:
            callback()

    def _peer(self, sockaddr) -> tuple:
        for face in self.channel.faces.values():
            if face.sockaddr == sockaddr:
                return face.addr
        return sockaddr

    def send(self, frames: list[bytes], addrs: list) -> int:
        n = len(frames) if self.room is None else min(self.room, len(frames))
        if self.room is not None:
            self.room -= n
        self.calls.append(n)
        self.wire += [(f, self._peer(a)) for f, a in zip(frames[:n], addrs[:n])]
        return n

    @property
    def sent(self) -> list[tuple[bytes, tuple]]:
        return self.wire

    def wait_writable(self) -> None:
        self.waiting = True

    def kernel_sent(self, n: int) -> None:
        """n datagrams left the kernel: room for n more (and the channel resumes)."""
        self.room = (self.room or 0) + n
        if self.waiting:
            self.waiting = False
            self.channel.resume_writing()

    def close(self) -> None:
        self.closed = True
