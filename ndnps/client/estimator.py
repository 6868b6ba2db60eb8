"""Timing estimators: when the PS should ask a worker for its gradient, and when a worker should
give up waiting for a push and probe.

* ``MeanDeviation``, ``RtoEstimator`` (from ``forwarder.rto``, which the link reliability of
  the forwarder's faces uses too): TCP's RTT estimator (RFC 6298); mean + k * deviation,
  clamped, doubled on every expiry (exponential backoff) until a fresh sample arrives.  Workers
  use it for the probe timer ("gradient sent -> parameters received"), fetchers for
  per-segment retransmission.
* ``ProbeTimer``: an asyncio timer driven by an RtoEstimator; re-arms itself after each
  expiry, backed off but no further than `cap()` (a few round trips of the path: the version
  is overdue by then), takes a sample only when no probe fired (Karn's rule).
* ``QuietTimer``: calls back once nothing touched it for a while (a push gone quiet).
* ``FinishTimeEstimator``: the PS's per-worker estimate of "reference instant -> gradient
  ready" (from its second gradient on), and how long after the reference to send the collect
  Interest.
"""
from __future__ import annotations

import asyncio
from typing import Callable

# shared with the forwarder's link reliability (one RFC 6298 estimator in the project)
from ndnps.ndn.rto import HALF_TICK, MeanDeviation, RtoEstimator

__all__ = ["MeanDeviation", "RtoEstimator", "ProbeTimer", "QuietTimer", "FinishTimeEstimator"]


class QuietTimer:
    """Calls `on_quiet()` once the last `touch(quiet)` is `quiet` seconds old.  A touch moves
    the deadline, not the timer: the timer, run before the deadline, waits out the rest (every
    pushed segment touches it; a cancel and a call_later each cost more than that check)."""

    def __init__(self, on_quiet: Callable[[], None]) -> None:
        self._on_quiet = on_quiet
        self._loop = asyncio.get_running_loop()
        self._due = 0.0
        self._handle: asyncio.TimerHandle | None = None
        self._handle_at = 0.0

    def touch(self, quiet: float) -> None:
        self._due = self._loop.time() + quiet
        if self._handle is None or self._due < self._handle_at:
            self._arm()

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _arm(self) -> None:
        self.cancel()
        self._handle_at = self._due
        self._handle = self._loop.call_at(self._due + HALF_TICK, self._run)

    def _run(self) -> None:
        self._handle = None
        if self._loop.time() < self._due:
            self._arm()
            return
        self._on_quiet()


class ProbeTimer:
    """Armed when a worker sends its gradient; `satisfied()` when the parameters it waits for are
    complete.  On expiry it calls `on_expiry()`, backs off and re-arms, until satisfied or
    cancelled; re-armed, it waits `cap()` at most (None: no cap).  `clock` and `call_later`
    are the running loop's unless given (tests)."""

    def __init__(self, estimator: RtoEstimator, on_expiry: Callable[[], None],
                 clock: Callable[[], float] | None = None,
                 call_later: Callable | None = None,
                 cap: Callable[[], float | None] | None = None) -> None:
        self.estimator = estimator
        self.on_expiry = on_expiry
        self.cap = cap
        self._clock = clock
        self._call_later = call_later
        self._handle: asyncio.TimerHandle | None = None
        self._armed_at: float | None = None
        self._fired_since_arm = 0
        self.fired = 0

    def _now(self) -> float:
        return self._clock() if self._clock else asyncio.get_running_loop().time()

    def _schedule(self, delay: float) -> None:
        call_later = self._call_later or asyncio.get_running_loop().call_later
        self._handle = call_later(delay, self._expire)

    @property
    def armed(self) -> bool:
        return self._armed_at is not None

    def arm(self) -> None:
        self.cancel()
        self._armed_at = self._now()
        self._fired_since_arm = 0
        self._schedule(self.estimator.rto)

    def satisfied(self) -> float | None:
        """The wait is over: sample it if no probe fired, disarm; returns the waited time."""
        if self._armed_at is None:
            return None
        waited = self._now() - self._armed_at
        if self._fired_since_arm == 0:
            self.estimator.observe(waited)
        self.cancel()
        return waited

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._armed_at = None

    def _expire(self) -> None:
        self._handle = None
        if self._armed_at is None:
            return
        self.fired += 1
        self._fired_since_arm += 1
        self.estimator.backoff()
        self._schedule(self.interval)
        self.on_expiry()

    @property
    def interval(self) -> float:
        """How long the timer waits now (re-armed after an expiry: at most `cap()`)."""
        cap = self.cap() if self.cap is not None and self._fired_since_arm else None
        return self.estimator.rto if cap is None else min(self.estimator.rto, cap)


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
