"""NDNLPv2 link reliability between our apps and a real forwarder process whose app faces lose
10 % of packets each way: faces/update turns it on, both ends wrap, acknowledge and repair, so
Interests that cross two lossy faces (four with their Data) are answered at their first try."""
from __future__ import annotations

import asyncio

import pytest
from ndnps.forwarder.status import fetch_status
from ndnps.client.app import App
from ndnps.client.errors import InterestTimeout
from ndnps.client.security import DigestSigner, pass_all
from ndnps.protocol import names
from ndnps.lab.process import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]
N = 150


async def _open(sock: str, reliable: bool) -> tuple[App, asyncio.Task]:
    app = App(f"unix://{sock}", lp_reliability=reliable)
    await app.face.open()
    task = asyncio.create_task(app.face.run())
    if reliable:
        assert await app.enable_reliability()
    return app, task


async def _close(apps: list[App], tasks: list[asyncio.Task]) -> None:
    for app in apps:
        app.shutdown()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _status(sock: str) -> dict:
    """The forwarder's status, asked for over a face that loses 10 % too (a plain reader)."""
    return fetch_status(f"unix://{sock}", timeout=1.0, tries=10)


async def _answered(consumer: App, prefix: str) -> int:
    """How many of N Interests (8 at a time) are answered at their only try."""
    sem = asyncio.Semaphore(8)

    async def one(i: int) -> bool:
        async with sem:
            try:
                await consumer.express(f"{prefix}/{i}", pass_all, lifetime=2000,
                                       must_be_fresh=True)
                return True
            except InterestTimeout:
                return False
    return sum(await asyncio.gather(*(one(i) for i in range(N))))


async def test_lossy_app_faces_with_link_reliability_lose_nothing(procs):
    config = procs.workdir / "fwd.toml"
    config.write_text("[app_links]\nloss = 0.1\n")
    sock = procs.forwarder(config=config)
    tasks, apps = [], []
    try:
        producer, t = await _open(sock, True)
        tasks.append(t)
        apps.append(producer)
        served: list[str] = []

        def on_interest(name, _param, reply, _ctx):
            served.append(names.to_str(name))
            reply(producer.make_data(name, b"r" * 1000, DigestSigner()))

        producer.attach_handler("/rel", on_interest)
        assert await producer.register("/rel")
        producer.attach_handler("/plain", on_interest)
        assert await producer.register("/plain")
        reliable, t = await _open(sock, True)
        plain, t2 = await _open(sock, False)
        tasks += [t, t2]
        apps += [reliable, plain]

        got = await _answered(reliable, "/rel")
        lost_plain = N - await _answered(plain, "/plain")
        # each Interest and its Data cross 4 lossy hops: without repair 1 - 0.9^4 = 34 % fail
        # (the plain consumer's Interests still reach the producer over its repaired face)
        assert got >= N - 2, got
        assert lost_plain >= N // 10, lost_plain
        # nothing handed up twice: each Interest reached the producer once
        assert len([n for n in served if n.startswith("/rel/")]) == len(
            {n for n in served if n.startswith("/rel/")})
        for app in (producer, reliable):
            counters = app.face.reliability_counters
            for _ in range(30):             # the last Acks may still be on their way
                if counters.acknowledged + counters.given_up >= N:
                    break
                await asyncio.sleep(0.1)
            assert counters.acknowledged >= N - 5 and counters.malformed == 0
        assert reliable.face.reliability_counters.retransmitted > 0
        assert plain.face.reliable is None

        status = _status(sock)
        faces = {f["id"]: f for f in status["faces"] if f["remote"].startswith("fd://")}
        on = [f for f in faces.values() if f["lp_reliability"] is not None]
        assert len(on) == 2            # the plain consumer and the status reader: off
        assert sum(f["lp_reliability"]["retransmitted"] for f in on) > 0
        assert all(f["lp_reliability"]["malformed"] == 0 for f in on)
    finally:
        await _close(apps, tasks)


async def test_lossy_link_between_forwarders_with_reliability_from_their_config(procs):
    """Two forwarders joined by a UDP face that loses 10 % of what each end sends, with
    `[[faces]] reliability = true` at both ends: plain apps (no link reliability of their own)
    see every Interest answered at its first try; both faces report their repairs."""
    port_a, port_b = free_port(), free_port()
    for me, peer, port in (("a", "b", port_b), ("b", "a", port_a)):
        (procs.workdir / f"{me}.toml").write_text(
            f'[[faces]]\nname = "{peer}"\nuri = "udp4://127.0.0.1:{port}"\nloss = 0.1\n'
            'reliability = true\n' + ('[[routes]]\nprefix = "/rel"\nface = "b"\n'
                                      if me == "a" else ""))
    sock_a = procs.forwarder("a", udp=port_a, config=procs.workdir / "a.toml")
    sock_b = procs.forwarder("b", udp=port_b, config=procs.workdir / "b.toml")
    tasks, apps = [], []
    try:
        producer, t = await _open(sock_b, False)
        tasks.append(t)
        apps.append(producer)
        producer.attach_handler(
            "/rel", lambda name, _p, reply, _c: reply(
                producer.make_data(name, b"r" * 1000, DigestSigner())))
        assert await producer.register("/rel")
        consumer, t = await _open(sock_a, False)
        tasks.append(t)
        apps.append(consumer)
        # without repair an exchange fails 1 - 0.9^2 = 19 % of the time
        got = await _answered(consumer, "/rel")
        assert got >= N - 2, got
        repaired = 0
        for sock in (sock_a, sock_b):
            # the last frames' Acks may still be on their way (or lost and repaired): wait
            # until each of the N frames this end sent is acknowledged or given up
            for _ in range(30):
                face = next(f for f in fetch_status(f"unix://{sock}", timeout=2.0)["faces"]
                            if f["remote"].startswith("udp"))
                lp = face["lp_reliability"]
                assert lp is not None and lp["malformed"] == 0
                if lp["acknowledged"] + lp["given_up"] >= N:
                    break
                await asyncio.sleep(0.1)
            assert lp["acknowledged"] >= N - 2, lp
            assert face["counters"]["drops"].get("emulated_loss", 0) > 0
            repaired += lp["retransmitted"]
        assert repaired > 0
    finally:
        await _close(apps, tasks)
