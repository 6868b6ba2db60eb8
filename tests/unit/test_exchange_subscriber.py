"""ndnps.exchanges.transport.subscriber on a fake clock: versions assembled per producer, holes
fetched after the reordering window, quiet tails after a few gaps between segments, the probe timer
(backoff, cap, Karn's rule), corrupt versions dropped."""
from __future__ import annotations

import pytest

from ndnps.exchanges.transport.subscriber import (PAUSES_KEPT, Action, Complete, Corrupt, Fetch,
                                                  Probe, ProbeTimer, Subscriber)
from ndnps.ndn.rto import RtoEstimator


class FakePath:
    reorder_floor = 0.004
    min_rtt: float | None = None

    def __init__(self, srtt: float = 0.0, ceiling: float = 0.05) -> None:
        self._srtt, self.ceiling = srtt, ceiling

    def srtt(self) -> float:
        return self._srtt

    def bounded(self, wait: float) -> float:
        return min(wait, self.ceiling)


def subscriber(**kw: float) -> Subscriber:
    knobs: dict = dict(gap_delay=0.002, tail_delay=0.5, probe_min=0.2, probe_max=2.0)
    knobs.update(kw)
    sub = Subscriber(FakePath(), RtoEstimator(initial=1.0, max_rto=8), **knobs)
    sub.newest["ps"] = 0
    return sub


def run_timers(sub: Subscriber, until: float) -> list[tuple[float, Action]]:
    """Every timer due up to `until`, at its own instant: (when, action)."""
    out: list[tuple[float, Action]] = []
    while (due := sub.next_timer()) is not None and due <= until:
        out += [(due, a) for a in sub.on_timer(due)]
    return out


def test_segments_in_any_order_and_duplicated_make_one_version():
    sub = subscriber()
    parts = [b"a", b"b", b"c"]
    got = []
    for t, s in enumerate((2, 0, 0, 1)):
        got += sub.on_segment(t * 0.001, "ps", 1, s, parts[s], 2, pushed=True)
    assert got == [Complete("ps", 1, b"abc")]
    assert sub.accepted(0.01, "ps", 1) is None          # nobody was waiting for it
    assert sub.newest_of("ps") == 1
    assert sub.on_segment(0.02, "ps", 1, 0, b"a", 2) == []   # old now: ignored


def test_versions_are_kept_apart_by_producer():
    sub = subscriber()
    sub.newest["peer"] = 0
    assert sub.on_segment(0.0, "ps", 1, 0, b"x", 1) == []
    assert sub.on_segment(0.0, "peer", 1, 1, b"Y", 1) == []
    assert sub.on_segment(0.0, "peer", 1, 0, b"X", 1) == [Complete("peer", 1, b"XY")]
    assert sub.on_segment(0.0, "ps", 1, 1, b"y", 1) == [Complete("ps", 1, b"xy")]


def test_disagreeing_final_block_ids_drop_the_version():
    sub = subscriber()
    assert sub.on_segment(0.0, "ps", 2, 0, b"a", 3) == []
    assert sub.on_segment(0.0, "ps", 2, 1, b"b", 4) == [Corrupt("ps", 2)]
    assert sub.assemblies.get(("ps", 2)) is None


def test_a_hole_is_fetched_after_the_reordering_window_unless_it_fills():
    sub = subscriber(gap_delay=0.002)
    sub.path = FakePath(srtt=0.1)                        # the tail waits 2 round trips more
    for s in (0, 1, 3):
        sub.on_segment(0.0, "ps", 1, s, b"x", 5, pushed=True)
    # the window is the larger of gap_delay and the path's reordering floor (4 ms)
    assert sub.on_timer(0.0039) == []
    fired = run_timers(sub, 0.0041)
    assert fired == [(pytest.approx(0.004), Fetch("ps", 1, (2,), "gap"))]
    assert sub.counters.gap_fetches == 1
    # a hole that fills in time is not fetched
    sub2 = subscriber()
    sub2.on_segment(0.0, "ps", 1, 0, b"x", 2, pushed=True)
    sub2.on_segment(0.0, "ps", 1, 2, b"x", 2, pushed=True)
    sub2.on_segment(0.001, "ps", 1, 1, b"x", 2, pushed=True)     # late, but complete
    assert [a for _, a in run_timers(sub2, 1.0)] == [] and sub2.counters.gap_fetches == 0


def test_a_push_gone_quiet_short_of_its_end_fetches_its_tail():
    sub = subscriber(tail_delay=0.5)
    # a paced push: segments 1 ms apart, then nothing after segment 4 of 0..9
    for s in range(5):
        sub.on_segment(s * 0.001, "ps", 1, s, b"x", 9, pushed=True)
    wait = sub.tail_wait()
    assert wait == pytest.approx(max(8 * sub.push_gap, 2 * 0.0 + 0.004, 0.001))
    fired = run_timers(sub, 1.0)
    assert len(fired) == 1
    when, action = fired[0]
    assert when == pytest.approx(0.004 + wait)
    assert action == Fetch("ps", 1, (5, 6, 7, 8, 9), "tail")
    assert sub.counters.tail_fetches == 1
    # segments that keep coming move the deadline: no tail fetch while the push goes on
    sub2 = subscriber()
    for s in range(10):
        sub2.on_segment(s * 0.001, "ps", 1, s, b"x", 9, pushed=True)
    assert run_timers(sub2, 1.0) == []


def test_the_tail_wait_is_bounded_by_tail_delay_and_floored_by_a_stall():
    sub = subscriber(tail_delay=0.02)
    sub.path = FakePath(srtt=1.0)                        # a slow path: 2 round trips > 20 ms
    assert sub.tail_wait() == 0.02
    sub = subscriber(stall=0.003)
    sub.path = FakePath()
    sub.path.reorder_floor = 0.0
    assert sub.tail_wait() == 0.003


def test_a_tail_waits_longer_than_the_pauses_the_last_pushes_went_on_after():
    """A producer that stalled 40 ms mid-push and went on: the next push's tail is not taken
    as lost before 1.5 x that (a fetch then would duplicate a push still coming)."""
    sub = subscriber(tail_delay=0.5)
    times = [0.0, 0.001, 0.002, 0.042, 0.043]            # a 40 ms stall after segment 2
    for s, t in enumerate(times):
        sub.on_segment(t, "ps", 1, s, b"x", 4, pushed=True)
    sub.accepted(0.043, "ps", 1)
    assert sub.longest_pause == pytest.approx(0.04)
    for s in range(3):                                  # the next push goes quiet after 3
        sub.on_segment(1.5 + s * 0.001, "ps", 2, s, b"x", 9, pushed=True)
    assert sub.tail_wait() == pytest.approx(0.06)
    ((when, action),) = run_timers(sub, 2.0)
    assert when == pytest.approx(1.502 + 0.06) and action == Fetch("ps", 2, tuple(range(3, 10)),
                                                                   "tail")
    # the gap between two pushes is no pause of either; tail_delay still bounds the wait
    assert sub.longest_pause == pytest.approx(0.04)
    sub.on_segment(1.6, "ps", 3, 0, b"x", 9, pushed=True)
    sub.on_segment(1.9, "ps", 3, 1, b"x", 9, pushed=True)     # a 300 ms stall
    assert sub.tail_wait() == pytest.approx(0.45)
    sub.tail_delay = 0.2
    assert sub.tail_wait() == 0.2
    # a gap with segments lost in it is no pause: the push did not go on at the next segment
    sub.on_segment(1.95, "ps", 3, 2, b"x", 9, pushed=True)
    sub.on_segment(2.5, "ps", 3, 7, b"x", 9, pushed=True)
    assert sub.longest_pause == pytest.approx(0.3)
    # remembered for the last PAUSES_KEPT pushes only
    for v in range(4, 4 + PAUSES_KEPT):
        sub.on_segment(2.0 + v, "ps", v, 0, b"x", 9, pushed=True)
        sub.on_segment(2.0 + v + 0.001, "ps", v, 1, b"x", 9, pushed=True)
    assert sub.longest_pause == pytest.approx(0.001)


def test_probe_timer_probes_the_expected_version_then_rearms_capped():
    sub = subscriber(probe_min=0.2, probe_max=2.0)
    sub.expect(10.0, "ps", 1)                            # waiting for version 1 from t=10
    fired = run_timers(sub, 11.5)
    # one probe: the next expiries find it still under way
    ((at, probe),) = fired
    assert at == pytest.approx(11.0) and isinstance(probe, Probe)
    assert (probe.producer, probe.version, probe.lifetime) == ("ps", 1, pytest.approx(0.2))
    # re-armed after backoff, but capped at max(probe_min, the path's ceiling): 0.2 s
    assert sub.counters.probes == 3 and sub.timer.fired == 3
    assert sub.timer.due == pytest.approx(11.6)
    sub.probe_done("ps", 1)
    (probe,) = sub.want("ps", 1, "timer")
    assert isinstance(probe, Probe)
    assert (probe.producer, probe.version, probe.lifetime) == ("ps", 1, pytest.approx(0.2))


def test_probe_timer_stays_quiet_while_a_push_is_arriving():
    sub = subscriber(probe_min=0.2)
    sub.expect(0.0, "ps", 1)
    sub.on_segment(0.95, "ps", 1, 0, b"x", 50, pushed=True)  # a push under way
    fired = [a for _, a in run_timers(sub, 1.01) if isinstance(a, Probe)]
    assert fired == [] and sub.counters.probes == 0 and sub.timer.fired == 1  # backed off


def test_probe_of_a_version_whose_end_is_known_fetches_only_what_is_missing():
    sub = subscriber()
    sub.on_segment(0.0, "ps", 1, 0, b"x", 3)
    sub.on_segment(0.0, "ps", 1, 2, b"x", 3)
    assert sub.want("ps", 1, "timer") == [Fetch("ps", 1, (1, 3), "timer")]
    # a collect for a version of which nothing is known: fetched whole from segment 0
    assert sub.want("ps", 2, "collect") == [Fetch("ps", 2, (0,), "collect", whole=True)]
    assert sub.want("ps", 0, "collect") == []            # we have it


def test_probe_timer_samples_only_when_it_did_not_fire_karn():
    timer = ProbeTimer(RtoEstimator(initial=1.0, k=4, min_rto=0.01))
    now = 0.0
    for _ in range(20):                                  # "gradient sent -> parameters in"
        timer.arm(now)
        now += 0.05
        assert timer.satisfied(now) == pytest.approx(0.05)
    assert timer.estimator.rto == pytest.approx(0.05, abs=0.02)
    samples = timer.estimator.stats.samples
    timer.arm(now)
    timer.expire(now + timer.estimator.rto, cap=None)   # it fired: the wait is no sample
    assert timer.satisfied(now + 1.0) == pytest.approx(1.0)
    assert timer.estimator.stats.samples == samples and not timer.armed


def test_probe_timer_backs_off_and_cancel_disarms():
    timer = ProbeTimer(RtoEstimator(initial=1.0, max_rto=8))
    timer.arm(0.0)
    assert timer.due == 1.0
    timer.expire(1.0, cap=None)
    assert timer.due == pytest.approx(3.0)               # doubled
    timer.expire(3.0, cap=0.5)
    assert timer.due == pytest.approx(3.5)               # capped once it has fired
    timer.cancel()
    assert timer.due is None and timer.satisfied(4.0) is None
    timer.arm(5.0)
    timer.arm(5.5)                                        # re-arming restarts the wait
    assert timer.due == pytest.approx(5.5 + timer.estimator.rto)


def test_the_probe_timer_is_satisfied_by_the_version_it_waits_for():
    sub = subscriber()
    sub.sent(0.0, "ps")
    sub.expect(0.0, "ps", 1)
    sub.on_segment(0.3, "ps", 1, 0, b"x", 0)
    assert sub.accepted(0.3, "ps", 1) == pytest.approx(0.3)
    assert not sub.timer.armed and sub.next_timer() is None


def test_a_restart_forgets_what_was_being_assembled():
    sub = subscriber()
    sub.on_segment(0.0, "ps", 5, 0, b"x", 3, pushed=True)
    sub.restart("ps", 2)                                  # a resumed producer, back in time
    assert sub.newest_of("ps") == 2 and sub.assemblies.get(("ps", 5)) is None
    assert run_timers(sub, 10.0) == []
