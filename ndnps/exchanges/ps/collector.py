"""The collect exchange's timing, sans-I/O: when to ask a producer for the object it is
computing (a worker's gradient), how long that Interest may be held, and what its answer says
about the producer's pace.  The windowed fetch itself (loss recovery, segments) is
ndnps.exchanges.transport.fetch's; its owner asks these functions, then fetches.

* ``FinishTimeEstimator``: per producer, the smoothed "reference -> object ready" (the
  reference is the push of the version it computes on, or in async mode the arrival of its
  previous object), and how long after the reference to send the Interest.
* ``send_at``: the reference + that delay.
* ``held_lifetime``: the first Interests live until shortly after the expected finish (+ 2
  deviations), a few round trips at least, `collect_lifetime` at most.
* ``was_held``: whether the Interest that brought the first Data was held by the producer
  (it waited well over a round trip), i.e. whether its arrival dates the object's readiness.
"""
from __future__ import annotations

from ndnps.ndn.rto import MeanDeviation

from ..transport.path import PathEstimates

UNMEASURED_RTT = 0.01       # s: the round trip assumed before any was seen
MIN_MARGIN = 0.05           # s: the least a held Interest outlives the expected finish
HELD_SLACK = 0.002          # s: scheduling noise allowed on top of 2 round trips


class FinishTimeEstimator:
    """Per worker: smoothed "reference -> gradient ready" (the reference is the push of the
    version it computes on, or in async mode the arrival of its previous gradient).

    ``send_delay()`` is when to send the collect Interest after the reference: well early
    (``early`` x the mean, less k deviations), since the worker holds an early Interest for
    free but a late one costs the whole gap.  Two kinds of sample: a held answer measures the
    ready instant; an answer that came back at once (``held=False``, a censored sample) only
    says the gradient was ready *before* the Interest, and is taken as ready at half the send
    delay, which pulls the estimate down.  The PS cannot always tell the two apart (a noisy
    round trip looks like a short hold); sending at a fraction of the mean keeps such errors
    from ratcheting the estimate upwards: a late send's sample is at most send delay + RTT.
    """

    def __init__(self, k: float = 1.0, early: float = 0.5) -> None:
        self.k, self.early = k, early
        self.stats = MeanDeviation(alpha=0.25, beta=0.25)
        self.skipped_first = False

    def observe(self, ready_after: float, sent_after: float, held: bool) -> None:
        if not self.skipped_first:
            # the first gradient of a worker (new, or back) came after its start-up: content
            # fetch, registration, loading its data.  As a sample it made the next versions'
            # collects live seconds (a lost one waited that long, at 20 % loss)
            self.skipped_first = True
            return
        self.stats.update(ready_after if held else 0.5 * min(ready_after, sent_after))

    @property
    def expected(self) -> float | None:
        return self.stats.mean

    def send_delay(self) -> float:
        s = self.stats
        if s.mean is None:
            return 0.0
        return max(0.0, self.early * s.mean - self.k * s.dev)


def round_trip(path: PathEstimates) -> float:
    """The path's round trip as the collect's rules take it: the smallest seen."""
    return path.min_rtt or UNMEASURED_RTT


def send_at(est: FinishTimeEstimator, ref: float) -> float:
    """When to send the collect Interest for an object whose reference instant is `ref`."""
    return ref + est.send_delay()


def held_lifetime(est: FinishTimeEstimator, ref: float, sent: float, path: PathEstimates,
                  collect_lifetime: float, tail_floor: float = 0.0) -> float:
    """How long the Interests sent at `sent` may be held.  Until shortly after the expected
    finish (2 deviations: at loss, how soon a worker has the version varies, and one that
    expired as its gradient came was a round lost), so a lost one costs little; re-expressed,
    they live a few round trips (the RTO's ceiling, at most collect_lifetime): the worker is
    due, and one held Interest or its gradient lost must cost a round trip, not a backoff
    (they doubled up to 2 s: at 20 % loss versions waited seconds).  Without a history (the
    first version, a restarted PS) they start from a few round trips.  `tail_floor`: what
    the fetcher adds to a tail probe's wait."""
    expected = 0.0 if est.expected is None else max(
        0.0, ref + est.expected + 2 * est.stats.dev - sent)
    srtt = path.srtt() or round_trip(path)
    margin = path.bounded(max(MIN_MARGIN, 4 * srtt + tail_floor))
    return min(collect_lifetime, margin + expected)


def was_held(waited: float, rtt: float) -> bool:
    """The Interest that brought the first Data waited `waited`, on a path of round trip
    `rtt` (read when it was sent): well over a round trip means the worker held it, and
    became ready about when it came; else the object was ready before it was asked for."""
    return waited > 2 * rtt + HELD_SLACK
