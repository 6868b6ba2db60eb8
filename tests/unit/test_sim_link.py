"""A simulated link in virtual time: serialisation by size, propagation, MTU fragmentation and
reassembly, the real face's send queue and marking rule, seeded loss, per-direction counters."""
from __future__ import annotations

import asyncio

import pytest

from ndnps.forwarder.faces.queue import QueueOptions
from ndnps.ndn.congestion import congestion_mark
from ndnps.ndn.encoders import encode_data, encode_meta_info, encode_signature_info
from ndnps.sim.link import WIRE_OVERHEAD, Link, LinkSpec
from ndnps.sim.loop import VirtualLoop

pytestmark = pytest.mark.timeout(30)

MBIT = 1e6


def data(content: int, tag: bytes = b"a") -> bytes:
    return encode_data([b"\x08\x01" + tag], encode_meta_info(), b"x" * content,
                       encode_signature_info(0), lambda covered: b"\0" * 32)


@pytest.fixture
def loop():
    loop = VirtualLoop()
    yield loop
    loop.close()


def wire(loop, spec, spec_ba=None, seed=0):
    """A link whose b end records (time, packet) of what arrives."""
    got: list[tuple[float, bytes]] = []
    link = Link(loop, lambda p: got.append((loop.time(), p)), lambda p: None, spec, spec_ba,
                seed=seed)
    return link, got


def test_one_packet_takes_its_serialisation_time_plus_the_delay(loop):
    link, got = wire(loop, LinkSpec(rate_mbps=100, delay_ms=10))
    pkt = data(900)
    loop.call_at(1.0, link.ab.send, pkt)
    loop.run_until_complete(asyncio.sleep(2))
    (t, p), = got
    assert p == pkt
    assert t == pytest.approx(1.0 + (len(pkt) + WIRE_OVERHEAD) * 8 / (100 * MBIT) + 0.010)


def test_a_burst_leaves_back_to_back_at_the_link_rate(loop):
    link, got = wire(loop, LinkSpec(rate_mbps=10, delay_ms=5))
    pkts = [data(1000, bytes([65 + i])) for i in range(20)]
    for p in pkts:
        link.ab.send(p)
    loop.run_until_complete(asyncio.sleep(1))
    per = (len(pkts[0]) + WIRE_OVERHEAD) * 8 / (10 * MBIT)
    assert [p for _, p in got] == pkts                      # in order
    assert [t for t, _ in got] == pytest.approx([(i + 1) * per + 0.005 for i in range(20)])
    c = link.ab.counters
    assert (c.packets, c.bytes, c.frames, c.delivered) == (20, 20 * len(pkts[0]), 20, 20)
    assert c.wire_bytes == 20 * (len(pkts[0]) + WIRE_OVERHEAD)
    assert link.ba.counters.packets == 0                    # per direction


def test_a_packet_over_the_mtu_travels_as_fragments_and_arrives_whole(loop):
    link, got = wire(loop, LinkSpec(rate_mbps=100, delay_ms=1, mtu=1472))
    pkt = data(5000)
    link.ab.send(pkt)
    loop.run_until_complete(asyncio.sleep(1))
    (t, p), = got
    assert p == pkt
    c = link.ab.counters
    assert c.frames == 4 and link.ab.fragmentation.reassembled == 1
    assert t == pytest.approx(c.wire_bytes * 8 / (100 * MBIT) + 0.001)
    assert c.bytes == len(pkt) < c.wire_bytes - 4 * WIRE_OVERHEAD       # fragment headers


def test_unlimited_rate_is_the_delay_alone(loop):
    link, got = wire(loop, LinkSpec(delay_ms=2))
    for i in range(3):
        link.ab.send(data(100, bytes([65 + i])))
    loop.run_until_complete(asyncio.sleep(1))
    assert [t for t, _ in got] == [0.002] * 3


def test_a_full_queue_drops_whole_packets(loop):
    queue = QueueOptions(limit_bytes=10_000, marking=False)
    link, got = wire(loop, LinkSpec(rate_mbps=1, queue=queue))
    for i in range(30):
        link.ab.send(data(1000, bytes([65 + i])))
    loop.run_until_complete(asyncio.sleep(2))
    c = link.ab.counters
    # one on the wire, the queue holding what fits under its limit, the rest dropped
    assert c.queue_full == 30 - c.packets and 9 <= c.packets <= 11
    assert len(got) == c.packets


def test_a_standing_queue_marks_as_the_real_face_does(loop):
    # 2 Mbit/s offered to a 1 Mbit/s link: the queue's delay passes the 5 ms target and stays
    link, got = wire(loop, LinkSpec(rate_mbps=1, queue=QueueOptions(limit_bytes=1 << 22)))
    period = (1000 + 100) * 8 / (2 * MBIT)
    for i in range(400):
        loop.call_at(i * period, link.ab.send, data(1000, bytes([65 + i % 26])))
    loop.run_until_complete(asyncio.sleep(10))
    marks = [t for t, p in got if congestion_mark(p)]
    assert marks and link.ab.queue.counters.marked == len(marks)
    # the first after a whole interval above the target: not before 5 ms + 100 ms of waiting
    assert marks[0] > 0.105
    assert link.ab.queue.counters.max_delay > 0.02


def test_a_socket_buffer_before_the_wire_delays_the_face_queue_and_its_marks(loop):
    """The real face queues only once the kernel's buffer is full: with kernel_bytes the
    backlog fills it first, so the queue's delay (and the first mark) come that much later."""
    def first_mark(kernel):
        link, got = wire(loop, LinkSpec(rate_mbps=10, kernel_bytes=kernel,
                                        queue=QueueOptions(limit_bytes=1 << 22)))
        start = loop.time()
        marked_at = []

        def send(pkt):
            before = link.ab.queue.counters.marked
            link.ab.send(pkt)
            if link.ab.queue.counters.marked > before:
                marked_at.append(loop.time() - start)
        period = (1000 + 100) * 8 / (20 * MBIT)              # twice the link's rate
        for i in range(2000):
            loop.call_at(start + i * period, send, data(1000, bytes([65 + i % 26])))
        loop.run_until_complete(asyncio.sleep(3))
        return marked_at[0], link.ab

    plain, ab0 = first_mark(0)
    later, ab64 = first_mark(64 << 10)
    # the buffer fills at the excess rate (10 Mbit/s) before anything waits in the queue
    fill = (64 << 10) * 8 / (10 * MBIT)
    assert later - plain == pytest.approx(fill, abs=0.01)
    assert ab64.queue.counters.max_bytes < ab0.queue.counters.max_bytes


def test_loss_is_seeded_and_per_direction(loop):
    def run(seed):
        link, got = wire(loop, LinkSpec(loss=0.3), seed=seed)
        for i in range(200):
            link.ab.send(data(10, bytes([65 + i % 26])))
        loop.run_until_complete(asyncio.sleep(0.01))
        return link.ab.counters.lost, [p for _, p in got]

    a, b, c = run(1), run(1), run(2)
    assert a == b and a != c
    assert 30 < a[0] < 90 and len(a[1]) == 200 - a[0]


def test_a_closed_link_delivers_nothing_more(loop):
    link, got = wire(loop, LinkSpec(rate_mbps=1, delay_ms=10))
    for i in range(5):
        link.ab.send(data(1000, bytes([65 + i])))
    loop.run_until_complete(asyncio.sleep(0.02))
    link.close()
    link.ab.send(data(10))
    loop.run_until_complete(asyncio.sleep(1))
    assert 0 < len(got) < 5


def test_specs_are_checked():
    for bad in (LinkSpec(loss=2), LinkSpec(rate_mbps=-1), LinkSpec(mtu=10)):
        with pytest.raises(ValueError):
            bad.validate()
