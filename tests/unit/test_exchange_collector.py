"""ndnps.exchanges.ps.collector: when the PS sends a collect Interest, how long it may be held, and
whether its answer was held, from a finish-time history and a fake path (no clock needed:
every instant is a float)."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from ndnps.exchanges.ps.collector import (FinishTimeEstimator, held_lifetime, round_trip, send_at,
                                          was_held)


@dataclass
class FakePath:
    min_rtt: float | None = None
    reorder_floor: float = 0.002
    smoothed: float = 0.0
    ceiling: float = 1e9

    def srtt(self) -> float:
        return self.smoothed

    def bounded(self, wait: float) -> float:
        return min(wait, self.ceiling)


def learnt(ready_after: float, n: int = 20) -> FinishTimeEstimator:
    est = FinishTimeEstimator()
    for _ in range(n + 1):                           # the first is its start-up: skipped
        est.observe(ready_after, 0.0, held=True)
    return est


def test_without_history_the_collect_is_sent_at_the_reference():
    assert send_at(FinishTimeEstimator(), 50.0) == 50.0


def test_with_history_it_is_sent_well_before_the_expected_finish():
    est = learnt(0.2)
    at = send_at(est, 50.0)
    assert at == 50.0 + est.send_delay()
    assert 50.0 < at <= 50.0 + 0.5 * 0.2


def test_first_lifetime_without_history_is_a_few_round_trips():
    est = FinishTimeEstimator()
    # no round trip measured: the default 10 ms, 4 of them + the floor, at least 50 ms
    assert held_lifetime(est, 0.0, 0.0, FakePath(), 10.0) == pytest.approx(0.05)
    assert held_lifetime(est, 0.0, 0.0, FakePath(min_rtt=0.03), 10.0) == pytest.approx(0.12)
    # the smoothed round trip when there is one; the fetcher's bound; the tail floor
    path = FakePath(min_rtt=0.01, smoothed=0.1)
    assert held_lifetime(est, 0.0, 0.0, path, 10.0, tail_floor=0.001) == pytest.approx(0.401)
    path.ceiling = 0.25
    assert held_lifetime(est, 0.0, 0.0, path, 10.0) == pytest.approx(0.25)


def test_first_lifetime_reaches_past_the_expected_finish_and_is_capped():
    est = learnt(2.0)
    dev = est.stats.dev
    path = FakePath(min_rtt=0.01, smoothed=0.01)
    # sent 0.5 s after the reference: the finish is 1.5 s (+ 2 deviations) away, + the margin
    assert held_lifetime(est, 10.0, 10.5, path, 60.0) == pytest.approx(1.5 + 2 * dev + 0.05)
    assert held_lifetime(est, 10.0, 10.5, path, 1.0) == 1.0      # collect_lifetime caps it
    # sent after the expected finish: the margin alone
    assert held_lifetime(est, 10.0, 20.0, path, 60.0) == pytest.approx(0.05)


def test_an_answer_is_taken_as_held_beyond_two_round_trips_and_2_ms():
    assert round_trip(FakePath()) == 0.01 and round_trip(FakePath(min_rtt=0.003)) == 0.003
    assert not was_held(0.0219, 0.01)
    assert was_held(0.0221, 0.01)


def test_censored_answers_pull_an_overestimate_down():
    est = learnt(1.0)
    before = est.send_delay()
    for _ in range(10):
        sent = est.send_delay()
        est.observe(ready_after=sent + 0.001, sent_after=sent, held=False)
    assert est.send_delay() < before
