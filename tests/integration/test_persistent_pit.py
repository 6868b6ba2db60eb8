"""Persistent PIT across real forwarder processes: a root (PS side) and two leaves with two
workers each, joined by UDP faces. Per-face counters show each pushed segment crosses each
link exactly once and reaches every registered worker, and nobody else."""
from __future__ import annotations

import asyncio
import sys
import textwrap

import pytest
from ndn.encoding import Component, Name

from ndnps.forwarder.status import fetch_status
from ndnps.lab.demo import CONSUMER, PRODUCER
from ndnps.ndn.markers import DISTRIBUTE, INSERT, REMOVE
from ndnps.lab.process import free_port, wait_until

from tests.support.rawclient import RawFace, marker, name_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

SEGMENTS = 20


def _tree(procs, ppit_lifetime: float = 60.0) -> dict[str, str]:
    ports = {n: free_port() for n in ("root", "leaf1", "leaf2")}
    configs = {
        "root": f"""
            [[faces]]
            name = "leaf1"
            uri = "udp4://127.0.0.1:{ports['leaf1']}"
            [[faces]]
            name = "leaf2"
            uri = "udp4://127.0.0.1:{ports['leaf2']}"
            [[routes]]
            prefix = "/gpu1"
            face = "leaf1"
            [[routes]]
            prefix = "/gpu3"
            face = "leaf2"
        """,
    }
    for leaf in ("leaf1", "leaf2"):
        configs[leaf] = f"""
            [[faces]]
            name = "root"
            uri = "udp4://127.0.0.1:{ports['root']}"
            [[routes]]
            prefix = "/ps"
            face = "root"
            [[routes]]
            prefix = "/plain"
            face = "root"
        """
    socks = {}
    for name, body in configs.items():
        path = procs.workdir / f"{name}.toml"
        path.write_text(f"[tables]\nppit_lifetime = {ppit_lifetime}\n" + textwrap.dedent(body))
        socks[name] = procs.forwarder(name, udp=ports[name], config=path)
    return socks


def _status(sock: str) -> dict:
    return fetch_status(f"unix://{sock}")


def _udp_face(status: dict, port: int | None = None) -> list[dict]:
    return [f for f in status["faces"] if f["remote"].startswith("udp")]


def _unix_faces(status: dict) -> dict[int, dict]:
    return {f["id"]: f["counters"] for f in status["faces"] if f["remote"].startswith("fd://")}


async def _ps_answering_inserts(ps: RawFace, seen: list[str]) -> None:
    """The PS side of registration: confirm every insert Interest it receives."""
    while True:
        wire = await ps.recv(timeout=60)
        if wire[0] != 0x05:
            continue
        name = name_of(wire)
        seen.append(name)
        if name.startswith("/%2Ainsert%2A/ps/t"):
            ps.put(marker(DISTRIBUTE, "/ps/t"), b"")


async def _join(sock: str) -> RawFace:
    w = await RawFace.connect(sock)
    w.express(marker(INSERT, "/ps/t"), lifetime=4000)
    return w


def _push_name(version: int, seg: int) -> list:
    return marker(DISTRIBUTE, "/ps/t") + [Component.from_version(version),
                                          Component.from_segment(seg)]


def _has_confirmation(pkts: list[bytes]) -> bool:
    return any(name_of(p) == "/%2Adistribute%2A/ps/t" for p in pkts if p[0] == 0x06)


async def _confirmed(worker: RawFace) -> bool:
    return _has_confirmation(await worker.recv_until(_has_confirmation, quiet=0.5))


async def _segments(worker: RawFace, version: int) -> list[bytes]:
    """Everything the worker receives until it has every segment of `version` (or 10 s)."""
    return await worker.recv_until(lambda pkts: _names(pkts) >= _expected(version))


def _push(ps: RawFace, version: int, n: int = SEGMENTS) -> None:
    for seg in range(n):
        ps.put(_push_name(version, seg), bytes([seg]) * 1000, freshness=10000, final=n - 1)


def _names(pkts: list[bytes]) -> set[str]:
    return {name_of(p) for p in pkts if p[0] == 0x06}


def _expected(version: int, n: int = SEGMENTS) -> set[str]:
    return {Name.to_str(_push_name(version, s)) for s in range(n)}


def _diff(after: dict, before: dict, key: str) -> int:
    return after["counters"][key] - before["counters"][key]


async def test_each_segment_crosses_each_link_once_and_reaches_every_worker(procs):
    socks = _tree(procs)
    ps = await RawFace.connect(socks["root"])
    assert await ps.register("/ps") == 200
    seen: list[str] = []
    ps_task = asyncio.create_task(_ps_answering_inserts(ps, seen))
    try:
        workers = {name: await _join(socks[leaf]) for name, leaf in
                   (("w1", "leaf1"), ("w2", "leaf1"), ("w3", "leaf2"), ("w4", "leaf2"))}
        bystander = await RawFace.connect(socks["leaf1"])   # never inserts
        confirmed = await asyncio.gather(*(_confirmed(w) for w in workers.values()))
        assert all(confirmed), "every worker gets the registration confirmation"
        for leaf in ("leaf1", "leaf2"):
            (entry,) = _status(socks[leaf])["ppit"]
            assert entry["prefix"] == "/ps/t" and len(entry["faces"]) == 2
        (root_entry,) = _status(socks["root"])["ppit"]
        assert len(root_entry["faces"]) == 2          # one per leaf link, not per worker

        before = {n: _status(s) for n, s in socks.items()}
        _push(ps, 1)
        got = await asyncio.gather(*(_segments(w, 1) for w in workers.values()))
        for name, pkts in zip(workers, got):
            assert _names(pkts) == _expected(1), f"{name} got every segment"
            assert len(pkts) == SEGMENTS, f"{name} got each segment exactly once"
        assert await bystander.recv_all(quiet=0.3) == []
        after = {n: _status(s) for n, s in socks.items()}

        # root -> each leaf: each segment once
        for face in _udp_face(after["root"]):
            prev = next(f for f in before["root"]["faces"] if f["id"] == face["id"])
            assert face["counters"]["out_distribute"] - prev["counters"]["out_distribute"] == SEGMENTS
        for leaf in ("leaf1", "leaf2"):
            assert _diff(after[leaf], before[leaf], "pushes_in") == SEGMENTS
            outs = sorted(c["out_distribute"] - _unix_faces(before[leaf]).get(fid, {}).get(
                "out_distribute", 0) for fid, c in _unix_faces(after[leaf]).items())
            expected = [0, 0, SEGMENTS, SEGMENTS] if leaf == "leaf1" else [0, SEGMENTS, SEGMENTS]
            assert outs == expected     # two workers, the status client, the bystander (leaf1)

        # a probe for a lost segment is answered by the leaf's CS: the PS sees no Interest
        seen.clear()
        root_before = _status(socks["root"])
        workers["w1"].express(_push_name(1, 7), lifetime=1000)
        (probe_answer,) = await workers["w1"].recv_until(bool)
        assert name_of(probe_answer) == Name.to_str(_push_name(1, 7))
        assert seen == []
        assert _diff(_status(socks["root"]), root_before, "in_interests") == 1  # the status query

        # a face that closed never receives pushes; the others keep getting them
        workers.pop("w2").close()
        await asyncio.sleep(0.3)
        (entry,) = _status(socks["leaf1"])["ppit"]
        assert len(entry["faces"]) == 1
        _push(ps, 2)
        got = await asyncio.gather(*(_segments(w, 2) for w in workers.values()))
        assert all(_names(p) == _expected(2) for p in got)

        # *remove* takes a worker out; like a multicast prune it travels upstream only when
        # its leaf has no other downstream left
        workers["w4"].express(marker(REMOVE, "/ps/t"), lifetime=500)
        await asyncio.sleep(0.5)
        assert not any(n.startswith("/%2Aremove%2A") for n in seen)
        _push(ps, 3)
        assert await workers["w4"].recv_all(quiet=0.7) == []
        assert _names(await _segments(workers["w3"], 3)) == _expected(3)
        workers["w3"].express(marker(REMOVE, "/ps/t"), lifetime=500)
        await asyncio.sleep(0.5)
        (root_entry,) = _status(socks["root"])["ppit"]
        assert len(root_entry["faces"]) == 1          # leaf2's link left; leaf1's stays
        assert not any(n.startswith("/%2Aremove%2A") for n in seen)
        workers["w1"].express(marker(REMOVE, "/ps/t"), lifetime=500)
        await asyncio.sleep(0.5)
        assert any(n.startswith("/%2Aremove%2A/ps/t") for n in seen)   # the last one out
        assert _status(socks["root"])["ppit"] == []
    finally:
        ps_task.cancel()


async def test_unrefreshed_entry_expires_and_pushes_stop(procs):
    socks = _tree(procs, ppit_lifetime=3.0)
    ps = await RawFace.connect(socks["root"])
    assert await ps.register("/ps") == 200
    ps_task = asyncio.create_task(_ps_answering_inserts(ps, []))
    try:
        stale = await _join(socks["leaf2"])
        fresh = await _join(socks["leaf1"])
        assert await _confirmed(stale) and await _confirmed(fresh)
        for _ in range(8):                       # only `fresh` refreshes its entry
            await asyncio.sleep(0.5)
            fresh.express(marker(INSERT, "/ps/t"), lifetime=1000)
        await fresh.recv_all(quiet=0.3)
        await stale.recv_all(quiet=0.3)       # confirmations of fresh's refreshes, while it lasted
        assert _status(socks["leaf2"])["ppit"] == []
        before = _status(socks["root"])
        _push(ps, 1)
        assert _names(await _segments(fresh, 1)) == _expected(1)
        assert await stale.recv_all(quiet=0.3) == []
        after = _status(socks["root"])
        leaf2_face = [f for f in after["faces"] if f["remote"].startswith("udp")]
        sent = {f["id"]: f["counters"]["out_distribute"] for f in leaf2_face}
        sent_before = {f["id"]: f["counters"]["out_distribute"] for f in before["faces"]}
        assert sorted(sent[i] - sent_before[i] for i in sent) == [0, SEGMENTS]
    finally:
        ps_task.cancel()


async def test_clients_unaware_of_persistent_entries_work_through_the_same_tree(procs):
    socks = _tree(procs)
    ps = await RawFace.connect(socks["root"])
    assert await ps.register("/ps") == 200
    ps_task = asyncio.create_task(_ps_answering_inserts(ps, []))
    try:
        worker = await _join(socks["leaf2"])
        assert await _confirmed(worker)
        producer = procs.spawn("producer", [sys.executable, "-c", PRODUCER, "/plain"],
                               env={"NDN_CLIENT_TRANSPORT": f"unix://{socks['root']}"})
        wait_until(lambda: "READY" in producer.tail(), 15, producer, "registered")
        consumer = procs.spawn("consumer", [sys.executable, "-c", CONSUMER, "/plain/x"],
                               env={"NDN_CLIENT_TRANSPORT": f"unix://{socks['leaf2']}"})
        assert consumer.wait(20) == 0
        assert "DATA /plain/x hello from /plain" in consumer.tail()
    finally:
        ps_task.cancel()
