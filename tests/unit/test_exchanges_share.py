"""The share controller's decision rule (ndnps.exchanges.sharing.decision) on crafted
timelines: times are plain numbers (a fake clock)."""
from __future__ import annotations

import pytest

from ndnps.exchanges.sharing.decision import (SCORES, UNMEASURED, JobState, decide, shortest_round,
                                              time_saved)


def job(name: str, round_s: float = 1.0, period: float = 4.0, last: float | None = 0.0,
        ordinary: float = 2.0, granted: float | None = None) -> JobState:
    return JobState(name, round_s, period, last, ordinary, granted)


def test_s1_another_job_holding_the_aggregators_means_the_ordinary_way():
    a, b = job("a"), job("b")
    assert decide(a, [b], holder="b", now=10.0) is False
    assert decide(a, [b], holder="a", now=10.0) is True      # its own (a round still held)


def test_s2_free_and_nobody_arriving_meanwhile_means_use_them():
    a = job("a", round_s=1.0)
    b = job("b", period=4.0, last=8.0)          # next round at 12.0, after a's ends (11.0)
    assert decide(a, [b], holder=None, now=10.0) is True
    fresh = job("c", last=None)                 # nothing measured yet: not expected
    assert decide(a, [fresh], holder=None, now=10.0) is True


def test_s2_a_round_overdue_is_about_to_arrive():
    """b's round was expected at 9.8 and has not started at 10.0: it is coming (a job's
    period varies), so a's round is scored against it; a job late by more than its period
    is taken as gone, and leaves the aggregators to a."""
    a = job("a", round_s=1.0, ordinary=1.1)                     # saves little
    b = job("b", round_s=1.0, period=4.0, last=5.8, ordinary=4.0)
    assert b.overdue(10.0) and not b.overdue(9.0)
    assert decide(a, [b], holder=None, now=10.0) is False       # s3: b scores higher
    gone = job("b", round_s=1.0, period=4.0, last=1.0, ordinary=4.0)   # expected at 5.0
    assert not gone.overdue(10.0)
    assert decide(a, [gone], holder=None, now=10.0) is True


def test_s2_a_round_whose_period_varies_may_arrive_early_or_late():
    """b's next round is expected at 11.5, a's round would end at 11.0: with a steady period b
    does not arrive meanwhile; with a period varying by 0.3 s (mean deviation) it may start
    from 10.9 on, so a's round is scored against it."""
    a = job("a", round_s=1.0, ordinary=1.1)
    steady = JobState("b", 1.0, 4.0, 7.5, 4.0, None, 0.0)
    jittery = JobState("b", 1.0, 4.0, 7.5, 4.0, None, 0.3)
    assert decide(a, [steady], holder=None, now=10.0) is True
    assert jittery.may_start(10.0, 11.0) and not steady.may_start(10.0, 11.0)
    assert decide(a, [jittery], holder=None, now=10.0) is False


def test_s3_a_round_arriving_meanwhile_is_scored_and_the_higher_wins():
    a = job("a", round_s=2.0, ordinary=3.0)     # saves 0.5 s per aggregator-second
    b = job("b", round_s=1.0, period=4.0, last=7.0, ordinary=4.0)   # at 11.0: saves 3
    assert decide(a, [b], holder=None, now=10.0) is False
    assert decide(b, [a], holder=None, now=11.0) is True
    # a tie goes to the round that is here now
    here = job("a", round_s=1.0, period=4.0, last=7.0, ordinary=2.0)
    same = job("c", round_s=1.0, period=4.0, last=7.0, ordinary=2.0)       # at 11.0
    assert time_saved(here, 10.5) == time_saved(same, 10.5)
    assert decide(here, [same], holder=None, now=10.5) is True


def test_ageing_keeps_a_job_from_starving():
    big = job("big", round_s=1.0, period=1.0, last=9.9, ordinary=4.0, granted=9.0)  # at 10.9
    recent = job("small", round_s=1.0, period=1.0, last=9.0, ordinary=2.0, granted=9.5)
    assert decide(recent, [big], holder=None, now=10.0) is False     # 1.1 < 3.2
    # fifteen periods without the aggregators: its score has grown past the big job's
    starved = job("small", round_s=1.0, period=1.0, last=9.0, ordinary=2.0, granted=-5.0)
    assert time_saved(starved, 10.0) > time_saved(big, 10.0)
    assert decide(starved, [big], holder=None, now=10.0) is True


def test_a_job_measured_as_gaining_nothing_is_not_starved_for_ever():
    slow_once = job("slow", round_s=0.6, period=0.4, last=9.6, ordinary=0.1, granted=0.0)
    other = job("other", round_s=0.07, period=0.25, last=9.9, ordinary=0.2, granted=9.9)
    assert time_saved(slow_once, 9.6) > time_saved(other, 9.6)   # 24 periods without them


def test_time_saved_before_and_after_measuring():
    assert time_saved(job("new", round_s=0.0), 0.0) == UNMEASURED      # measured once, first
    assert time_saved(job("a", round_s=1.0, ordinary=0.0), 0.0) == 1.0  # ordinary not known
    assert time_saved(job("a", round_s=2.0, ordinary=1.0), 0.0) == 0.0  # aggregating is slower


@pytest.mark.parametrize("name", sorted(SCORES))
def test_scores_are_pluggable_and_differ(name):
    score = SCORES[name]
    quick = job("quick", round_s=0.5, ordinary=0.6)
    slow = job("slow", round_s=2.0, ordinary=8.0)
    order = sorted([quick, slow], key=lambda j: score(j, 0.0), reverse=True)
    expected = ["slow", "quick"] if score is time_saved else ["quick", "slow"]
    assert [j.job for j in order] == expected
    assert score is not shortest_round or name == "shortest-round"
