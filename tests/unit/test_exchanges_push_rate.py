"""The push rate controller (ndnps.exchanges.transport.push_rate): every rule, with made-up
reports."""
from __future__ import annotations

import pytest

from ndnps.exchanges.transport.push_rate import BIN, PushMeter, PushRate, PushReport

MB = 1e6 / 8                     # bytes per second in one Mbit/s


def report(version: int, rate_mbps: float, *, marked: int = 0, missing: int = 0,
           segments: int = 100, seg_bytes: int = 8800) -> PushReport:
    """A report of `segments` pushed segments delivered at `rate_mbps`."""
    span = (segments - 1) * seg_bytes / (rate_mbps * MB)
    return PushReport(version, segments, segments * seg_bytes, marked, missing, span)


def test_delivered_rate_is_measured_between_first_and_last_segment():
    r = report(1, 100.0)
    assert r.delivered() == pytest.approx(100 * MB)
    assert PushReport(1, 1, 8800, 0, 0, 0.0).delivered() is None


def test_wire_round_trip_and_malformed_reports_are_ignored():
    r = report(3, 50.0, marked=2, missing=1)
    assert PushReport.from_wire(r.to_wire()) == r
    for bad in (None, 7, {}, {"v": 1}, {**r.to_wire(), "m": -1}, {**r.to_wire(), "s": "x"},
                {**r.to_wire(), "s": float("nan")}):
        assert PushReport.from_wire(bad) is None


def test_unlimited_until_a_mark_then_just_under_the_delivered_rate():
    c = PushRate()
    assert c.pushing(1, limited=False) == 0.0
    c.on_report(report(1, 100.0, marked=3))
    assert c.rate == pytest.approx(0.9 * 100 * MB)
    assert c.counters.decreases == 1


def test_one_decrease_per_round_reports_on_older_pushes_are_ignored():
    c = PushRate(initial_mbps=200.0)
    c.pushing(1, limited=True)
    c.pushing(2, limited=True)                  # async: two pushes out before any report
    c.on_report(report(1, 100.0, marked=1))
    after_first = c.rate
    c.on_report(report(2, 80.0, marked=1))      # pushed at the old rate too: no second cut
    c.on_report(report(1, 60.0, marked=1))
    assert c.rate == after_first
    assert c.counters.decreases == 1 and c.counters.ignored == 2
    c.pushing(3, limited=True)
    c.on_report(report(3, 70.0, marked=1))      # pushed after the cut: counts
    assert c.rate == pytest.approx(0.9 * 70 * MB)


def test_clean_limited_push_increases_gently_unlimited_by_the_pacer_does_not():
    c = PushRate(initial_mbps=100.0)
    c.pushing(1, limited=True)
    c.on_report(report(1, 100.0))
    assert c.pushing(2, limited=True) == pytest.approx(105 * MB)
    c.on_report(report(2, 100.0))
    assert c.pushing(3, limited=False) == pytest.approx(105 * MB)   # the producer was slower
    assert c.counters.increases == 1


def test_a_push_the_path_could_not_keep_up_with_is_no_reason_to_go_faster():
    c = PushRate(initial_mbps=100.0)
    c.pushing(1, limited=True)
    c.on_report(report(1, 20.0))                # no mark, no loss: a deep queue took it
    assert c.pushing(2, limited=True) == pytest.approx(100 * MB)
    assert c.counters.decreases == c.counters.increases == 0


def test_no_increase_without_a_report_or_after_a_congested_one():
    c = PushRate(initial_mbps=100.0)
    c.pushing(1, limited=True)
    assert c.pushing(2, limited=True) == pytest.approx(100 * MB)    # nothing heard of 1
    c.on_report(report(2, 100.0))
    c.on_report(report(2, 90.0, marked=1))
    c.pushing(3, limited=True)
    assert c.rate == pytest.approx(0.9 * 90 * MB)


def test_random_loss_at_the_pace_sent_is_no_congestion():
    c = PushRate(initial_mbps=100.0)
    c.pushing(1, limited=True)
    c.on_report(report(1, 99.0, missing=5))     # delivered at the pace: a lossy link
    assert c.rate == pytest.approx(100 * MB)
    assert c.counters.decreases == 0
    c.pushing(2, limited=True)
    c.on_report(report(2, 60.0, missing=5))     # delivered far slower: a queue overflowed
    assert c.rate == pytest.approx(0.9 * 60 * MB)


def test_one_consumer_falling_behind_does_not_hold_the_push_back():
    """16 consumers on 2 cores: one reads its pushed segments late (its delivered rate looks
    like 35 Mbit/s) and loses a few — its own CPU, not the path: up to 2 % are no signal; more
    cut the push at most by half, and it comes back to the last clean rate in a few versions;
    a lagging minority does not block that."""
    c = PushRate(initial_mbps=80.0)
    for v in (1, 2):
        c.pushing(v, limited=True)
        for _ in range(16):
            c.on_report(report(v, 80.0 if v == 1 else 79.0))
    assert c.rate == pytest.approx(80 * 1.05 * MB)           # v1 clean: one gentle increase
    c.on_report(report(2, 35.0, missing=2))                 # 2 of 102: tolerated
    assert c.rate == pytest.approx(84 * MB) and c.counters.decreases == 0
    c.on_report(report(2, 35.0, missing=6))                 # 6 of 106: a cut, at most half
    assert c.rate == pytest.approx(0.5 * 84 * MB)
    rates = []
    for v in range(3, 9):
        rates.append(c.pushing(v, limited=True) / MB)
        for i in range(16):                                  # 3 of 16 late every version
            c.on_report(report(v, 30.0 if i < 3 else rates[-1]))
    assert rates[:2] == pytest.approx([42, 42 * 1.25])       # recovering towards 84 ...
    assert rates[-2:] == pytest.approx([84, 84 * 1.05])      # ... then probing gently on
    assert c.counters.decreases == 1


def test_when_most_consumers_lag_the_rate_holds():
    c = PushRate(initial_mbps=80.0)
    c.pushing(1, limited=True)
    for i in range(4):
        c.on_report(report(1, 50.0 if i else 80.0))          # 3 of 4: a queue took it
    assert c.pushing(2, limited=True) == pytest.approx(80 * MB)


def test_after_marks_the_rate_probes_gently_again():
    c = PushRate(initial_mbps=100.0)
    c.pushing(1, limited=True)
    c.on_report(report(1, 100.0))
    c.pushing(2, limited=True)                               # 105: clean before
    c.on_report(report(2, 90.0, marked=3))                   # the path marks: 81
    assert c.rate == pytest.approx(81 * MB)
    c.pushing(3, limited=True)
    c.on_report(report(3, 81.0))
    assert c.pushing(4, limited=True) == pytest.approx(81 * 1.05 * MB)   # not x1.25


def test_a_loss_on_an_unlimited_push_lands_under_the_delivered_rate():
    c = PushRate()
    c.pushing(1, limited=False)
    c.on_report(report(1, 60.0, missing=3))
    assert c.rate == pytest.approx(0.9 * 60 * MB)


def test_the_slowest_branch_sets_the_pace_within_the_floor():
    c = PushRate(initial_mbps=100.0, floor_mbps=10.0)
    c.pushing(1, limited=True)
    c.on_report(report(1, 100.0))               # a fast branch: clean
    c.on_report(report(1, 40.0, marked=4))      # the slow branch: at most halved a round
    assert c.rate == pytest.approx(50 * MB)
    c.pushing(2, limited=True)
    c.on_report(report(2, 40.0, marked=4))      # then just under it
    assert c.rate == pytest.approx(0.9 * 40 * MB)
    for v in (3, 4, 5):                         # a pathological branch: held at the floor
        c.pushing(v, limited=True)
        c.on_report(report(v, 2.0, marked=4))
    assert c.rate == pytest.approx(10 * MB)


def test_one_consumer_stalled_for_a_moment_halves_the_push_at_most():
    c = PushRate(initial_mbps=70.0)
    c.pushing(1, limited=True)
    c.on_report(report(1, 5.0, marked=2))       # descheduled mid-push: 5 of the path's 70
    assert c.rate == pytest.approx(35 * MB)


def test_ceiling_bounds_increase():
    c = PushRate(initial_mbps=100.0, ceiling_mbps=102.0)
    c.pushing(1, limited=True)
    c.on_report(report(1, 100.0))
    assert c.pushing(2, limited=True) == pytest.approx(102 * MB)


def test_start_from_the_content_serving_rate():
    c = PushRate()
    t = 0.0
    for i in range(12):                         # 1.2 s of content at ~80 Mbit/s: a first
        burst = 400 if i == 0 else 40 if i == 3 else 80     # burst, one slow bin
        c.on_served(t + i * BIN, int(burst * MB * BIN))
    assert c.served_rate() == pytest.approx(80 * MB)
    assert c.pushing(1, limited=False) == pytest.approx(0.9 * 80 * MB)


def test_too_little_content_to_tell_leaves_the_push_unlimited():
    c = PushRate()
    for i in range(4):
        c.on_served(i * BIN, 100_000)
    assert c.served_rate() is None
    assert c.pushing(1, limited=False) == 0.0


def test_report_about_an_unknown_version_is_ignored():
    c = PushRate(initial_mbps=50.0)
    c.on_report(report(9, 10.0, marked=1))
    assert c.rate == pytest.approx(50 * MB) and c.counters.ignored == 1


@pytest.mark.parametrize("capacity", [20.0, 100.0, 1000.0])
def test_converges_under_a_bottleneck_and_stays_near_it(capacity: float):
    """A fluid bottleneck: a push faster than `capacity` is marked and delivered at it."""
    c = PushRate()
    rates = []
    for v in range(1, 41):
        rate = c.pushing(v, limited=True)
        sent = rate / MB if rate else float("inf")
        rates.append(min(sent, capacity))
        c.on_report(report(v, min(sent, capacity), marked=int(sent > capacity)))
    tail = rates[5:]
    assert min(tail) >= 0.85 * capacity
    assert sum(tail) / len(tail) >= 0.92 * capacity


def test_bad_parameters_are_refused():
    for kw in ({"backoff": 1.0}, {"increase": 0.9}, {"floor_mbps": 0.0}, {"initial_mbps": -1.0},
               {"recover": 1.01}):
        with pytest.raises(ValueError):
            PushRate(**kw)


def test_meter_reports_what_came_by_the_push():
    m = PushMeter(keep=2)
    for i, seg in enumerate([0, 1, 1, 3]):       # segment 1 twice, segment 2 lost
        m.on_pushed(1.0 + 0.01 * i, 5, seg, 8800, marked=seg == 3, final=3)
    r = m.report(5)
    assert r == PushReport(5, 3, 3 * 8800, 1, 1, pytest.approx(0.03))
    assert m.report(6) is None
    m.on_pushed(2.0, 6, 0, 10, False)
    assert m.report(6) is None                   # no segment said how many there are
    m.on_pushed(3.0, 7, 0, 10, False, final=0)   # bounded: version 5 forgotten
    assert m.report(5) is None and m.report(7) is not None
