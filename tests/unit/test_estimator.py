"""ndnps.client.estimator: RTO arithmetic, the probe timer (fake clock) and the PS's finish-time
estimate."""
from __future__ import annotations

import asyncio

import pytest

from ndnps.client.estimator import (FinishTimeEstimator, MeanDeviation, ProbeTimer, QuietTimer,
                             RtoEstimator)


class FakeLoop:
    """clock + call_later for ProbeTimer, advanced by hand."""

    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[list] = []

    def clock(self) -> float:
        return self.now

    def call_later(self, delay, fn):
        entry = [self.now + delay, fn, False]
        self.timers.append(entry)

        class Handle:
            def cancel(self_inner):
                entry[2] = True
        return Handle()

    def advance(self, dt: float) -> None:
        end = self.now + dt
        while True:
            due = [t for t in self.timers if not t[2] and t[0] <= end]
            if not due:
                break
            first = min(due, key=lambda t: t[0])
            first[2] = True
            self.now = first[0]
            first[1]()
        self.now = end


def test_mean_deviation_is_rfc6298():
    md = MeanDeviation()
    md.update(1.0)
    assert (md.mean, md.dev) == (1.0, 0.5)
    md.update(2.0)
    assert md.dev == pytest.approx(0.75 * 0.5 + 0.25 * 1.0)
    assert md.mean == pytest.approx(0.875 * 1.0 + 0.125 * 2.0)


def test_rto_initial_then_mean_plus_k_dev_clamped():
    rto = RtoEstimator(initial=1.0, k=4, min_rto=0.05, max_rto=10)
    assert rto.rto == 1.0
    rto.observe(0.1)
    assert rto.rto == pytest.approx(0.1 + 4 * 0.05)
    for _ in range(50):
        rto.observe(0.001)
    assert rto.rto == 0.05                     # lower bound
    big = RtoEstimator(initial=1.0, max_rto=2.0)
    big.observe(100)
    assert big.rto == 2.0                      # upper bound


def test_backoff_doubles_caps_and_resets_on_a_sample():
    rto = RtoEstimator(initial=0.5, max_rto=3.0)
    seen = []
    for _ in range(5):
        seen.append(rto.rto)
        rto.backoff()
    assert seen == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert rto.backoffs == 3                   # stops counting at the cap
    rto.observe(0.2)
    assert rto.backoffs == 0
    assert rto.rto == pytest.approx(0.2 + 4 * 0.1)


def test_probe_timer_fires_backs_off_and_rearms():
    loop = FakeLoop()
    fired = []
    timer = ProbeTimer(RtoEstimator(initial=1.0, max_rto=8), lambda: fired.append(loop.now),
                       clock=loop.clock, call_later=loop.call_later)
    timer.arm()
    loop.advance(0.99)
    assert fired == []
    loop.advance(0.02)
    assert fired == [pytest.approx(1.0)]
    loop.advance(2.0)                          # re-armed with 2 s
    assert fired == [pytest.approx(1.0), pytest.approx(3.0)]
    loop.advance(4.0)
    assert len(fired) == 3 and timer.fired == 3
    # satisfied after probes: no sample (Karn), disarmed
    assert timer.satisfied() == pytest.approx(7.01)
    assert timer.estimator.stats.samples == 0
    loop.advance(100)
    assert len(fired) == 3 and not timer.armed


def test_probe_timer_samples_when_no_probe_fired_and_adapts():
    loop = FakeLoop()
    fired = []
    timer = ProbeTimer(RtoEstimator(initial=1.0, k=4, min_rto=0.01), lambda: fired.append(1),
                       clock=loop.clock, call_later=loop.call_later)
    for _ in range(20):                        # "gradient sent -> parameters in" = 50 ms
        timer.arm()
        loop.advance(0.05)
        assert timer.satisfied() == pytest.approx(0.05)
    assert fired == []
    assert timer.estimator.rto == pytest.approx(0.05, abs=0.02)
    timer.arm()                                # a lost push: fires after ~rto, not after 1 s
    loop.advance(0.2)
    assert fired
    timer.cancel()


def test_cancel_and_rearm():
    loop = FakeLoop()
    fired = []
    timer = ProbeTimer(RtoEstimator(initial=1.0), lambda: fired.append(1), clock=loop.clock,
                       call_later=loop.call_later)
    timer.arm()
    timer.cancel()
    loop.advance(5)
    assert fired == [] and timer.satisfied() is None
    timer.arm()
    loop.advance(0.5)
    timer.arm()                                # re-arming restarts the wait
    loop.advance(0.9)
    assert fired == []


def test_finish_time_estimator_sends_early_and_corrects_overestimates():
    est = FinishTimeEstimator()
    assert est.send_delay() == 0.0             # no history: ask at once
    est.observe(ready_after=3.0, sent_after=0.0, held=True)
    assert est.expected is None                # the first includes the worker's start-up
    for _ in range(10):
        est.observe(ready_after=0.100, sent_after=0.0, held=True)
    assert est.expected == pytest.approx(0.1, abs=1e-3)
    assert 0.0 < est.send_delay() <= 0.05      # well before the expected finish
    # over-estimate: it sends late, the worker answers at once (not held) -> pulled down
    high = FinishTimeEstimator(k=0, early=1.0)
    high.observe(5.0, 0.0, held=True)
    high.observe(1.0, 0.0, held=True)
    before = high.send_delay()
    for _ in range(10):
        sent = high.send_delay()
        high.observe(ready_after=sent + 0.001, sent_after=sent, held=False)
    assert high.send_delay() < before


def test_finish_time_estimate_does_not_ratchet_up_when_late_sends_look_held():
    # the truth: ready 10 ms after the reference; the round trip is 3 ms, and the PS takes
    # every answer for a held one: samples are max(send, ready) + RTT
    est = FinishTimeEstimator()
    for _ in range(200):
        sent = est.send_delay()
        est.observe(ready_after=max(sent, 0.010) + 0.003, sent_after=sent, held=True)
    assert est.expected == pytest.approx(0.013, abs=0.002)
    assert est.send_delay() < 0.010            # still asks before the gradient is ready


@pytest.mark.asyncio
@pytest.mark.looptime
async def test_quiet_timer_fires_once_the_last_touch_is_old_enough():
    """A burst of touches, each before the last one's wait is over, then a shorter wait: one
    call, when the last touch's wait is over.  The loop's clock is fake (looptime): every
    touch and timer is at exactly its time, however loaded the host is."""
    loop = asyncio.get_running_loop()
    fired: list[float] = []
    touched: list[float] = []
    timer = QuietTimer(lambda: fired.append(loop.time()))
    for _ in range(5):                          # a burst: each touch moves the deadline
        timer.touch(0.02)
        touched.append(loop.time())
        await asyncio.sleep(0.005)
    assert fired == []                          # the timer ran meanwhile, and waited on
    timer.touch(0.005)                          # a shorter wait: the timer comes earlier
    touched.append(loop.time())
    assert timer._handle_at == pytest.approx(touched[-1] + 0.005)
    await asyncio.sleep(0.05)
    cancelled = QuietTimer(lambda: fired.append(-1.0))
    cancelled.touch(0.001)
    cancelled.cancel()
    await asyncio.sleep(0.01)
    assert len(fired) == 1 and -1.0 not in fired
    # never before the last touch's wait is over, and at the first tick after it (not at
    # the end of a burst touch's longer wait)
    assert touched[-1] + 0.005 <= fired[0] < touched[-1] + 0.005 + 0.001


@pytest.mark.parametrize("use_uvloop", [False, True])
def test_quiet_timer_on_a_real_loop_never_fires_before_the_deadline(use_uvloop):
    """On each loop's own clock (uvloop's counts whole milliseconds and rounds a timer's
    delay): a touch that moved the deadline later makes the timer, when it runs, wait out
    the rest; it calls once, never before the deadline; a cancelled one never.  Nothing here
    depends on how fast the host runs: the test waits for the call, however late."""
    import uvloop

    async def main() -> tuple[list[float], float]:
        loop = asyncio.get_running_loop()
        fired: list[float] = []
        called = loop.create_future()

        def on_quiet() -> None:
            fired.append(loop.time())
            if not called.done():
                called.set_result(None)
        timer = QuietTimer(on_quiet)
        timer.touch(0.005)                      # the timer is set for 5 ms ...
        before = loop.time()
        timer.touch(0.02)                       # ... and the deadline moved to 20 ms
        cancelled = QuietTimer(lambda: fired.append(-1.0))
        cancelled.touch(0.001)
        cancelled.cancel()
        await called
        await asyncio.sleep(0.01)               # no timer is left to call again
        return fired, before

    run = uvloop.run if use_uvloop else asyncio.run
    fired, before = run(main())
    assert len(fired) == 1 and -1.0 not in fired
    assert fired[0] >= before + 0.02            # the touch read the clock at `before` or later
