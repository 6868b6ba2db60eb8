"""The event-loop side of NDNLPv2 link reliability (ReliableLink): the sans-I/O core
(reliability.py) driven by one timer of a loop passed in, and how that timer keeps up with a
busy loop (LATE, DEFER, SLACK).
"""
from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

from .reliability import LpReliability, ReliabilityCounters, Wire
from .rto import HALF_TICK
from .tlv import MAX_PACKET_SIZE

LATE = 0.002           # s: a timer this late means the event loop was busy meanwhile
DEFER = 0.001          # s: a late timer waits this much longer, past one socket read
SLACK = 0.001          # s: a timer this much before the deadline is kept (fires, re-arms)


class Handle(Protocol):
    def cancel(self) -> None: ...


class Loop(Protocol):
    """What ReliableLink needs of an event loop (an asyncio loop has it): its clock, and
    callbacks at a time and soon."""

    def time(self) -> float: ...

    def call_at(self, when: float, callback: Callable[..., Any], *args: Any) -> Handle: ...

    def call_soon(self, callback: Callable[..., Any], *args: Any) -> Any: ...


class ReliableLink:
    """The event-loop side of LpReliability for one face: `send_lower` writes a wire toward
    the peer (through the face's link emulation, if any); one timer of `loop` runs `poll` at
    `deadline`.  The loop is passed in (the forwarder's faces and the apps' face pass their
    asyncio loop), so this layer imports none."""

    def __init__(self, send_lower: Callable[[bytes], None], loop: Loop,
                 counters: ReliabilityCounters | None = None,
                 mtu: int = MAX_PACKET_SIZE) -> None:
        self.core = LpReliability(counters=counters or ReliabilityCounters(), mtu=mtu)
        self._send_lower = send_lower
        self._loop = loop
        self._timer: Handle | None = None
        self._timer_at = 0.0
        self._deferred = False
        self._settle_pending = False
        self._closed = False

    def send(self, wire: Wire) -> None:
        self._send_lower(self.core.wrap(wire, self._loop.time()))
        self._follow()

    def _follow(self) -> None:
        """The deadline moved: the timer follows it once per loop turn, not per packet.
        Sending moves it later (the Acks waiting rode on the packet, the tail probe is the new
        frame's), never earlier (a new frame's RTO and probe come after the older frames').
        A read can move it earlier (Acks to send, a shorter RTO) but not into this loop turn:
        the earliest, the Ack delay, is milliseconds away, and a timer could not run before
        the turn ends anyway (frames a read shows lost go at once, in `receive_many`)."""
        if self._timer is None:
            self._arm()
        elif not self._settle_pending:
            self._settle_pending = True
            self._loop.call_soon(self._settle)

    def wrap_many(self, wires: Sequence[Wire]) -> list[bytes]:
        """`send` for a batch, but returning the LpPackets for the caller to send toward the
        peer (in one step, as it sends a batch without reliability)."""
        now = self._loop.time()
        wrap = self.core.wrap
        out = [wrap(wire, now) for wire in wires]
        self._follow()
        return out

    def receive_many(self, wires: list[bytes]) -> list[bytes]:
        """The packets of one read (one datagram, on UDP), without their reliability headers
        (Ack-only packets and duplicates removed)."""
        now = self._loop.time()
        receive = self.core.receive
        out = []
        for wire in wires:
            up = receive(wire, now)
            if up is not None:
                out.append(up)
        if self.core.lost:
            # frames these Acks showed lost go again now, with whatever this read makes the
            # face send, not from a timer on a later turn of the loop (a wakeup more each)
            for wire in self.core.poll(now):
                self._send_lower(wire)
        self._follow()
        return out

    def close(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _settle(self) -> None:
        self._settle_pending = False
        self._arm()

    def _arm(self) -> None:
        """Set the timer to the core's deadline: earlier at once, and later too (or off) when
        it moved away by more than SLACK — Acks that rode on a packet, frames acknowledged.
        A timer left early would wake the process for nothing: at ~40 ms per iteration that
        was 10-12 wakeups of each worker per version, 40 of the forwarder's."""
        if self._closed:
            return
        at = self.core.deadline()
        timer = self._timer
        if timer is not None:
            if at is not None and self._timer_at <= at <= self._timer_at + SLACK:
                return
            timer.cancel()
            self._timer = None
        if at is not None:
            self._timer_at = at
            self._timer = self._loop.call_at(at + HALF_TICK, self._fire)

    def _fire(self) -> None:
        self._timer = None
        now = self._loop.time()
        if now - self._timer_at > LATE and not self._deferred:
            # the loop was busy past the deadline, and uvloop runs timers before it reads the
            # sockets: let it read the Acks that may be waiting before judging frames lost
            self._deferred = True
            self._timer_at = now + DEFER
            self._timer = self._loop.call_at(self._timer_at, self._fire)
            return
        self._deferred = False
        for wire in self.core.poll(now):
            self._send_lower(wire)
        self._arm()
