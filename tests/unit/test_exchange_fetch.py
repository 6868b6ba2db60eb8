"""ndnps.exchanges.transport.fetch on a fake clock, without an event loop: the transfer's actions
for each event (the window, RACK's and the tail probe's early retransmissions, per-segment RTO
backoff, Nack pauses, bounded tries, held Interests, the end of an object)."""
from __future__ import annotations

import pytest

from ndnps.exchanges.transport.fetch import SegmentTransfer
from ndnps.exchanges.transport.flight import Cancel, FetchError, Flight, Send
from ndnps.exchanges.transport.loss import nack_delay
from ndnps.exchanges.transport.path import FetchPath
from ndnps.ndn.rto import RtoEstimator


def path(**kw) -> FetchPath:
    kw.setdefault("rto", RtoEstimator(initial=0.2, min_rto=0.01, max_rto=4.0))
    # these test the loss recovery rules, from a full window: the congestion window's own
    # start, growth and decrease are tested in test_exchanges_window
    kw.setdefault("initial_window", kw.get("window", 16))
    return FetchPath(**kw)


def transfer(p: FetchPath | None = None, **kw) -> SegmentTransfer:
    return SegmentTransfer(p or path(), lambda s: f"/obj/seg={s}", **kw)


def sent(actions) -> list[Flight]:
    return [a.flight for a in actions if isinstance(a, Send)]


def answer(t: SegmentTransfer, flight: Flight, now: float, final: int | None = None):
    out = t.on_data(flight, b"x" * 10, final, now)
    t.arrived.clear()
    return out + t.settle(now)


def test_at_most_window_interests_in_flight_and_the_window_refills():
    t = transfer(path(window=3))
    flights = sent(t.want(range(5), 0.0))
    assert [f.seg for f in flights] == [0, 1, 2]
    more = sent(answer(t, flights[0], 0.01))
    assert [f.seg for f in more] == [3]
    assert not t.finished


def test_the_whole_object_from_segment_zero_by_its_final_block_id():
    t = transfer(to_final=True)
    (first,) = sent(t.want([0], 0.0))
    rest = sent(answer(t, first, 0.01, final=2))
    assert [f.seg for f in rest] == [1, 2]
    for i, f in enumerate(rest):
        answer(t, f, 0.02 + i * 0.001, final=2)
    assert t.result is not None and sorted(t.result) == [0, 1, 2]
    assert t.next_timer() is None


def test_rack_re_asks_a_segment_once_a_later_one_came_and_the_window_passed():
    p = path(window=8)
    t = transfer(p)
    flights = sent(t.want(range(3), 0.0))
    # segment 0 is lost; 1 and 2 come back after 10 ms
    answer(t, flights[1], 0.010)
    answer(t, flights[2], 0.010)
    due = t.next_timer()
    assert due is not None and due > 0.010                 # the reordering window first
    out = t.on_timer(due)
    (again,) = sent(out)
    assert again.seg == 0 and Cancel(flights[0]) in out
    assert p.stats.fast_retransmissions == 1 and p.stats.retransmissions == 1


def test_the_tail_probe_re_asks_the_last_interest_after_two_round_trips():
    p = path(window=8)
    p.rto.observe(0.01)                                     # srtt 10 ms
    t = transfer(p)
    (only,) = sent(t.want([0], 0.0))
    due = t.next_timer()
    assert due == pytest.approx(2 * 0.01 + max(p.reorder_floor, 0.001), abs=0.002)
    (probe,) = sent(t.on_timer(due))
    assert probe.seg == 0 and p.stats.fast_retransmissions == 1


def test_an_expiry_doubles_that_segments_lifetime_only():
    p = path(window=8, max_fast=0)                          # timeouts alone
    t = transfer(p)
    a, b = sent(t.want([0, 1], 0.0))
    assert a.life == b.life == pytest.approx(0.2)
    (again,) = sent(t.on_expired(a, 0.2))
    assert again.seg == 0 and again.life == pytest.approx(0.4)
    (c,) = sent(t.want([2], 0.2))                           # another segment: not backed off
    assert c.life == pytest.approx(0.2) and p.stats.timeouts == 1


def test_a_held_interest_re_asked_thousands_of_times_keeps_a_bounded_lifetime():
    """A collect held while its producer computes for seconds is re-asked every few round
    trips: after 2,000 expiries its lifetime is still max_life at most (2 ** 2000 overflowed a
    float: the PS's fetch died in a callback at 20 % loss)."""
    t = transfer(path(max_fast=0, max_tries=10_000, patience=1e6), held=True, life=0.004,
                 max_life=2.0)
    (f,) = sent(t.want([0], 0.0))
    now = 0.0
    for _ in range(2000):
        now += f.life
        (f,) = sent(t.on_expired(f, now))
    assert 0 < f.life <= 2.0 and t.error is None


def test_tries_are_bounded_and_the_failure_says_why():
    t = transfer(path(max_fast=0), tries=3)
    (f,) = sent(t.want([0], 0.0))
    now = 0.0
    for _ in range(2):
        now += f.life
        (f,) = sent(t.on_expired(f, now))
    now += f.life
    t.on_expired(f, now)
    assert isinstance(t.error, FetchError)
    assert "/obj/seg=0: no valid Data after 3 tries over 1.40 s (the last: no answer)" \
        in str(t.error)
    assert t.finished and t.next_timer() is None


def test_with_a_patience_the_tries_go_on_until_it_passes_and_the_failure_says_so():
    """The PS's sums: 3 tries *and* collect_lifetime since the first (fetch.py's docstring);
    a quick path has more than 3 by then, and the message says how many and over how long."""
    t = transfer(path(max_fast=0, max_tries=3, patience=1.0))
    (f,) = sent(t.want([0], 0.0))
    now, expiries = 0.0, 0
    while t.error is None:
        now += 0.1                                   # each expires soon: a quick path
        out = t.on_expired(f, now)
        expiries += 1
        if t.error is None:
            (f,) = sent(out)
    assert expiries > 3 and now >= 1.0
    assert f"no valid Data after {expiries} tries over {now:.2f} s" in str(t.error)


def test_a_nack_pauses_the_segment_then_asks_again():
    p = path()
    t = transfer(p)
    (f,) = sent(t.want([0], 0.0))
    assert t.on_nack(f, 150, 0.001) == []
    due = t.next_timer()
    assert due == pytest.approx(0.001 + nack_delay(0, min(f.life, p.rto.ceiling)))
    assert sent(t.on_timer(due - 0.0001)) == []
    (again,) = sent(t.on_timer(due))
    assert again.seg == 0 and p.stats.nacks == 1


def test_a_rejected_answer_is_asked_again_must_be_fresh_and_max_rejected_ends_it():
    t = transfer(max_rejected=2)
    (f,) = sent(t.want([0], 0.0))
    assert not f.fresh
    (again,) = sent(t.on_rejected(f, 0.01))
    assert again.fresh                                      # a cache cannot serve it again
    t.on_rejected(again, 0.02)
    assert isinstance(t.error, FetchError) and t.error.rejected


def test_held_interests_expire_without_loss_before_the_producer_is_ready():
    p = path()
    t = transfer(p, life=0.05, max_life=0.8, held=True, to_final=True)
    (f,) = sent(t.want([0], 0.0))
    assert f.held and t.next_timer() is None                # no loss detection while held
    (again,) = sent(t.on_expired(f, 0.05))
    assert p.stats.held_timeouts == 1 and p.stats.timeouts == 0
    answer(t, again, 0.3, final=0)                          # ready: the first Data
    assert t.ready_at == 0.3 and t.result is not None
    assert p.rto.stats.mean is None                         # a held wait is no RTT sample


def test_a_segment_that_came_another_way_cancels_its_interest():
    t = transfer()
    a, b = sent(t.want([0, 1], 0.0))
    assert t.have(0, 0.001) == [Cancel(a)]
    answer(t, b, 0.01)
    assert t.result is not None and sorted(t.result) == [1]


def test_retry_now_asks_everything_missing_again_without_backoff():
    t = transfer(path(max_fast=0))
    (f,) = sent(t.want([0], 0.0))
    (g,) = sent(t.on_expired(f, 0.2))
    assert g.life == pytest.approx(0.4)
    out = t.retry_now(0.25)
    (h,) = sent(out)
    assert Cancel(g) in out and h.life == pytest.approx(0.2)    # the backoff is forgotten


def test_a_deadline_replaces_the_tries():
    t = transfer(path(max_fast=0), deadline=1.0)
    (f,) = sent(t.want([0], 0.0))
    assert f.life <= 0.5                                    # never the whole time left
    now = 0.0
    while not t.finished:
        now += f.life
        out = sent(t.on_expired(f, now))
        if out:
            (f,) = out
    assert isinstance(t.error, FetchError) and "deadline" in str(t.error)


def test_nacks_due_together_after_one_ends_the_transfer_are_dropped_quietly():
    t = transfer(path(max_fast=0), tries=1)
    a, b = sent(t.want([0, 1], 0.0))
    t.on_nack(a, 150, 0.0)
    t.on_nack(b, 150, 0.0)
    due = t.next_timer()
    assert due is not None
    t.on_timer(due)                                       # segment 0's retry fails it all
    assert isinstance(t.error, FetchError) and t.next_timer() is None


def test_the_rto_makes_room_for_a_queue_seen_lately():
    """A round trip far above the smoothed one (a queue that filled at once) floors the RTO
    for PEAK_WINDOW seconds, then is forgotten."""
    from ndnps.exchanges.transport.path import PEAK_MARGIN, PEAK_WINDOW, FetchPath
    f = FetchPath()
    for i in range(50):
        f.observe(0.004, now=i * 0.01)
    short = f.base_rto()
    f.observe(0.08, now=1.0)
    for i in range(50):
        f.observe(0.004, now=1.0 + i * 0.01)
    assert short < 0.05 and f.base_rto() == pytest.approx(PEAK_MARGIN * 0.08)
    f.observe(0.004, now=1.0 + PEAK_WINDOW + 0.1)
    assert f.base_rto() == pytest.approx(short, abs=0.002)


def test_a_declined_segment_lands_as_congestion_without_a_round_trip():
    # an aggregator with no free slot Nacks at once and the owner sums that segment itself:
    # the segment is done, the window is cut, and the refusal's quick return is no RTT sample
    p = path(window=8, initial_window=8)
    t = transfer(p)
    flights = sent(t.want(range(3), 0.0))
    window = t.win.cwnd
    out = t.on_data(flights[0], b"", None, 0.001, declined=True)
    assert [s.number for s in t.arrived] == [0] and t.arrived[0].content == b""
    t.arrived.clear()
    out += t.settle(0.001)
    assert t.win.cwnd < window and p.stats.window_cuts == 1
    assert p.min_rtt is None and p.rto.stats.samples == 0
    answer(t, flights[1], 0.050)
    answer(t, flights[2], 0.051)
    assert t.result is not None and sorted(t.result) == [0, 1, 2]
    assert p.min_rtt == pytest.approx(0.050)
