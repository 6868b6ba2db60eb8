"""A simulated network of real forwarders (the daemon's own objects on the virtual clock) with
the apps' real client: routes and registration through the real management, timing by the
link model, bytes per link."""
from __future__ import annotations

import asyncio

import pytest

from ndnps.client.fetcher import SegmentFetcher
from ndnps.client.security import DigestSigner
from ndnps.ndn import encoders
from ndnps.protocol import names
from ndnps.sim.link import WIRE_OVERHEAD, LinkSpec
from ndnps.sim.loop import run
from ndnps.sim.net import SimNet

pytestmark = pytest.mark.timeout(60)

SIGNER = DigestSigner()


def accept(_data) -> bool:
    return True


def producer(app, prefix: str, content: bytes):
    seen = []

    def on_interest(name, _param, reply, _ctx):
        seen.append(name)
        reply(app.make_data(name, content, signer=SIGNER))
    app.attach_handler(names.node(prefix), on_interest)
    return seen


def line(specs: list[LinkSpec], seed: int = 0, reliability: bool = False) -> SimNet:
    """Forwarders a, b, c ... in a line, one link each `spec`, /ps routed toward the last."""
    net = SimNet(asyncio.get_running_loop(), seed=seed)
    nodes = "abcdefgh"[:len(specs) + 1]
    for name in nodes:
        net.add_forwarder(name)
    for x, y, spec in zip(nodes, nodes[1:], specs):
        net.connect(x, y, spec, reliability=reliability)
        net.route(x, "/ps", y)
    return net


async def serving(net: SimNet, content: bytes):
    """The network started, a producer of /ps on its last forwarder (registered through the
    management); returns a consumer on the first and the Interests the producer saw."""
    await net.start()
    *_, last = net.nodes
    prod = net.app(last)
    seen = producer(prod, "ps", content)
    assert await prod.register(names.node("ps"))            # the real management's answer
    return net.app("a"), seen


def test_an_interest_crosses_two_forwarders_and_the_data_comes_back_in_link_time():
    spec = LinkSpec(rate_mbps=100, delay_ms=5)

    async def main():
        loop = asyncio.get_running_loop()
        net = line([spec])
        consumer, seen = await serving(net, b"z" * 1000)
        await asyncio.sleep(1)
        t0 = loop.time()
        data = await consumer.express(names.node("ps") + names.node("x"), accept,
                                      lifetime=1000)
        rtt = loop.time() - t0
        await net.stop()
        return net, data, seen, rtt

    (net, data, seen, rtt), loop = run(main())
    assert bytes(data.content) == b"z" * 1000 and len(seen) == 1
    ab, ba = net.counters()
    assert (ab["from"], ab["to"], ab["packets"], ba["packets"]) == ("a", "b", 1, 1)
    # the round trip is the two serialisations and two delays: apps and forwarders take no time
    expected = sum((row["bytes"] + WIRE_OVERHEAD) * 8 / 100e6 for row in (ab, ba)) + 0.010
    assert rtt == pytest.approx(expected, abs=1e-9)
    # the forwarders' face counters count what the link carried
    a_face = net.nodes["a"].faces["b"].info.counters
    assert a_face.out_bytes == ab["bytes"] and a_face.in_bytes == ba["bytes"]
    assert loop.events > 0


def test_a_chain_of_forwarders_each_link_its_own_model():
    """a - b - c, links of different rates and delays: the round trip is the sum of every
    hop's serialisations and delays, and each link counts only its own traffic."""
    specs = [LinkSpec(rate_mbps=100, delay_ms=1), LinkSpec(rate_mbps=10, delay_ms=7)]

    async def main():
        loop = asyncio.get_running_loop()
        net = line(specs)
        consumer, _ = await serving(net, b"c" * 500)
        t0 = loop.time()
        await consumer.express(names.node("ps") + names.node("x"), accept, lifetime=1000)
        rtt = loop.time() - t0
        await net.stop()
        return net, rtt

    (net, rtt), _ = run(main())
    rows = net.counters()
    assert [(r["from"], r["to"], r["packets"]) for r in rows] == \
        [("a", "b", 1), ("b", "a", 1), ("b", "c", 1), ("c", "b", 1)]
    expected = 0.0
    for row, spec in zip(rows, [specs[0]] * 2 + [specs[1]] * 2):
        expected += row["wire_bytes"] * 8 / (spec.rate_mbps * 1e6) + spec.delay_ms / 1000
    assert rtt == pytest.approx(expected, abs=1e-9)


def test_a_transfer_takes_what_the_link_rate_says():
    spec = LinkSpec(rate_mbps=100, delay_ms=2, mtu=1472)
    n, size = 200, 4000                      # each Data in 3 fragments

    async def main():
        loop = asyncio.get_running_loop()
        net = line([spec])
        consumer, _ = await serving(net, b"q" * size)
        await asyncio.sleep(1)
        t0 = loop.time()
        await asyncio.gather(*(consumer.express(names.node("ps") + names.node(f"s{i}"),
                                                accept, lifetime=4000) for i in range(n)))
        took = loop.time() - t0
        await net.stop()
        return net, took

    (net, took), _ = run(main())
    ab, ba = net.counters()
    assert ba["packets"] == n and ba["frames"] == 3 * n and ba["lost"] == 0
    # the Data direction is the bottleneck: its wire bytes at 100 Mbit/s, plus one Interest's
    # trip and the delays, within one packet's time
    link_time = ba["wire_bytes"] * 8 / 100e6
    one_packet = (size + 200) * 8 / 100e6
    first_interest = (ab["bytes"] / n + WIRE_OVERHEAD) * 8 / 100e6
    assert took == pytest.approx(link_time + first_interest + 0.004, abs=one_packet)


def test_pushes_along_a_persistent_entry_cross_the_link_at_its_rate():
    """The forwarders' persistent PIT across a simulated link: a subscriber's *insert* at a
    reaches b's producer; b's pushes come back along the entries, paced by the link."""
    spec = LinkSpec(rate_mbps=100, delay_ms=5, mtu=1472)
    n, size = 50, 4000

    async def main():
        loop = asyncio.get_running_loop()
        net = line([spec])
        await net.start()
        pusher = net.app("b")
        inserts = []
        pusher.attach_handler(names.insert_prefix("ps"),
                              lambda name, p, reply, c: inserts.append(loop.time()))
        assert await pusher.register(names.node("ps"))
        sub = net.app("a")
        got = []
        sub.on_distribute = lambda data: got.append((loop.time(), bytes(data.content)))
        await asyncio.sleep(1)
        t_insert = loop.time()
        sub.face.send(encoders.encode_interest(names.insert("ps", "t1"), 1, 10_000, False, True))
        await asyncio.sleep(0.1)
        t0 = loop.time()
        for i in range(n):
            pusher.send_data(pusher.make_data(names.distribute("ps", "t1", 1, i),
                                              bytes([i]) * size, signer=SIGNER))
        await asyncio.sleep(1)
        await net.stop()
        return net, inserts, t_insert, got, t0

    (net, inserts, t_insert, got, t0), _ = run(main())
    assert len(inserts) == 1 and inserts[0] > t_insert + 0.005     # one delay at least
    assert [c for _, c in got] == [bytes([i]) * size for i in range(n)]
    ab, ba = net.counters()
    assert ba["packets"] == n and net.nodes["b"].fw.counters.pushes_out == n
    # the last push lands when the link has carried every frame, plus one delay
    assert got[-1][0] - t0 == pytest.approx(ba["wire_bytes"] * 8 / 100e6 + 0.005, abs=1e-9)


def test_link_reliability_repairs_a_lossy_link_below_fragmentation():
    """Faces with NDNLPv2 reliability on (as faces/update turns it on): each fragment a frame
    of its own, a lost one resent by the link, so every Data arrives at 5 % loss each way."""
    spec = LinkSpec(rate_mbps=100, delay_ms=2, loss=0.05, mtu=1472)
    n = 100

    async def main():
        net = line([spec], seed=3, reliability=True)
        consumer, _ = await serving(net, b"r" * 3000)
        got = await asyncio.gather(*(consumer.express(names.node("ps") + names.node(f"s{i}"),
                                                      accept, lifetime=2000)
                                     for i in range(n)))
        await net.stop()
        return net, got

    (net, got), _ = run(main())
    assert len(got) == n and all(bytes(d.content) == b"r" * 3000 for d in got)
    ab, ba = net.counters()
    assert ab["lost"] + ba["lost"] > 0
    rel = net.nodes["b"].faces["a"].info.lp_reliability
    assert rel is not None and rel.retransmitted > 0


def test_a_windowed_fetch_fills_a_bottleneck_and_backs_off_on_its_marks():
    """The client's real fetcher (congestion window, RTO) over a 10 Mbit/s link: the link's
    queue marks as the real face's, the marks reach the consumer, its window holds the
    queue's delay down, and the transfer runs at the link's rate."""
    spec = LinkSpec(rate_mbps=10, delay_ms=5, mtu=1472)
    n, size = 1500, 4000

    async def main():
        loop = asyncio.get_running_loop()
        net = line([spec])
        consumer, _ = await serving(net, b"f" * size)
        fetcher = SegmentFetcher(consumer.express_future, accept, window=256)
        t0 = loop.time()
        got = await fetcher.fetch_many(lambda seg: names.content("ps", "t1", "w1", seg),
                                       list(range(n)))
        took = loop.time() - t0
        await net.stop()
        return net, consumer, got, took

    (net, consumer, got, took), _ = run(main())
    assert len(got) == n
    ab, ba = net.counters()
    queue = net.nodes["b"].faces["a"].info.send_queue
    assert queue is not None and queue.marked > 0 and consumer.marks_in > 0
    assert ba["queue_full"] == 0 and queue.max_delay < 0.2
    # link-bound: the Data direction's wire time, within 10 %
    assert took == pytest.approx(ba["wire_bytes"] * 8 / 10e6, rel=0.1)


def test_a_run_is_repeatable():
    """The same network, seed and apps: the same events at the same virtual times."""
    spec = LinkSpec(rate_mbps=50, delay_ms=3, loss=0.02, mtu=1472)

    async def main():
        net = line([spec, spec], seed=7)
        consumer, _ = await serving(net, b"d" * 3000)
        fetcher = SegmentFetcher(consumer.express_future, accept, window=64)
        await fetcher.fetch_many(lambda seg: names.content("ps", "t1", "w1", seg),
                                 list(range(300)))
        await net.stop()
        return net.counters()

    (rows1, loop1), (rows2, loop2) = run(main()), run(main())
    assert rows1 == rows2 and any(r["lost"] for r in rows1)
    assert (loop1.time(), loop1.events) == (loop2.time(), loop2.events)
