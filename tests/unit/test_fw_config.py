"""The forwarder's configuration file: faces toward other forwarders, their link emulation and
link reliability; bad values are refused with the offending key named."""
from __future__ import annotations

import asyncio
import socket

import pytest

from ndnps.forwarder.config import ConfigError, parse_config


def test_faces_take_link_emulation_and_link_reliability():
    cfg = parse_config({"faces": [
        {"name": "root", "uri": "udp4://127.0.0.1:6364", "loss": 0.1, "reliability": True},
        {"name": "leaf", "uri": "tcp4://127.0.0.1:6365"}],
        "routes": [{"prefix": "/ps", "face": "root"}]})
    root, leaf = cfg.faces
    assert (root.name, root.link.loss, root.reliability) == ("root", 0.1, True)
    assert (leaf.name, leaf.link.loss, leaf.reliability) == ("leaf", 0.0, False)


@pytest.mark.parametrize("doc, key", [
    ({"faces": [{"uri": "udp4://127.0.0.1:1", "reliability": "yes"}]}, "faces[0].reliability"),
    ({"faces": [{"uri": "udp4://127.0.0.1:1", "reliable": True}]}, "faces[0]"),
    ({"faces": [{"uri": "http://x"}]}, "faces[0].uri"),
    ({"faces": [{"uri": "udp4://127.0.0.1:1", "loss": 2.0}]}, "faces[0]"),
    ({"routes": [{"prefix": "/ps", "face": "nowhere"}]}, "routes[0].face"),
    ({"faces": [{"uri": "tcp4://127.0.0.1"}]}, "faces[0].uri"),             # no port
    ({"faces": [{"uri": "tcp4://h:70000"}]}, "faces[0].uri"),
    ({"faces": [{"name": "a", "uri": "tcp4://h:1"}, {"name": "b", "uri": "tcp4://h:1"}]},
     "faces[1].uri"),
    ({"faces": [{"uri": "udp4://127.0.0.1:1", "loss": float("nan")}]}, "faces[0].loss"),
    ({"app_links": {"rate_mbps": float("inf")}}, "app_links.rate_mbps"),
    ({"tables": {"ppit_lifetime": float("inf")}}, "tables.ppit_lifetime"),
    ({"network_region": "/isp"}, "network_region"),
    ({"network_region": ["/isp", "isp"]}, "network_region[1]"),
    ({"strategies": [{"prefix": "/", "strategy": "asf"}]}, "strategies[0].strategy"),
    ({"strategies": [{"prefix": "/", "strategy": "best-route/v=5/retx-suppression-max~0"}]},
     "strategies[0].strategy"),
])
def test_bad_values_name_their_key(doc, key):
    with pytest.raises(ConfigError, match=key.replace("[", r"\[")):
        parse_config(doc)


def test_network_region_names_the_producer_regions():
    assert parse_config({"network_region": ["/isp/site", "/other"]}).network_region == \
        ["/isp/site", "/other"]
    assert parse_config({}).network_region == []


def test_the_daemon_gives_the_forwarder_its_regions():
    from ndnps.forwarder.daemon import ForwarderDaemon
    from ndnps.ndn.tlv import name_from_str
    daemon = ForwarderDaemon(parse_config({"network_region": ["/isp/site"]}))
    assert daemon.fw.network_region == [name_from_str("/isp/site")]


class _HangUpTransport(asyncio.Transport):
    """The client end of a TCP connection whose peer accepted it and hung up."""

    def __init__(self, protocol: asyncio.Protocol) -> None:
        super().__init__()
        self._protocol = protocol
        self._lost = False

    def get_extra_info(self, name, default=None):
        return {"peername": ("127.0.0.1", 6363), "sockname": ("127.0.0.1", 40000)}.get(
            name, default)

    def set_write_buffer_limits(self, high=None, low=None) -> None:
        pass

    def hang_up(self) -> None:
        if not self._lost:
            self._lost = True
            self._protocol.connection_lost(None)

    def close(self) -> None:
        asyncio.get_running_loop().call_soon(self.hang_up)

    def is_closing(self) -> bool:
        return self._lost

    def get_write_buffer_size(self) -> int:
        return 0

    def writelines(self, data) -> None:
        pass


PEER_RTT = 0.001        # s: the peer's hang-up reaches the face this long after the connect


@pytest.mark.asyncio
@pytest.mark.looptime
async def test_a_kept_tcp_face_backs_off_when_its_peer_accepts_and_hangs_up(monkeypatch):
    """A peer that accepts and closes at once: the face is connected again with backoff,
    not in a storm; a bad face URI fails the start as before (no hang).

    The loop's clock is fake (looptime) and the peer is in the process (the loop's
    create_connection and getaddrinfo answer at once, no socket or resolver thread), so each
    wait between a hang-up and the next connect is exactly the backoff, however loaded the
    host is.  (The test below does the same over a real TCP connection.)"""
    from ndnps.forwarder.daemon import RECONNECT_MAX, RECONNECT_MIN, ForwarderDaemon
    loop = asyncio.get_running_loop()
    connects: list[float] = []
    hang_ups: list[float] = []

    async def create_connection(factory, host, port, **kw):
        assert (host, port) == ("127.0.0.1", 6363)
        protocol = factory()
        transport = _HangUpTransport(protocol)
        protocol.connection_made(transport)
        connects.append(loop.time())

        def hang_up() -> None:
            hang_ups.append(loop.time())
            transport.hang_up()
        loop.call_later(PEER_RTT, hang_up)
        return transport, protocol

    async def getaddrinfo(host, port, **kw):
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (host, port))]

    monkeypatch.setattr(loop, "create_connection", create_connection)
    monkeypatch.setattr(loop, "getaddrinfo", getaddrinfo)
    daemon = ForwarderDaemon(parse_config({"listen": {"unix": "", "tcp": 0, "udp": 0},
                                           "faces": [{"name": "p",
                                                      "uri": "tcp4://127.0.0.1:6363"}]}))
    try:
        start = loop.time()
        await daemon.start()
        await asyncio.sleep(1.0)
        # connected at 0, then 0.1, 0.2 and 0.4 s after each hang-up: 4 in the first second
        assert [round(t - start, 6) for t in connects] == [0.0, 0.101, 0.302, 0.703]
        await asyncio.sleep(30.0)
    finally:
        await daemon.stop()
    waits = [round(c - h, 6) for h, c in zip(hang_ups, connects[1:])]
    doubling = [RECONNECT_MIN * 2 ** i for i in range(6)]          # 0.1 ... 3.2 s
    assert waits[:6] == pytest.approx(doubling)
    assert len(waits) > 6 and waits[6:] == pytest.approx([RECONNECT_MAX] * (len(waits) - 6))
    from ndnps.forwarder.config import Config, FaceConfig
    bad = ForwarderDaemon(Config(unix="", tcp=0, udp=0,
                                 faces=[FaceConfig("x", "tcp4://127.0.0.1")]))   # no port
    try:
        with pytest.raises(ValueError, match="host and port"):
            await asyncio.wait_for(bad.start(), 5)
    finally:
        await bad.stop()


@pytest.mark.asyncio
@pytest.mark.timeout(30)
async def test_a_kept_tcp_face_is_connected_again_after_a_real_peer_hangs_up():
    """The same over a real TCP connection, on the real clock: the peer's hang-up takes the
    face down and the face is connected again.  No timing is asserted: the test waits for the
    second connection however slow a loaded host is (the backoff is checked above)."""
    from ndnps.forwarder.daemon import ForwarderDaemon
    accepted = 0
    again = asyncio.Event()

    def hang_up(reader, writer):
        nonlocal accepted
        accepted += 1
        writer.close()
        if accepted == 2:
            again.set()

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    daemon = ForwarderDaemon(parse_config({"listen": {"unix": "", "tcp": 0, "udp": 0},
                                           "faces": [{"name": "p", "uri": f"tcp4://127.0.0.1:{port}"}]}))
    try:
        await daemon.start()
        await again.wait()                      # bounded by the test's timeout only
        assert accepted >= 2
    finally:
        await daemon.stop()
        server.close()


def test_strategies_take_nfd_instance_names_with_parameters():
    name = "/localhost/nfd/strategy/best-route/v=5/retx-suppression-initial~2"
    cfg = parse_config({"strategies": [{"prefix": "/", "strategy": name},
                                       {"prefix": "/ps", "strategy": "multicast"}]})
    assert cfg.strategies == {"/": name, "/ps": "multicast"}


@pytest.mark.parametrize("udp, face_mtu, datagrams", [
    ({}, 1472, 7),                 # the default: an Ethernet MTU of 1500
    ({"mtu": 8800}, 8800, 1),      # a jumbo-frame link's: the longest NDN packet goes whole
])
def test_the_udp_faces_mtu_comes_from_the_configuration(udp, face_mtu, datagrams):
    # what a scenario over veths of links.mtu = 9000 writes ([udp] mtu = 8800): every face
    # toward a non-loopback peer sends an 8800-octet packet as one datagram, nothing fragmented
    from ndnps.forwarder.daemon import ForwarderDaemon
    from ndnps.forwarder.faces.udp import UdpChannel
    from ndnps.forwarder.mgmt import status_snapshot
    from ndnps.ndn.tlv import MAX_PACKET_SIZE
    from tests.support.fwkit import FakeDatagramPort, data

    cfg = parse_config({"udp": udp})
    assert cfg.udp_faces.mtu == (udp or {}).get("mtu")

    daemon = ForwarderDaemon(cfg)
    ch = UdpChannel(daemon, mtu=cfg.udp_faces.mtu)
    port = FakeDatagramPort(("10.0.0.2", 6363)).start(ch)
    face = ch.open_face("10.0.0.1", 6363)
    packet = data("/big", content=b"b" * 8000)
    packet = data("/big", content=b"b" * (8000 + MAX_PACKET_SIZE - len(packet)))
    assert len(packet) == MAX_PACKET_SIZE
    face.send(packet)
    sent = [wire for wire, _ in port.sent]
    assert len(sent) == datagrams and max(map(len, sent)) <= face_mtu
    [info] = [f for f in status_snapshot(daemon.fw)["faces"] if f["id"] == face.info.id]
    assert info["mtu"] == face_mtu
    assert info["lp_fragmentation"]["fragmented"] == (datagrams > 1)
    with pytest.raises(ConfigError, match="udp.mtu"):
        parse_config({"udp": {"mtu": MAX_PACKET_SIZE + 1}})
