"""ndnps.exchanges.transport.window on its own and inside a transfer
(ndnps.exchanges.transport.fetch), on a fake clock: slow start from the initial window, additive
increase, the cap, halving at most once per round trip (conservative window adaptation) on a mark,
a loss RACK detects behind a queue (not a tail probe, nor a lossy link's), a backed-off RTO or a
Congestion Nack; one window per producer shared by its transfers; segments given up after the job's
patience, not a count."""
from __future__ import annotations

import pytest

from ndnps.exchanges.transport.fetch import SegmentTransfer
from ndnps.exchanges.transport.flight import FetchError, Flight, Send
from ndnps.exchanges.transport.loss import NACK_CONGESTION
from ndnps.exchanges.transport.path import FetchPath
from ndnps.exchanges.transport.window import (INITIAL_WINDOW, MAX_FLOWS, MIN_WINDOW,
                                              CongestionWindow, Windows)
from ndnps.ndn.rto import RtoEstimator

RTT = 0.01


# ---- the window alone ---------------------------------------------------------------------------

def round_trip(w: CongestionWindow, marked: int = 0) -> int:
    """One round trip of a pipeline with plenty to send: the window filled, then each answer
    (the first `marked` of them marked) lands and is replaced at once, as a transfer refills
    (those go out in the next round trip: in flight at the end).  How many were answered."""
    epochs = [w.sent() for _ in range(w.room)]
    for i, epoch in enumerate(epochs):
        w.landed()
        w.on_data(epoch, marked=i < marked)
        for _ in range(w.room):
            w.sent()
    while w.in_flight:                      # (the next round trip's are left unanswered)
        w.landed()
    return len(epochs)


def test_slow_start_doubles_from_the_initial_window_per_round_trip_up_to_the_cap():
    w = CongestionWindow(maximum=16)
    assert w.cwnd == INITIAL_WINDOW == 2 and w.room == 2
    assert [round_trip(w) for _ in range(5)] == [2, 4, 8, 16, 16]
    assert w.cwnd == 16                                     # the cap: training.window


def test_a_mark_halves_the_window_once_per_round_trip_then_it_grows_one_per_round_trip():
    w = CongestionWindow(maximum=64)
    for _ in range(3):
        round_trip(w)                                       # 2 -> 16
    assert w.cwnd == 16
    round_trip(w, marked=16)                                # a whole window marked: one cut
    assert w.cwnd == 8 and w.ssthresh == 8 and w.epoch == 1
    round_trip(w)                                           # congestion avoidance: +1/cwnd
    assert w.cwnd == pytest.approx(9, abs=0.1)
    round_trip(w, marked=1)                                 # sent after the cut: cuts again
    assert w.epoch == 2 and w.ssthresh == pytest.approx(4.5, abs=0.1)


def test_signals_from_interests_sent_before_the_last_decrease_are_ignored():
    w = CongestionWindow(maximum=16, initial=8)
    old = [w.sent() for _ in range(4)]
    assert w.congested(old[0]) and w.cwnd == 4              # an RTO
    for epoch in old[1:]:
        assert not w.congested(epoch)                       # the same queue: no news
    new = w.sent()
    assert w.congested(new) and w.cwnd == 2


def test_the_window_never_falls_below_one_interest():
    w = CongestionWindow(maximum=16, initial=1)
    for _ in range(5):
        w.congested(w.epoch)
    assert w.cwnd == MIN_WINDOW and w.room == 1
    round_trip(w)                                           # slow start again (ssthresh 2)
    assert w.cwnd == 2


def test_a_window_not_used_does_not_grow():
    w = CongestionWindow(maximum=16, initial=8)
    for _ in range(10):                                     # one Interest at a time
        epoch = w.sent()
        w.landed()
        w.on_data(epoch, marked=False)
    assert w.cwnd == 8


def test_a_lower_cap_clamps_the_window_and_restart_forgets_an_outage():
    w = CongestionWindow(maximum=16, initial=2)
    round_trip(w)
    w.set_maximum(3)
    round_trip(w)
    assert w.cwnd == 3
    w.congested(w.epoch)
    w.congested(w.epoch)
    assert w.cwnd == 1
    stale = w.epoch
    w.restart()
    assert w.cwnd == 2 and w.ssthresh == float("inf")
    assert not w.congested(stale)                           # an expiry from the outage


def test_windows_one_per_flow_bounded_idle_ones_forgotten_first():
    ws = Windows(maximum=8, limit=3)
    a, b = ws("a"), ws("b")
    assert ws("a") is a and a is not b
    a.sent()                                                # a busy, b idle
    ws("c")
    ws("d")                                                 # over the limit: b goes, a stays
    assert len(ws) == 3 and ws("a") is a and ws("b") is not b
    ws.set_maximum(4)
    assert all(ws(k).maximum == 4 for k in "acd") and MAX_FLOWS >= 256


# ---- inside a transfer --------------------------------------------------------------------------

def path(**kw) -> FetchPath:
    kw.setdefault("rto", RtoEstimator(initial=0.2, min_rto=0.01, max_rto=4.0))
    return FetchPath(**kw)


def transfer(p: FetchPath, flow: str = "ps", **kw) -> SegmentTransfer:
    return SegmentTransfer(p, lambda s: f"/{flow}/obj/seg={s}", flow=flow, **kw)


def sent(actions) -> list[Flight]:
    return [a.flight for a in actions if isinstance(a, Send)]


def answer(t: SegmentTransfer, flight: Flight, now: float, marked: bool = False,
           final: int | None = None) -> list[Flight]:
    out = t.on_data(flight, b"x" * 10, final, now, marked=marked)
    t.arrived.clear()
    return sent(out + t.settle(now))


def test_a_transfer_starts_with_two_interests_and_slow_starts():
    p = path(window=16)
    t = transfer(p)
    out = sent(t.want(range(100), 0.0))
    assert [f.seg for f in out] == [0, 1]
    now, per_rtt = 0.0, []
    while out and len(per_rtt) < 5:
        now += RTT
        per_rtt.append(len(out))
        out = [g for f in out for g in answer(t, f, now)]
    assert per_rtt == [2, 4, 8, 16, 16]


def test_marked_data_halve_the_window_once_per_round_trip():
    p = path(window=16, initial_window=16)
    t = transfer(p)
    flights = sent(t.want(range(100), 0.0))
    assert len(flights) == 16
    for f in flights[:4]:                                   # four marks of one round trip
        answer(t, f, RTT, marked=True)
    assert t.win.cwnd == 8 and p.stats.marks == 4 and p.stats.window_cuts == 1
    assert len(t.flights) == 12                             # nothing sent: 12 > 8
    later = [g for f in flights[4:8] for g in answer(t, f, RTT)]
    assert later == []                                      # still 8 in flight
    more = [g for f in flights[8:] for g in answer(t, f, RTT)]
    assert more                                             # sent after the cut
    before = t.win.cwnd                                     # 8, +1/8 per Data since
    answer(t, more[0], 2 * RTT, marked=True)                # one round trip on: cuts again
    assert t.win.cwnd == pytest.approx(before / 2) and p.stats.window_cuts == 2


def test_a_backed_off_rto_cuts_the_window_a_first_expiry_or_a_held_one_does_not():
    p = path(window=16, initial_window=8, max_fast=0)
    t = transfer(p)
    a, b, *_ = sent(t.want(range(20), 0.0))
    (a2,) = sent(t.on_expired(a, a.life))                   # may be a busy host's spurious one
    (b2,) = sent(t.on_expired(b, b.life))
    assert t.win.cwnd == 8 and p.stats.timeouts == 2 and p.stats.window_cuts == 0
    t.on_expired(a2, a.life + a2.life)                      # the backed-off RTO too
    assert t.win.cwnd == 4 and p.stats.window_cuts == 1
    t.on_expired(b2, b.life + b2.life)                      # the same round trip
    assert t.win.cwnd == 4 and p.stats.window_cuts == 1
    h = transfer(p, flow="w1", life=0.05, max_life=0.8, held=True, to_final=True)
    (f,) = sent(h.want([0], 0.0))
    h.on_expired(f, 0.05)                                   # its producer was not ready
    assert h.win.cwnd == 8 and p.stats.held_timeouts == 1


def test_a_congestion_nack_cuts_the_window_another_nack_does_not():
    p = path(window=16, initial_window=8)
    t = transfer(p)
    a, b, *_ = sent(t.want(range(20), 0.0))
    t.on_nack(a, 150, 0.001)                                # NoRoute
    assert t.win.cwnd == 8
    t.on_nack(b, NACK_CONGESTION, 0.001)
    assert t.win.cwnd == 4 and p.stats.window_cuts == 1


def lose_the_first_of_three(p: FetchPath, flow: str, now: float, rtt: float) -> Flight:
    """Segment 0 lost, 1 and 2 answered after `rtt`: RACK re-asks 0."""
    t = transfer(p, flow=flow)
    flights = sent(t.want(range(3), now))
    answer(t, flights[1], now + rtt)
    answer(t, flights[2], now + rtt)
    (again,) = sent(t.on_timer(t.next_timer()))
    assert again.seg == 0
    return t


def test_a_loss_rack_detects_behind_a_queue_cuts_the_window():
    p = path(window=8, initial_window=8)
    p.rto.observe(RTT)
    p.min_rtt = RTT
    t = lose_the_first_of_three(p, "w1", 0.0, RTT)          # no queue: a lossy link's
    assert t.win.cwnd == 8 and p.stats.window_cuts == 0
    t = lose_the_first_of_three(p, "w2", 1.0, RTT + 0.02)   # a 20 ms queue overflowed
    assert t.win.cwnd == 4 and p.stats.window_cuts == 1
    p.loss_cuts = False                                     # marks and RTOs alone
    t = lose_the_first_of_three(p, "w3", 2.0, RTT + 0.02)
    assert t.win.cwnd == 8 and p.stats.window_cuts == 1


def test_a_tail_probe_does_not_cut_the_window():
    p = path(window=8, initial_window=8)
    p.rto.observe(RTT)
    p.min_rtt = RTT / 4
    t = transfer(p)
    sent(t.want([0], 0.0))
    (probe,) = sent(t.on_timer(t.next_timer()))             # nothing after it: a tail probe
    assert probe.seg == 0 and p.stats.fast_retransmissions == 1
    assert t.win.cwnd == 8 and p.stats.window_cuts == 0


def test_transfers_towards_one_producer_share_its_window_each_keeps_one_interest_out():
    p = path(window=16)
    bulk, probe = transfer(p), transfer(p)
    assert bulk.win is probe.win
    assert len(sent(bulk.want(range(100), 0.0))) == 2       # the window is full
    assert len(sent(probe.want([7], 0.0))) == 1             # but one Interest of its own
    assert bulk.win.in_flight == 3
    other = transfer(p, flow="w2")                          # another producer: its own
    assert len(sent(other.want(range(10), 0.0))) == 2
    probe.close()
    bulk.close()
    assert bulk.win.in_flight == 0 and other.win.in_flight == 2


def test_a_segment_is_tried_for_the_paths_patience_not_a_count_of_tries():
    p = path(window=4, max_fast=0, max_tries=8, patience=30.0)
    t = transfer(p)
    (f,) = sent(t.want([0], 0.0))
    now, tries = 0.0, 1
    while not t.finished:
        now += f.life
        out = sent(t.on_expired(f, now))
        if out:
            (f,) = out
            tries += 1
    assert isinstance(t.error, FetchError) and now >= 30.0 and tries > 8
    assert f.life <= p.rto.ceiling                          # backed off, but bounded


def test_a_segment_whose_every_answer_failed_its_signature_check_fails_at_its_tries():
    p = path(max_tries=3, patience=30.0)
    t = transfer(p)
    (f,) = sent(t.want([0], 0.0))
    now = 0.0
    while not t.finished:
        now += 0.01
        out = sent(t.on_rejected(f, now))
        if out:
            (f,) = out
    assert isinstance(t.error, FetchError) and t.error.rejected and now < 1.0


def test_the_paths_window_is_the_cap_of_every_producers_window():
    p = path(window=16)
    t = transfer(p)
    p.window = 4                                            # the PS's knob, after the content
    assert t.win.maximum == 4 and p.window == 4
    with pytest.raises(ValueError):
        p.window = 0
