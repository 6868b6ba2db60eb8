"""A stream face's send queue and congestion marks (ndnps/forwarder/faces/stream.py) on a fake
clock, a fake kernel send queue and a fake transport that pushes back as asyncio's and uvloop's do:
NFD's rule on the octets waiting in the kernel, CoDel's on the time a packet waited in the face's
own queue (judged as it leaves), the one MarkingRule both face kinds use (ndnps.ndn.congestion)."""
from __future__ import annotations

import asyncio
import functools
import math

import pytest

from ndnps.forwarder.face_table import FaceInfo
from ndnps.forwarder.faces import stream
from ndnps.forwarder.faces.queue import QueueOptions
from ndnps.forwarder.faces.stream import DRAIN_BYTES, KERNEL_THRESHOLD, StreamFace
from ndnps.ndn.congestion import MarkingRule, congestion_mark
from ndnps.ndn.packet import lp_wrap
from tests.support.fwkit import data

pytestmark = pytest.mark.timeout(30)

INTERVAL, TARGET, STEP = 0.1, 0.005, 0.02


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Owner:
    def face_up(self, face, local, remote_uri, local_uri, persistency) -> FaceInfo:
        return FaceInfo(300, local, remote_uri, local_uri, persistency)

    def receive_batch(self, face, wires) -> None:
        pass

    def face_down(self, face) -> None:
        pass


class Transport:
    """Records each write; `refuse` makes the next write leave its last packet unwritten (the
    kernel took the rest), which pauses the protocol as asyncio's transports do at a
    write-buffer limit of 0; `drained()` is the kernel taking it, which resumes it."""

    def __init__(self) -> None:
        self.writes: list[list[bytes]] = []
        self.protocol: StreamFace | None = None
        self.refuse = False
        self.buffered = 0
        self.high: int | None = None
        self.closed = False

    def get_extra_info(self, key):
        return {"sockname": "/x", "socket": type("S", (), {"fileno": lambda s: 7})()}.get(key)

    def set_write_buffer_limits(self, high=None, low=None) -> None:
        self.high = high

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def writelines(self, wires) -> None:
        self.writes.append(list(wires))
        if self.refuse:
            self.buffered = len(self.writes[-1][-1])
            assert self.protocol is not None
            self.protocol.pause_writing()

    def drained(self) -> None:
        self.buffered = 0
        assert self.protocol is not None
        self.protocol.resume_writing()

    def close(self) -> None:
        self.closed = True

    def sent(self) -> list[bytes]:
        return [w for batch in self.writes for w in batch]


@pytest.fixture
def kernel(monkeypatch) -> dict[int, int]:
    """The fake kernel send queue of fd 7, in octets."""
    queues = {7: 0}
    monkeypatch.setattr(stream, "kernel_send_queue", lambda fd: queues[fd])
    return queues


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield loop
    loop.close()


def face(clock: Clock, step: float = STEP, marking: bool = True,
         limit: int = 1 << 20) -> tuple[StreamFace, Transport]:
    f = StreamFace(Owner(), "unix", clock=clock,
                   queue=QueueOptions(limit_bytes=limit, target=TARGET, interval=INTERVAL,
                                      step=step, marking=marking))
    tr = Transport()
    tr.protocol = f
    f.connection_made(tr)        # type: ignore[arg-type]
    return f, tr


@functools.lru_cache(maxsize=None)
def segment(i: int) -> bytes:
    return data(f"/file/seg{i}", content=b"x" * 8000)


def test_the_transport_pushes_back_at_once_into_the_faces_queue(loop, kernel):
    f, tr = face(Clock())
    assert tr.high == 0
    assert f.info.send_queue is f.queue.counters         # in the status, as a UDP face's


# ---- NFD's rule: the octets waiting in the kernel --------------------------------------------

def test_no_mark_while_the_kernel_holds_at_most_the_threshold(loop, kernel):
    clock = Clock()
    f, tr = face(clock)
    kernel[7] = KERNEL_THRESHOLD                           # at, not above
    for ms in range(1000):
        clock.now = ms / 1000
        f.send(segment(ms))
        f.flush()
    assert not any(congestion_mark(w) for w in tr.sent())
    assert f.queue.counters.marked == 0


def test_marks_after_an_interval_above_the_threshold_then_at_interval_over_sqrt_k(loop, kernel):
    clock = Clock()
    f, tr = face(clock)
    kernel[7] = KERNEL_THRESHOLD + 1
    marks = []
    for tenth_ms in range(60, 10_000):                    # a flush every 0.1 ms from 6 ms
        clock.now = tenth_ms / 10_000
        f.send_many([segment(1), segment(2)])
        f.flush()
        first, last = tr.writes[-1]
        assert not congestion_mark(first)                   # the batch's last packet carries it
        if congestion_mark(last):
            marks.append(clock.now)
    assert marks[0] == pytest.approx(0.006 + INTERVAL, abs=1.1e-4)
    for k, (a, b) in enumerate(zip(marks, marks[1:]), start=1):
        assert b - a == pytest.approx(INTERVAL / math.sqrt(k), abs=1.1e-4)
    assert f.queue.counters.marked == len(marks) > 10


def test_the_transports_buffer_counts_with_the_kernels(loop, kernel):
    clock = Clock()
    f, tr = face(clock)
    kernel[7] = KERNEL_THRESHOLD // 2
    tr.buffered = KERNEL_THRESHOLD // 2 + 1
    for ms in (0, 50, 100, 101):
        clock.now = ms / 1000
        f.send(segment(ms))
        f.flush()
    assert [bool(congestion_mark(w)) for w in tr.sent()] == [False, False, True, False]


def test_the_episode_ends_when_the_kernel_queue_falls_back(loop, kernel):
    clock = Clock()
    f, tr = face(clock)

    def at(ms: int, octets: int) -> bool:
        clock.now, kernel[7] = ms / 1000, octets
        f.send(segment(ms))
        f.flush()
        return bool(congestion_mark(tr.sent()[-1]))
    above, below = KERNEL_THRESHOLD + 1, 1000
    assert not at(0, above) and at(100, above)
    assert not at(120, below)                               # the episode is over
    assert not at(130, above) and not at(229, above) and at(230, above)   # a whole interval


def test_marking_off_never_marks(loop, kernel):
    clock = Clock()
    f, tr = face(clock, marking=False)
    kernel[7] = 10 * KERNEL_THRESHOLD
    for ms in range(0, 1000, 5):
        clock.now = ms / 1000
        f.send(segment(ms))
        f.flush()
    assert not any(congestion_mark(w) for w in tr.sent())


def test_a_mark_keeps_the_packets_other_fields(loop, kernel):
    clock = Clock()
    f, tr = face(clock)
    kernel[7] = 2 * KERNEL_THRESHOLD
    f.send(segment(0))
    f.flush()
    clock.now = 0.2
    tokened = lp_wrap(segment(1), b"\x01\x02\x03", None)
    f.send(tokened)
    f.flush()
    from ndn.encoding.ndnlp_v2 import parse_lp_packet_v2
    lpv = parse_lp_packet_v2(tr.sent()[-1])
    assert lpv.congestion_mark == 1 and bytes(lpv.pit_token) == b"\x01\x02\x03"
    assert bytes(lpv.fragment) == segment(1)


# ---- the face's own queue: pushed back, judged as packets leave ------------------------------

def test_pushed_back_packets_wait_in_the_queue_and_leave_in_order(loop, kernel):
    clock = Clock()
    f, tr = face(clock, step=0.0)
    tr.refuse = True
    f.send_many([segment(0), segment(1)])
    f.flush()                                               # the kernel left seg1 unwritten
    tr.refuse = False
    f.send_many([segment(i) for i in range(2, 30)])         # now they wait in the queue
    f.send(segment(30))
    f.flush()
    assert len(tr.writes) == 1 and len(f.queue) == 29
    clock.now = 0.001
    tr.drained()
    sent = tr.sent()
    assert sent == [segment(i) for i in range(31)]          # in order, nothing marked yet
    # drained DRAIN_BYTES at a time
    assert all(sum(map(len, batch)) < DRAIN_BYTES + len(segment(0)) for batch in tr.writes[1:])
    assert len(tr.writes) > 2 and not f._paused and not f.queue


def test_a_packet_that_waited_past_target_for_an_interval_is_marked_as_it_leaves(loop, kernel):
    clock = Clock()
    f, tr = face(clock, step=0.0)
    tr.refuse = True                    # the kernel takes one write at a time from now on
    f.send(segment(0))
    f.flush()
    f.send_many([segment(i) for i in range(1, 60)])         # waiting from 0

    def take(ms: float) -> list[bool]:
        """The kernel takes one write at `ms`: the marks of the packets in it."""
        clock.now = ms / 1000
        before = len(tr.writes)
        tr.drained()
        assert len(tr.writes) == before + 1
        return [bool(congestion_mark(w)) for w in tr.writes[-1]]
    assert not any(take(4))                                 # the head waited 4 ms: at target
    assert not any(take(10))                                # 10 ms: above, the grace begins
    assert not any(take(109))
    marks = take(110)                                       # above for a whole interval
    assert marks[0] and not any(marks[1:])                  # the head, as it leaves
    assert not any(take(209)) and take(211)[0]              # then interval / sqrt(1) later
    assert f.queue.counters.marked == 2
    assert f.queue.counters.max_delay == pytest.approx(0.211)


def test_past_the_step_every_packet_leaving_is_marked(loop, kernel):
    clock = Clock()
    f, tr = face(clock, step=STEP)
    tr.refuse = True
    f.send(segment(0))
    f.flush()
    tr.refuse = False
    f.send_many([segment(i) for i in range(1, 4)])          # waiting from 0
    clock.now = 0.010
    f.send_many([segment(i) for i in range(4, 6)])          # waiting from 10 ms
    clock.now = 0.025
    tr.drained()
    marks = [bool(congestion_mark(w)) for w in tr.sent()[1:]]
    assert marks == [True, True, True, False, False]        # 25 ms > step; 15 ms is not


def test_an_apps_unix_face_does_not_mark_a_push_but_marks_pulled_data(loop, kernel):
    """Past the step every packet leaving is due a mark; a *distribute* Data to an app (bare
    or in an LpPacket) leaves unmarked and is counted, the app's pulled Data is marked."""
    clock = Clock()
    f, tr = face(clock, step=STEP)
    pushed = data("/*distribute*/ps/t1/v1/seg0", content=b"x" * 8000)
    tr.refuse = True
    f.send(segment(0))
    f.flush()
    tr.refuse = False
    f.send_many([pushed, segment(1), lp_wrap(pushed), segment(2)])
    clock.now = 0.025
    tr.drained()
    marks = [bool(congestion_mark(w)) for w in tr.sent()[1:]]
    assert marks == [False, True, False, True]
    assert f.queue.counters.marked == 2 and f.queue.counters.pushes_unmarked == 2


def test_the_queue_is_bounded_and_its_drops_counted(loop, kernel):
    clock = Clock()
    limit = sum(len(segment(i)) for i in range(1, 11))
    f, tr = face(clock, limit=limit)
    tr.refuse = True
    f.send(segment(0))
    f.flush()
    f.send_many([segment(i) for i in range(1, 15)])
    assert len(f.queue) == 10 and f.info.counters.drops["queue_full"] == 4
    assert f.queue.counters.max_bytes == limit


def test_a_closed_face_drops_its_queue(loop, kernel):
    clock = Clock()
    f, tr = face(clock)
    tr.refuse = True
    f.send(segment(0))
    f.flush()
    f.send_many([segment(i) for i in range(1, 5)])
    f.connection_lost(None)
    assert not f.queue
    tr.drained()                                            # nothing more is written
    assert len(tr.writes) == 1


def test_one_rule_for_both_face_kinds():
    """MarkingRule, as the UDP queue and the stream face use it: one interval's grace, then
    interval/sqrt(k) from each mark; `every` marks at once and leaves the timing alone."""
    rule = MarkingRule(INTERVAL)
    assert not rule.check(True, 0.0) and rule.congested
    assert not rule.check(True, 0.099) and rule.check(True, 0.1)
    assert not rule.check(True, 0.199) and rule.check(True, 0.2)          # interval / sqrt(1)
    assert not rule.check(True, 0.27) and rule.check(True, 0.2 + INTERVAL / math.sqrt(2))
    assert rule.check(True, 0.28, every=True)
    assert not rule.check(False, 0.3) and not rule.congested
    assert rule.check(True, 0.31, every=True) and not rule.congested
    with pytest.raises(ValueError, match="interval"):
        MarkingRule(0)
