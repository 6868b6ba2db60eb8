"""Bad input against a real forwarder process: it drops and counts, closes a stream face only
when framing is lost (oversize) and a UDP face when its first datagram is garbage, keeps the
on-demand UDP faces under their cap, and keeps serving everyone else."""
from __future__ import annotations

import asyncio
import os
import random
import socket

import pytest
from ndn.encoding import InterestParam, Name, make_interest

from ndnps.forwarder.status import fetch_status
from ndnps.lab.process import free_port

from tests.support.rawclient import RawFace, name_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


async def _serving(sock: str) -> None:
    """A producer and a consumer on fresh faces still exchange through the forwarder."""
    producer = await RawFace.connect(sock)
    assert await producer.register("/alive") == 200
    consumer = await RawFace.connect(sock)
    name = f"/alive/{os.urandom(4).hex()}"
    consumer.express(Name.from_str(name))
    interest = await producer.recv()
    producer.put(Name.from_str(name_of(interest)), b"ok")
    assert name_of(await consumer.recv()) == name
    producer.close()
    consumer.close()


def _drops(status: dict) -> dict[str, int]:
    total: dict[str, int] = {}
    for face in status["faces"]:
        for reason, n in face["counters"]["drops"].items():
            total[reason] = total.get(reason, 0) + n
    return total


async def test_malformed_stream_input_is_dropped_and_counted(procs):
    sock = procs.forwarder()
    bad = await RawFace.connect(sock)
    # wrong inner TLV-LENGTH: the Name claims more bytes than the Interest holds
    bad.send(b"\x05\x06\x07\x10\x08\x02ab")
    # a Data whose Name component overruns the Name
    bad.send(b"\x06\x08\x07\x06\x08\x09abcd")
    # unknown top-level type
    bad.send(b"\x99\x03abc")
    # LpPacket without a fragment (IDLE), and one with a bad header field
    bad.send(b"\x64\x00")
    bad.send(b"\x64\x05\x63\x01\x00\x50\x00")
    await asyncio.sleep(0.3)
    await _serving(sock)
    drops = _drops(fetch_status(f"unix://{sock}"))
    assert drops.get("malformed", 0) >= 4 and drops.get("lp_idle", 0) == 1
    # the bad face is still open: a good Interest on it is forwarded (Nack NoRoute comes back)
    bad.express(Name.from_str("/nobody"))
    reply = await bad.recv()
    assert reply[0] == 0x64       # LpPacket carrying the Nack


async def test_oversize_packet_closes_only_that_stream_face(procs):
    sock = procs.forwarder()
    bad = await RawFace.connect(sock)
    bad.send(b"\x06\xfd\x27\x10" + b"\x00" * 100)   # claims 10000 bytes > 8800
    with pytest.raises((asyncio.IncompleteReadError, ConnectionError)):
        await bad.recv(timeout=2)                   # the forwarder closed the face
    await _serving(sock)


async def test_truncated_packet_then_close_and_random_bytes(procs):
    sock = procs.forwarder()
    rng = random.Random(7)
    for _ in range(30):
        junk = await RawFace.connect(sock)
        junk.send(bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 3000))))
        junk.send(make_interest(Name.from_str("/x"), InterestParam())[:7])  # truncated
        junk.close()
    await asyncio.sleep(0.3)
    await _serving(sock)


async def test_udp_garbage_and_oversize_datagrams(procs):
    port = free_port()
    sock = procs.forwarder(udp=port)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rng = random.Random(3)
    try:
        # a good packet first: the face is up, and what follows is dropped on it, not closing it
        udp.sendto(bytes(make_interest(Name.from_str("/x"), InterestParam())), ("127.0.0.1", port))
        for _ in range(200):
            udp.sendto(_garbage(rng), ("127.0.0.1", port))
        udp.sendto(b"\x06\xfd\x23\x28" + b"\x00" * 9000, ("127.0.0.1", port))
        udp.sendto(bytes(make_interest(Name.from_str("/x"), InterestParam()))[:-3],
                   ("127.0.0.1", port))
    finally:
        udp.close()
    await asyncio.sleep(0.5)
    await _serving(sock)
    status = fetch_status(f"unix://{sock}")
    drops = _drops(status)
    assert drops.get("oversize", 0) == 1
    assert drops.get("malformed", 0) >= 150
    assert len(_on_demand_udp_faces(status)) == 1
    assert status["counters"]["udp_faces_rejected"] == 0


def _garbage(rng: random.Random) -> bytes:
    return bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 1500)))


def _on_demand_udp_faces(status: dict) -> list[dict]:
    return [f for f in status["faces"] if f["remote"].startswith("udp") and f["persistency"] == 1]


def _udp_faces_handled(status: dict) -> int:
    """Datagrams from new ports the forwarder has handled: faces open, evicted or rejected."""
    c = status["counters"]
    return (len(_on_demand_udp_faces(status)) + c.get("udp_faces_evicted", 0)
            + c.get("udp_faces_rejected", 0))


async def _send_from_new_ports(sock: str, port: int, packets: list[bytes]) -> list[socket.socket]:
    """Each packet from a socket of its own (kept open: the source ports stay distinct), in
    bursts of 50, each handled before the next (no burst overflows the forwarder's socket)."""
    senders: list[socket.socket] = []
    try:
        for i, packet in enumerate(packets):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            senders.append(s)
            s.bind(("127.0.0.1", 0))
            s.sendto(packet, ("127.0.0.1", port))
            if i % 50 == 49 or i == len(packets) - 1:
                await _status_until(sock, lambda st: _udp_faces_handled(st) >= i + 1)
    except BaseException:
        for s in senders:
            s.close()
        raise
    return senders


async def _status_until(sock: str, done, timeout: float = 15.0) -> dict:
    """The forwarder's status once `done(status)` holds, or the last one after `timeout`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        status = fetch_status(f"unix://{sock}")
        if done(status) or loop.time() > deadline:
            return status
        await asyncio.sleep(0.05)


async def test_udp_garbage_from_many_ports_holds_no_face(procs):
    """A face whose first datagram is malformed closes at once: 300 ports of garbage leave no
    face behind (before: 300 faces for 10 minutes), and the forwarder still serves."""
    port = free_port()
    sock = procs.forwarder(udp=port)
    rng = random.Random(11)
    senders = await _send_from_new_ports(sock, port, [_garbage(rng) for _ in range(300)])
    try:
        status = fetch_status(f"unix://{sock}")
        assert _on_demand_udp_faces(status) == []
        assert status["counters"]["udp_faces_rejected"] == 300
        assert status["counters"]["udp_faces_evicted"] == 0
    finally:
        for s in senders:
            s.close()
    await _serving(sock)


async def test_udp_on_demand_faces_are_capped_and_udp_still_serves(procs):
    """Good packets from 100 ports under `[udp] max_on_demand_faces = 16`: 16 faces stay, the
    least recently seen evicted; a consumer on a new UDP port still gets its Data."""
    config = procs.workdir / "fwd.toml"
    config.write_text("[udp]\nmax_on_demand_faces = 16\n")
    port = free_port()
    sock = procs.forwarder(udp=port, config=config)
    interests = [bytes(make_interest(Name.from_str(f"/nobody/{i}"), InterestParam(nonce=i + 1)))
                 for i in range(100)]
    senders = await _send_from_new_ports(sock, port, interests)
    producer = await RawFace.connect(sock)
    consumer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        status = fetch_status(f"unix://{sock}")
        assert len(_on_demand_udp_faces(status)) == 16
        assert status["counters"]["udp_faces_evicted"] == 84
        kept = sorted(int(f["remote"].rsplit(":", 1)[1]) for f in _on_demand_udp_faces(status))
        assert kept == sorted(s.getsockname()[1] for s in senders[-16:])   # the newest 16

        assert await producer.register("/alive") == 200
        consumer.bind(("127.0.0.1", 0))
        consumer.settimeout(5)
        name = f"/alive/{os.urandom(4).hex()}"
        consumer.sendto(bytes(make_interest(Name.from_str(name), InterestParam(nonce=1))),
                        ("127.0.0.1", port))
        interest = await producer.recv()
        producer.put(Name.from_str(name_of(interest)), b"ok")
        reply, _ = await asyncio.get_running_loop().run_in_executor(None, consumer.recvfrom, 9000)
        assert name_of(reply) == name
    finally:
        consumer.close()
        producer.close()
        for s in senders:
            s.close()


async def test_interest_flood_does_not_starve_other_faces(procs):
    sock = procs.forwarder()
    sink = await RawFace.connect(sock)
    assert await sink.register("/flood") == 200          # a producer that never answers
    flooder = await RawFace.connect(sock)

    serving_done = asyncio.Event()
    sent_while_serving = 0

    async def flood():
        nonlocal sent_while_serving
        for i in range(200_000):                 # bounded, but outlasts the exchange below
            flooder.send(make_interest(Name.from_str(f"/flood/{i}"),
                                       InterestParam(lifetime=4000, nonce=i + 1)))
            if i % 200 == 0:
                await flooder.writer.drain()
                await asyncio.sleep(0)           # let this test's own exchange run too
                if serving_done.is_set():
                    return
                sent_while_serving = i

    flooding = asyncio.create_task(flood())
    await asyncio.sleep(0.2)
    await _serving(sock)                    # served while the flood is under way
    serving_done.set()
    await flooding
    assert sent_while_serving > 1000
    status = fetch_status(f"unix://{sock}")
    assert 0 < status["tables"]["pit"] <= 65536
