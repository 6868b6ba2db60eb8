"""A UDP face's send queue, sans-I/O: bounded in octets, with congestion marking on the time its
datagrams wait (NFD's GenericLinkService congestion detection, on CoDel's measure).

The channel's socket has a small kernel send buffer (the daemon's `send_buffer`), so on a
bottleneck the kernel pushes back early and the backlog builds here, where the forwarder sees
it, instead of in a kernel buffer it cannot see.  The queue admits whole packets while it holds
at most `limit_bytes` (the packet's fragments then go together; tail drop beyond).

Marking follows NFD (checkCongestionLevel) with CoDel's sojourn time (RFC 8289) in place of
NFD's queue length: the queue's delay is how long its oldest datagram has waited.  Once the
delay has stayed above `target` for a whole `interval`, the next packet to enter is marked,
and while it stays above, the k-th mark is followed by the next interval/sqrt(k) later (CoDel's
control law: a mark rate that grows until the senders slow down; the rule is
ndnps.ndn.congestion.MarkingRule, which stream faces use too); the delay falling to the
target or the queue emptying ends the episode.  Past `step` (4 targets), every packet is
marked, as DCTCP's and L4S's step threshold: a dozen windows growing at once outrun CoDel's
first marks (measured: 8 collect flows filled the 1 MiB queue, 89 ms, and the round trips past
their timeouts made the consumers re-ask, the duplicates crossing the link again), and the
consumers cut at most once per round trip, so marking them all does not over-cut.  The mark is set on the packet before it is
fragmented (the first fragment carries it), by the face.  Time is passed in (`now`).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ndnps.ndn.congestion import MarkingRule
from ndnps.ndn.tlv import MAX_PACKET_SIZE

from ..face_table import SendQueueCounters


@dataclass
class QueueOptions:
    limit_bytes: int = 1 << 20     # ~84 ms at 100 Mbit/s: bursts fit, marks act long before
    target: float = 0.005          # s (CoDel's and PCON's)
    interval: float = 0.1          # s (CoDel's; NFD's baseCongestionMarkingInterval)
    step: float = 0.02             # s: above this delay every packet is marked (0: never)
    marking: bool = True

    def validate(self) -> None:
        if self.limit_bytes < MAX_PACKET_SIZE:
            raise ValueError(f"limit_bytes must be >= {MAX_PACKET_SIZE}, got {self.limit_bytes}")
        if not self.target > 0:
            raise ValueError(f"target must be > 0, got {self.target}")
        if not self.interval > 0:
            raise ValueError(f"interval must be > 0, got {self.interval}")
        if self.step < 0 or (self.step and self.step < self.target):
            raise ValueError(f"step must be 0 or >= target, got {self.step}")


class SendQueue:
    """Datagrams waiting for the socket, oldest first, each with the time it came."""

    def __init__(self, options: QueueOptions | None = None,
                 counters: SendQueueCounters | None = None) -> None:
        self.options = options if options is not None else QueueOptions()
        self.options.validate()
        self.counters = counters if counters is not None else SendQueueCounters()
        self.limit = self.options.limit_bytes
        self.bytes = 0
        self._items: deque[tuple[bytes, float]] = deque()
        self._rule = MarkingRule(self.options.interval)

    def __len__(self) -> int:
        return len(self._items)

    def delay(self, now: float) -> float:
        """How long the oldest datagram has waited (0 when empty)."""
        return now - self._items[0][1] if self._items else 0.0

    def admits(self, size: int) -> bool:
        """Whether a packet of `size` octets may enter (it then goes whole, even past the
        limit by its fragments' headers)."""
        return self.bytes + size <= self.limit

    def should_mark(self, now: float) -> bool:
        """Whether the packet entering now is to be marked (counted as marked)."""
        opts = self.options
        if not opts.marking:
            return False
        delay = self.delay(now)
        if self._rule.check(delay > opts.target, now, bool(opts.step) and delay > opts.step):
            self.counters.marked += 1
            return True
        return False

    def push(self, wire: bytes, now: float) -> None:
        self._items.append((wire, now))
        self.bytes += len(wire)
        if self.bytes > self.counters.max_bytes:
            self.counters.max_bytes = self.bytes

    def pop(self, now: float) -> bytes:
        wire, since = self._items.popleft()
        self.bytes -= len(wire)
        if now - since > self.counters.max_delay:
            self.counters.max_delay = now - since
        if not self._items:
            self._rule.reset()                  # empty: the episode is over
        return wire

    def clear(self) -> None:
        self._items.clear()
        self.bytes = 0
