"""The forwarder's configuration file: faces toward other forwarders, their link emulation and
link reliability; bad values are refused with the offending key named."""
from __future__ import annotations

import pytest

from forwarder.config import ConfigError, parse_config


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
    from forwarder.daemon import ForwarderDaemon
    from forwarder.tlv import name_from_str
    daemon = ForwarderDaemon(parse_config({"network_region": ["/isp/site"]}))
    assert daemon.fw.network_region == [name_from_str("/isp/site")]


@pytest.mark.asyncio
async def test_a_kept_tcp_face_backs_off_when_its_peer_accepts_and_hangs_up():
    """A peer that accepts and closes at once: the face is connected again with backoff,
    not in a storm; a bad face URI fails the start as before (no hang)."""
    import asyncio
    from forwarder.daemon import ForwarderDaemon
    accepted = 0

    def hang_up(reader, writer):
        nonlocal accepted
        accepted += 1
        writer.close()

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    daemon = ForwarderDaemon(parse_config({"listen": {"unix": "", "tcp": 0, "udp": 0},
                                           "faces": [{"name": "p", "uri": f"tcp4://127.0.0.1:{port}"}]}))
    try:
        await daemon.start()
        await asyncio.sleep(1.0)
        assert 1 <= accepted <= 6, accepted          # 0.1 + 0.2 + 0.4 s of waits, not 1000s
    finally:
        await daemon.stop()
        server.close()
    from forwarder.config import Config, FaceConfig
    bad = ForwarderDaemon(Config(unix="", tcp=0, udp=0,
                                 faces=[FaceConfig("x", "tcp4://127.0.0.1")]))   # no port
    try:
        with pytest.raises(ValueError, match="host and port"):
            await asyncio.wait_for(bad.start(), 5)
    finally:
        await bad.stop()


def test_strategies_take_nfd_instance_names_with_parameters():
    name = "/localhost/nfd/strategy/best-route/v=5/retx-suppression-initial~2"
    cfg = parse_config({"strategies": [{"prefix": "/", "strategy": name},
                                       {"prefix": "/ps", "strategy": "multicast"}]})
    assert cfg.strategies == {"/": name, "/ps": "multicast"}
