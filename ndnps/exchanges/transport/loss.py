"""Loss detection's rules for a transfer's flights (ndnps.exchanges.transport.fetch, whose
docstring tells the whole of its loss recovery): which flights RACK and the tail loss probe judge,
how long the last one may go unanswered before a probe, when a Nacked segment is asked again, and
which signals are congestion.

Which losses cut the window: one RACK detects *behind a queue* — the round trip of the answer
that revealed it stands more than QUEUE_TARGET (CoDel's 5 ms) above the path's smallest — as
TCP's would (RFC 5681, 8985): a drop-tail bottleneck (the kernel's tbf) or a path that does not
mark gives no other early signal (2 workers behind a 100 Mbit/s tbf link with no marks and no
such cut re-sent 1.2 Interests per segment of their gradients).  Not a loss with no queue
before it, a lossy link's (NDNLPv2 reliability's to repair): cutting on every one (TCP's rule)
held the 46-segment gradients of bench.loss's 100k model at 10 % loss at ~3 Interests, 2.5-3 x
slower.  Not a tail probe (its answer may be the original's), nor an RTO's first expiry: floored
at MIN_RTO for fast repair, it expires spuriously on a busy host (8 % of a lossless 100k run's
collect segments); the backed-off one cuts.
"""
from __future__ import annotations

from .flight import Flight

# A Nack (no route: the producer is gone, or back but not registered yet) is asked again after
# 50 ms, doubling per try up to 0.5 s: a producer back after an outage is then heard within half
# a second (doubling up to the 2 s lifetime of a content fetch, a restarted worker's next try
# came after the training had ended; chaos)
NACK_RETRY = 0.05
NACK_RETRY_MAX = 0.5        # and at most the RTO's ceiling, once the round trip is measured
TLP_FLOOR = 0.001           # s: added to a tail probe's wait (a process stalled that long)
QUEUE_TARGET = 0.005        # s: CoDel's (and so the forwarders' marking) target queue delay
NACK_CONGESTION = 50        # NDNLPv2 NackReason Congestion: a signal as an expiry is (ndn-cxx)


def nack_delay(tries: int, life: float) -> float:
    """How long after a Nack a segment is asked again: NACK_RETRY doubling per try, at most
    NACK_RETRY_MAX (and the Interest's lifetime)."""
    return min(life, NACK_RETRY_MAX, NACK_RETRY * 2 ** min(tries, 16))


def tail_probe_wait(srtt: float, last_rtt: float, min_rtt: float | None,
                    resent: bool) -> float:
    """How long the last Interest in flight may go unanswered before a tail probe re-asks it:
    2 round trips, srtt or the last one answered, whichever is longer (a queue may be
    building).  A re-sent one, the smallest round trip seen: it is answered from the nearest
    copy at once, and those round trips were first tries queued behind a burst (13-15 ms
    against 1-2 in a trace at 5 % loss, where each retry of a lost tail waited ~40 ms); and a
    copy too many costs one Interest, where a copy too late costs a round of every repair (at
    20 % loss on four hops a segment takes 2.4 tries on average, the slowest of a version's
    many, six)."""
    if resent and min_rtt is not None:
        return min_rtt
    return 2 * max(srtt, last_rtt)


def judged_flights(flights: dict[int, Flight], rack: tuple, probe: bool) -> list[Flight]:
    """The flights loss detection looks at: RACK's (every one due before the flight answered
    last, order `rack`), and with `probe` the one due last, for a tail probe, if not among
    them.  Flights are kept in send order, the held ones before any other (only Interests
    sent before the first Data are held); the producer answers the held ones by segment.  So
    after the first unheld flight not due before `rack`, none is: the walk stops there
    instead of at the window's end — it runs for every Data."""
    judged = []
    for flight in flights.values():
        if flight.order < rack:
            judged.append(flight)
        elif not flight.held:
            break
    if probe and flights:
        last = next(reversed(flights.values()))
        if last.held:
            last = max(flights.values(), key=lambda f: f.order)
        if not last.order < rack:
            judged.append(last)
    return judged
