"""Bad input against a real forwarder process: it drops and counts, closes a stream face only
when framing is lost (oversize), and keeps serving everyone else."""
from __future__ import annotations

import asyncio
import os
import random
import socket

import pytest
from ndn.encoding import InterestParam, Name, make_interest

from forwarder.status import fetch_status
from ndnps.process import free_port

from rawclient import RawFace, name_of

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
        for _ in range(200):
            udp.sendto(bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 1500))),
                       ("127.0.0.1", port))
        udp.sendto(b"\x06\xfd\x23\x28" + b"\x00" * 9000, ("127.0.0.1", port))
        udp.sendto(bytes(make_interest(Name.from_str("/x"), InterestParam()))[:-3],
                   ("127.0.0.1", port))
    finally:
        udp.close()
    await asyncio.sleep(0.5)
    await _serving(sock)
    drops = _drops(fetch_status(f"unix://{sock}"))
    assert drops.get("oversize", 0) == 1
    assert drops.get("malformed", 0) >= 150


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
