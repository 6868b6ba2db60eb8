"""A UDP face's send queue (ndnps/forwarder/faces/queue.py) on a fake clock: bounded in octets, and
NFD's congestion marking on the queue's delay with CoDel's control law; then the queue under a
UDP channel whose fake socket pushes back as a kernel does."""
from __future__ import annotations

import math

import pytest

from ndnps.forwarder.config import Config
from ndnps.forwarder.daemon import ForwarderDaemon
from ndnps.forwarder.face_table import SendQueueCounters
from ndnps.forwarder.faces.queue import QueueOptions, SendQueue
from ndnps.forwarder.faces.udp import UdpChannel
from ndnps.forwarder.mgmt import status_snapshot
from ndnps.ndn.congestion import congestion_mark
from ndnps.ndn.fragmentation import Reassembler
from tests.support.fwkit import FakeDatagramPort, data, lp

pytestmark = pytest.mark.timeout(30)

TARGET, INTERVAL = 0.005, 0.1


def queue(**kw) -> SendQueue:
    """CoDel's law alone (no step), unless a test sets one."""
    return SendQueue(QueueOptions(**{"target": TARGET, "interval": INTERVAL, "step": 0.0, **kw}))


def test_no_mark_while_the_delay_stays_at_or_below_target():
    q = queue()
    q.push(b"x" * 100, 0.0)
    for ms in range(0, 1000):                       # a second of queue at exactly the target
        now = ms / 1000
        q.pop(now)
        q.push(b"x" * 100, now - TARGET)            # the next waited exactly `target`
        assert not q.should_mark(now)
    assert q.counters.marked == 0


def test_a_mark_after_one_interval_above_target_then_at_interval_over_sqrt_k():
    q = queue()
    q.push(b"x" * 1000, 0.0)                        # never leaves: the delay only grows
    marks = []
    t = 0.006                                       # first seen above target at 6 ms
    while t < 1.0:
        if q.should_mark(t):
            marks.append(t)
        t = round(t + 0.0001, 4)
    assert marks[0] == pytest.approx(0.006 + INTERVAL, abs=0.00011)
    gaps = [b - a for a, b in zip(marks, marks[1:])]
    # the k-th mark is followed by the next interval/sqrt(k) later (to the 0.1 ms step)
    for k, gap in enumerate(gaps, start=1):
        assert gap == pytest.approx(INTERVAL / math.sqrt(k), abs=0.00011)
    assert q.counters.marked == len(marks) > 10


def test_the_episode_ends_below_target_or_when_the_queue_empties():
    q = queue()
    q.push(b"a" * 10, 0.0)
    assert not q.should_mark(0.01) and q.should_mark(0.11)      # marking
    q.pop(0.12)                                                 # empty: over
    q.push(b"b" * 10, 0.12)
    assert not q.should_mark(0.13)                              # a new episode's grace
    assert not q.should_mark(0.2) and q.should_mark(0.23)
    q.push(b"c" * 10, 0.236)
    q.pop(0.24)                                                 # c heads, 4 ms old
    assert not q.should_mark(0.24)                              # below target: over
    assert not q.should_mark(0.25)                              # above again: a new grace
    assert not q.should_mark(0.349) and q.should_mark(0.35)


def test_marking_off_never_marks():
    q = queue(marking=False)
    q.push(b"x", 0.0)
    assert not any(q.should_mark(t / 10) for t in range(1, 50))


def test_admission_at_the_byte_bound_and_the_counters():
    q = queue(limit_bytes=20_000)
    for i in range(4):
        assert q.admits(5000)
        q.push(b"x" * 5000, i * 0.01)
    assert not q.admits(1) and q.bytes == 20_000 and len(q) == 4
    assert q.pop(0.05) == b"x" * 5000 and q.admits(5000)
    c = q.counters
    assert (c.max_bytes, c.max_delay) == (20_000, pytest.approx(0.05))
    q.clear()
    assert (q.bytes, len(q), q.delay(1.0)) == (0, 0, 0.0)


@pytest.mark.parametrize("kw, key", [({"limit_bytes": 100}, "limit_bytes"),
                                     ({"target": 0}, "target"),
                                     ({"interval": float("nan")}, "interval")])
def test_bad_options_are_refused(kw, key):
    with pytest.raises(ValueError, match=key):
        SendQueue(QueueOptions(**kw), SendQueueCounters())


# ---- under a channel whose socket pushes back ------------------------------------------------

class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def channel(room: int, **queue_kw):
    daemon = ForwarderDaemon(Config())
    clock = Clock()
    ch = UdpChannel(daemon, clock=clock, queue=QueueOptions(**{"step": 0.0, **queue_kw}))
    transport = FakeDatagramPort(("10.0.0.2", 6363), room=room).start(ch)
    return ch, transport, clock, daemon


PEER_A, PEER_B = ("10.0.0.1", 6363), ("10.0.0.3", 6363)


def test_the_backlog_waits_in_the_face_queues_and_leaves_in_turn():
    ch, transport, clock, _ = channel(room=2)
    a, b = ch.open_face(*PEER_A), ch.open_face(*PEER_B)
    small = [data(f"/s/{i}", content=b"s" * 100) for i in range(6)]
    for wire in small[:4]:
        a.send(wire)                    # 2 taken, 1 held (paused), 1 queued
    for wire in small[4:]:
        b.send(wire)
    assert ch.paused and len(transport.wire) == 2 and len(a.queue) == 1 and len(b.queue) == 2
    clock.now += 0.002
    transport.kernel_sent(10)
    assert not ch.paused and len(a.queue) == len(b.queue) == 0
    # the one the transport held first, then the queues
    assert [addr for _, addr in transport.wire] == [PEER_A] * 4 + [PEER_B] * 2
    assert a.info.send_queue.max_delay == pytest.approx(0.002)


def test_faces_with_a_backlog_are_served_one_datagram_each_in_turn():
    ch, transport, clock, _ = channel(room=0)
    a, b = ch.open_face(*PEER_A), ch.open_face(*PEER_B)
    a.send(data("/a/0"))                # held by the transport: paused
    for i in range(1, 4):
        a.send(data(f"/a/{i}"))
        b.send(data(f"/b/{i}"))
    transport.kernel_sent(100)
    order = [addr for _, addr in transport.wire]
    assert order == [PEER_A, PEER_A, PEER_B, PEER_A, PEER_B, PEER_A, PEER_B]


def test_packets_entering_a_congested_queue_leave_marked_and_whole_in_their_first_fragment():
    ch, transport, clock, _ = channel(room=0)
    face = ch.open_face(*PEER_A)                    # non-loopback: 1472-octet datagrams
    big = data("/big", content=b"b" * 8000)
    marked_at = []
    for step in range(60):                          # 1 ms apart: the queue's delay grows
        before = len(face.queue)
        face.send(big)
        frames = face.queue._items
        first = frames[before][0] if step else None
        if first is not None and congestion_mark(first):
            marked_at.append(step)
        clock.now += 0.001
    # above the 5 ms target from 6 ms on; one interval (100 ms) later nothing is marked yet
    assert marked_at == [] and face.info.send_queue.marked == 0
    clock.now += 0.1
    face.send(big)
    head = face.queue._items[-6][0]                 # the first of its 6 fragments
    assert congestion_mark(head) == 1 and face.info.send_queue.marked == 1
    assert all(len(w) <= 1472 for w, _ in face.queue._items)
    # the peer reassembles it whole, the mark in the packet's own headers
    r = Reassembler()
    whole = [r.receive(w, 0.0) for w, _ in list(face.queue._items)[-6:]][-1]
    assert congestion_mark(whole) == 1 and whole.endswith(big)


def test_a_full_queue_drops_whole_packets_and_counts_them():
    ch, transport, clock, daemon = channel(room=0, limit_bytes=20_000)
    face = ch.open_face(*PEER_A)
    big = data("/big", content=b"b" * 8000)           # 6 fragments
    for _ in range(5):
        face.send(big)
    # the first's first fragment is held by the transport, its 5 others wait; one more packet
    # fits under 20,000 octets; the other three are dropped whole, before fragmenting
    assert len(face.queue) == 5 + 6 and face.info.counters.drops["queue_full"] == 3
    snapshot = status_snapshot(daemon.fw)
    [info] = [f for f in snapshot["faces"] if f["id"] == face.info.id]
    assert info["mtu"] == 1472 and info["send_queue"]["max_bytes"] == face.queue.bytes
    assert info["lp_fragmentation"]["fragmented"] == 2


def test_a_marked_packet_keeps_its_other_headers_in_order():
    ch, transport, clock, _ = channel(room=0)
    face = ch.open_face(*PEER_A)
    face.send(data("/first"))                         # held: paused
    face.send(data("/q"))
    clock.now += 0.2                                  # queue delay 200 ms: episode starts
    face.send(data("/q"))
    clock.now += 0.2
    tokened = lp(data("/t", content=b"t" * 3000), token=b"\x01\x02\x03\x04")
    face.send(tokened)
    first = face.queue._items[2][0]
    assert congestion_mark(first) == 1
    r = Reassembler()
    out = [r.receive(w, 0.0) for w, _ in list(face.queue._items)[2:]]
    whole = out[-1]
    assert whole is not None and congestion_mark(whole) == 1
    from ndnps.ndn.packet import decode
    assert decode(whole).pit_token == b"\x01\x02\x03\x04"


def test_past_the_step_every_packet_is_marked_at_once():
    q = SendQueue(QueueOptions(target=0.005, interval=0.1, step=0.02))
    q.push(b"x" * 1000, 0.0)
    assert not q.should_mark(0.010)             # above target: CoDel's grace interval first
    assert q.should_mark(0.021) and q.should_mark(0.022) and q.should_mark(0.023)
    q.pop(0.03)                                 # empty: the episode is over
    q.push(b"x" * 1000, 0.03)
    assert not q.should_mark(0.031)
    assert SendQueue(QueueOptions(step=0.0)).options.step == 0.0
    with pytest.raises(ValueError):
        QueueOptions(target=0.005, step=0.001).validate()
