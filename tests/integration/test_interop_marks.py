"""NDNLPv2 CongestionMark through a real forwarder process to clients no one here wrote
(docs/congestion.md): python-ndn's plain NDNApp and NDNts take a marked Data and a marked Nack as
they would take unmarked ones.

No congested face is needed: the producer (a raw client) sends its Data and Nacks already
marked, as a congested link would deliver them, and the forwarder carries the mark on to the
consumer.  A raw consumer checks that the mark does reach it; python-ndn and NDNts must then
print what they print for an unmarked exchange (tests/integration/test_ndnts.py)."""
from __future__ import annotations

import asyncio
import sys
import textwrap

import pytest
from ndn.encoding import Name
from ndn.encoding.ndnlp_v2 import parse_lp_packet_v2

from ndnps.forwarder.status import fetch_status
from ndnps.lab.demo import CONSUMER as PY_CONSUMER
from ndnps.lab.process import wait_until
from ndnps.ndn.congestion import congestion_mark
from ndnps.ndn.packet import NACK_CONGESTION
from ndnps.ndn.tlv import LP_PACKET

from test_ndnts import ndnts  # noqa: F401  (the fixture that installs the pinned NDNts)
from tests.support.rawclient import RawFace, name_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

# Answers each Interest under its prefix with a marked Data ("marked <name>"), or, for a name
# ending in "nack", with a marked Nack~Congestion; the marks are set as a congested face sets
# them (ndnps.ndn.congestion).
MARKED_PRODUCER = textwrap.dedent('''
    import asyncio, sys
    from ndn.encoding import MetaInfo, Name, make_data, parse_interest
    from ndn.security import DigestSha256Signer
    from ndnps.ndn.congestion import set_congestion_mark
    from ndnps.ndn.packet import NACK_CONGESTION, lp_wrap
    from tests.support.rawclient import RawFace

    async def main():
        face = await RawFace.connect(sys.argv[1])
        assert await face.register(sys.argv[2]) == 200
        print("READY", flush=True)
        while True:
            wire = await face.recv(timeout=120)
            if wire[0] != 0x05:
                continue
            name = parse_interest(wire)[0]
            if bytes(name[-1]).endswith(b"nack"):
                face.send(set_congestion_mark(lp_wrap(wire, None, NACK_CONGESTION)))
            else:
                data = make_data(name, MetaInfo(), b"marked " + Name.to_str(name).encode(),
                                 signer=DigestSha256Signer())
                face.send(set_congestion_mark(bytes(data)))
    asyncio.run(main())
''')


def _producer(procs, sock: str, prefix: str):
    proc = procs.spawn("producer", [sys.executable, "-c", MARKED_PRODUCER, sock, prefix])
    wait_until(lambda: "READY" in proc.tail(), 20, proc, "registered")
    return proc


def _py_consumer(procs, sock: str, name: str) -> str:
    proc = procs.spawn(f"py-{name.rsplit('/', 1)[-1]}", [sys.executable, "-c", PY_CONSUMER, name],
                       env={"NDN_CLIENT_TRANSPORT": f"unix://{sock}"})
    proc.wait(30)
    return proc.tail()


async def _raw_exchange(sock: str, name: str) -> bytes:
    face = await RawFace.connect(sock)
    try:
        face.express(Name.from_str(name), lifetime=3000)
        return await face.recv(timeout=10)
    finally:
        face.close()


def _no_drops_on_consumer_faces(sock: str) -> None:
    for face in fetch_status(f"unix://{sock}")["faces"]:
        drops = set(face["counters"]["drops"])
        assert not {"malformed", "lp_idle", "lp_fragment", "unsolicited_data"} & drops, face


def test_the_mark_reaches_the_consumer(procs):
    sock = procs.forwarder()
    _producer(procs, sock, "/marked")
    data = asyncio.run(_raw_exchange(sock, "/marked/raw"))
    lpv = parse_lp_packet_v2(data)
    assert data[0] == LP_PACKET and congestion_mark(data) == lpv.congestion_mark == 1
    assert name_of(bytes(lpv.fragment)) == "/marked/raw"
    nack = asyncio.run(_raw_exchange(sock, "/marked/raw-nack"))
    lpv = parse_lp_packet_v2(nack)
    assert (congestion_mark(nack), lpv.nack.nack_reason) == (1, NACK_CONGESTION)


def test_python_ndn_takes_a_marked_data_and_nack_as_unmarked(procs):
    sock = procs.forwarder()
    _producer(procs, sock, "/marked")
    assert "DATA /marked/py marked /marked/py" in _py_consumer(procs, sock, "/marked/py")
    assert f"NACK {NACK_CONGESTION}" in _py_consumer(procs, sock, "/marked/py-nack")
    _no_drops_on_consumer_faces(sock)


@pytest.mark.interop
def test_ndnts_takes_a_marked_data_and_nack_as_unmarked(procs, ndnts):  # noqa: F811
    """NDNts sends PIT tokens, so what reaches it is [PitToken, (Nack,) CongestionMark,
    Fragment]; with strict token matching (common.mjs), a Data it could not read is dropped."""
    sock = procs.forwarder()
    _producer(procs, sock, "/marked")
    consumer = ndnts.spawn(procs, "ndnts-data", "consumer.mjs", "/marked/ts", sock=sock)
    consumer.wait(30)
    assert "DATA /8=marked/8=ts marked /marked/ts" in consumer.tail()
    consumer = ndnts.spawn(procs, "ndnts-nack", "consumer.mjs", "/marked/ts-nack", sock=sock)
    consumer.wait(30)
    assert f"NACK {NACK_CONGESTION}" in consumer.tail()
    _no_drops_on_consumer_faces(sock)
