"""TCP's retransmission timeout (RFC 6298): the smoothed round trip and its deviation, and an
RTO from them, clamped and doubled on each expiry until a fresh sample.  Used by the link
reliability of the forwarder's faces, by the apps' fetchers and by the subscriber's probe
timer (ndnps.exchanges.transport.subscriber).

Backoff is bounded by the measured round trip: once there is a sample, an RTO doubles up to
BACKOFF_RTTS smoothed round trips (the RTO itself when that is more), never to `max_rto`
alone.  Doubling to a fixed ceiling made a loss cost seconds where the path's round trip is
milliseconds: at 20 % loss a few losses in a row of one segment left a version waiting
0.2 + 0.4 + 0.8 + 1.6 s, and every version waited for the slowest of hundreds of segments.
Backoff protects a path from a consumer that repeats itself too often; a few round trips
between tries already does that, and what a try costs is one Interest."""
from __future__ import annotations

from typing import Final

# uvloop's loop.time() and timers count whole milliseconds, and a delay is rounded to the
# nearest: a timer set for a deadline can run up to 0.5 ms before it, as loop.time() reads it,
# find nothing due and re-arm, again and again until the clock ticks over.  Set half a tick
# later, it runs at the first tick at or after the deadline
HALF_TICK: Final = 0.0005
# how far an RTO backs off: this many smoothed round trips (see above)
BACKOFF_RTTS: Final = 8.0


class MeanDeviation:
    """srtt / rttvar of RFC 6298 (alpha = 1/8, beta = 1/4 by default)."""

    def __init__(self, alpha: float = 0.125, beta: float = 0.25) -> None:
        self.alpha, self.beta = alpha, beta
        self.mean: float | None = None
        self.dev = 0.0
        self.samples = 0

    def update(self, sample: float) -> None:
        sample = max(0.0, float(sample))
        if self.mean is None:
            self.mean, self.dev = sample, sample / 2
        else:
            self.dev = (1 - self.beta) * self.dev + self.beta * abs(self.mean - sample)
            self.mean = (1 - self.alpha) * self.mean + self.alpha * sample
        self.samples += 1


class RtoEstimator:
    """Retransmission timeout: ``clamp(mean + k * dev) * 2**backoffs``, at most `ceiling`."""

    def __init__(self, initial: float = 1.0, k: float = 4.0, min_rto: float = 0.05,
                 max_rto: float = 10.0) -> None:
        if not 0 < min_rto <= max_rto:
            raise ValueError("need 0 < min_rto <= max_rto")
        self.initial, self.k, self.min_rto, self.max_rto = initial, k, min_rto, max_rto
        self.stats = MeanDeviation()
        self.backoffs = 0

    def observe(self, sample: float) -> None:
        """A measured duration (never one that needed a retransmission: Karn)."""
        self.stats.update(sample)
        self.backoffs = 0

    def backoff(self) -> None:
        if self.rto < self.ceiling:
            self.backoffs += 1

    @property
    def base(self) -> float:
        s = self.stats
        base = self.initial if s.mean is None else s.mean + self.k * s.dev
        return min(max(base, self.min_rto), self.max_rto)

    @property
    def ceiling(self) -> float:
        """The most an RTO backs off to: BACKOFF_RTTS smoothed round trips, or the unbacked
        RTO when that is more; `max_rto` before the first sample."""
        mean = self.stats.mean
        if mean is None:
            return self.max_rto
        return min(max(self.base, BACKOFF_RTTS * mean), self.max_rto)

    @property
    def rto(self) -> float:
        return min(self.base * (2 ** self.backoffs), self.ceiling)

    def bounded(self, wait: float) -> float:
        """`wait`, but at most `ceiling` once a round trip was measured: how long anything
        repeated after a failure may wait."""
        return wait if self.stats.mean is None else min(wait, self.ceiling)
