"""tests.support.memnet: the apps' in-process network is the real forwarder core, its apps faces
of it: routing by registered prefix, *insert* / *distribute* / *remove*, the drop hook."""
from __future__ import annotations

import asyncio

import pytest
from ndnps.forwarder.pipelines import Forwarder
from ndnps.client.errors import InterestNack, InterestTimeout
from ndnps.client.security import DigestSigner
from ndnps.protocol import names
from tests.support.memnet import MemNet

SIGNER = DigestSigner()


def accept(_data) -> bool:
    return True


def producer(net: MemNet, prefix: str, content: bytes = b"x"):
    """An app answering every Interest under /prefix with `content`; its Interests seen."""
    app = net.app()
    seen = []

    def on_interest(name, _param, reply, _ctx):
        seen.append(name)
        reply(app.make_data(name, content, signer=SIGNER))
    app.attach_handler(names.node(prefix), on_interest)
    return app, seen


async def settle(turns: int = 5) -> None:
    for _ in range(turns):
        await asyncio.sleep(0)


@pytest.mark.asyncio
async def test_an_interest_reaches_the_producer_by_its_route_and_the_data_comes_back():
    net = MemNet()
    assert isinstance(net.fw, Forwarder)
    prod, seen = producer(net, "ps", b"hello")
    consumer = net.app()
    with pytest.raises(InterestNack):               # no route yet: Nacked by the forwarder
        await consumer.express(names.node("ps") + names.node("a"), accept, lifetime=200)
    assert await prod.register(names.node("ps"))
    assert net.routes[tuple(bytes(c) for c in names.node("ps"))] is prod
    data = await consumer.express(names.node("ps") + names.node("a"), accept, lifetime=200)
    assert bytes(data.content) == b"hello" and len(seen) == 1
    got = await consumer.express_future(names.node("ps") + names.node("b"), accept,
                                        must_be_fresh=True)
    assert bytes(got.content) == b"hello" and len(seen) == 2
    assert net.fw.counters.satisfied >= 2
    assert consumer.traffic()["packets_received"] == 3      # a Nack and two Data


@pytest.mark.asyncio
@pytest.mark.looptime   # the three inserts within one retx-suppression window however loaded the host
async def test_inserted_apps_each_get_a_pushed_data_once_and_remove_prunes():
    net = MemNet()
    ps = net.app()
    inserts, removes = [], []
    ps.attach_handler(names.insert_prefix("ps"), lambda n, p, reply, c: inserts.append(n))
    ps.attach_handler(names.remove_prefix("ps"), lambda n, p, reply, c: removes.append(n))
    assert await ps.register(names.node("ps"))
    workers = [net.app() for _ in range(3)]
    got = {w: [] for w in workers}
    for w in workers:
        w.on_distribute = lambda data, w=w: got[w].append(bytes(data.content))
        net.interest(w, names.insert("ps", "t1"), 1000, True)
    outsider = net.app()                             # no insert: gets nothing
    outsider.on_distribute = lambda *a: pytest.fail("pushed to an app that did not insert")
    await settle()
    # each insert joins its face to the entry; the three, pending together under one name,
    # are aggregated in the PIT: the PS hears the first
    assert len(inserts) == 1
    key = tuple(bytes(c) for c in names.node("ps") + names.node("t1"))
    assert net.ppit[key] == set(workers)

    ps.send_data(ps.make_data(names.distribute("ps", "t1", 1, 0), b"v1", signer=SIGNER))
    await settle()
    assert all(g == [b"v1"] for g in got.values()) and net.pushes_out == 3

    # *remove*: the entry loses the face; only the last one goes on to the PS (a prune)
    net.interest(workers[0], names.remove("ps", "t1"), 1000, True)
    net.interest(workers[1], names.remove("ps", "t1"), 1000, True)
    await settle()
    assert net.ppit[key] == {workers[2]} and removes == []
    ps.send_data(ps.make_data(names.distribute("ps", "t1", 2, 0), b"v2", signer=SIGNER))
    await settle()
    assert got[workers[0]] == got[workers[1]] == [b"v1"]
    assert got[workers[2]] == [b"v1", b"v2"]
    net.interest(workers[2], names.remove("ps", "t1"), 1000, True)
    await settle()
    assert not net.ppit and len(removes) == 1


@pytest.mark.asyncio
async def test_the_drop_hook_loses_a_packet_on_its_way_to_an_app():
    lost = []

    def drop(kind, name, app):
        if kind == "data" and not lost:
            lost.append((kind, names.to_str(name), app))
            return True
        return False
    net = MemNet(drop)
    prod, seen = producer(net, "ps")
    await prod.register(names.node("ps"))
    consumer = net.app()
    with pytest.raises(InterestTimeout):            # the Data is lost on the way back
        await consumer.express(names.node("ps") + names.node("a"), accept, lifetime=50)
    assert lost == [("data", "/ps/a", consumer)] and len(seen) == 1
    data = await consumer.express(names.node("ps") + names.node("a"), accept,
                                  must_be_fresh=True, lifetime=200)
    assert bytes(data.content) == b"x" and len(seen) == 2     # MustBeFresh: the producer again


@pytest.mark.asyncio
async def test_the_drop_hook_tells_pushes_from_answers():
    """A Data sent along the persistent entry is a "push"; the same Data answering a probe
    from the forwarder's Content Store is "data"."""
    kinds = []
    net = MemNet(lambda kind, name, app: kinds.append((kind, names.to_str(name))) and False)
    ps = net.app()
    ps.attach_handler(names.insert_prefix("ps"), lambda n, p, reply, c: None)
    await ps.register(names.node("ps"))
    w1, w2 = net.app(), net.app()
    net.interest(w1, names.insert("ps", "t1"), 1000, True)
    await settle()
    v1 = names.distribute("ps", "t1", 1, 0)
    ps.send_data(ps.make_data(v1, b"v1", signer=SIGNER))
    await settle()
    data = await w2.express(v1, accept, lifetime=200)     # a probe: a CS hit
    assert bytes(data.content) == b"v1" and net.fw.counters.cs_hits == 1
    uri = names.to_str(v1)
    assert kinds == [("interest", "/%2Ainsert%2A/ps/t1"), ("push", uri), ("data", uri)]
