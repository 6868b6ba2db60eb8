"""ndnps.exchanges.ps.membership: the workers' transition table, the re-offer timers and the quorum,
on a fake clock (plain floats)."""
from __future__ import annotations

import pytest

from ndnps.exchanges.ps.membership import (MAX_FIRST_OFFER, Event, Membership, Resync, follow,
                                           MembershipError, State)


def membership(**kw) -> Membership:
    args = {"min_workers": 2, "rejoin_interval": 1.0, "rejoin_timeout": 30.0,
            "fetch_patience": 4.0, **kw}
    m = Membership(**args)
    m.admit(["w1", "w2", "w3"])
    return m


def test_admit_indexes_the_workers_in_order_with_their_steps():
    m = Membership(min_workers=1, rejoin_interval=1.0, rejoin_timeout=10.0, fetch_patience=1.0)
    members = m.admit(["w3", "w1"], {"w1": 7})
    assert [(w.gpu, w.index, w.steps_done, w.state) for w in members] == [
        ("w3", 0, 0, State.LIVE), ("w1", 1, 7, State.LIVE)]
    assert m.get("w1") is members[1] and m.get("w9") is None


@pytest.mark.parametrize("step", ["fetched", "already", "accept", "decline", "lose_twice"])
def test_an_event_without_a_row_raises(step):
    m = membership()
    w = m.members[0]
    with pytest.raises(MembershipError, match="w1: no transition"):
        if step == "fetched":
            m.fetched(w)                     # LIVE: it fetched nothing to come back with
        elif step == "already":
            m.already_assigned(w)
        elif step == "accept":
            m.lose(w, 0.0, 3)
            m.accepted(w, 0.0)               # LOST: no offer was sent
        elif step == "decline":
            m.declined(w, 0.0)
        else:
            m.lose(w, 0.0, 3)
            m.lose(w, 0.0, 3)


def test_a_lost_worker_is_offered_the_task_after_a_backoff_per_loss():
    m = membership()
    w = m.members[1]
    assert m.lose(w, 100.0, version=7)
    assert w.state is State.LOST and w.lost_at == 7 and w.losses == 1
    assert m.wake_at(w) == 101.0                         # rejoin_interval x 2^0
    assert m.on_timer(w, 100.999) is None and w.state is State.LOST
    assert m.on_timer(w, 101.0) is Event.OFFER and w.state is State.OFFERED
    assert m.wake_at(w) is None                          # the owner awaits the answer
    m.already_assigned(w)                                # it still ran the job
    assert w.state is State.LIVE and m.wake_at(w) is None
    # lost again, and again: 2, then 4 intervals before the first offer
    m.lose(w, 200.0, version=9)
    assert m.wake_at(w) == 202.0 and w.lost_at == 9
    m.on_timer(w, 202.0)
    m.already_assigned(w)
    m.lose(w, 300.0, version=12)
    assert m.wake_at(w) == 304.0


def test_the_first_offer_waits_a_minute_at_most():
    m = membership(rejoin_interval=5.0, rejoin_timeout=1000.0)
    w = m.members[0]
    w.losses = 9
    m.lose(w, 0.0, 1)
    assert m.wake_at(w) == MAX_FIRST_OFFER == 60.0


def test_declined_offers_repeat_every_interval_until_rejoin_timeout():
    m = membership(rejoin_interval=2.0, rejoin_timeout=7.0)
    w = m.members[0]
    m.lose(w, 0.0, 1)
    offers = []
    now = 0.0
    while w.state is not State.GONE:
        now = m.wake_at(w)
        event = m.on_timer(w, now)
        if event is Event.OFFER:
            offers.append(now)
            m.declined(w, now + 0.5)                     # the answer took half a second
    # offered at 2, 4.5 (2.5 + 2) and 7 is past the deadline: given up
    assert offers == [2.0, 4.5] and now == 7.0
    assert not m.may_come_back(w) and m.on_timer(w, 100.0) is None
    with pytest.raises(MembershipError, match="'decline' in state GONE"):
        m.declined(w, 100.0)


def test_accepted_then_fetched_is_back_with_no_history():
    m = membership()
    w = m.members[2]
    w.estimator.observe(1.0, 0.0, True)
    w.estimator.observe(1.0, 0.0, True)
    old = w.estimator
    m.lose(w, 0.0, 4)
    m.on_timer(w, 1.0)
    m.accepted(w, 1.5)
    assert w.state is State.REJOINING and m.may_come_back(w)
    assert m.wake_at(w) == 5.5                           # fetch_patience to fetch its content
    assert m.on_timer(w, 5.0) is None
    m.fetched(w)
    assert w.state is State.LIVE and w.estimator is not old and w.estimator.expected is None
    assert w.losses == 1 and w.lost_at == 4              # kept: the rejoin's record says it


def test_accepted_but_never_fetched_is_offered_again_an_interval_later():
    m = membership(rejoin_interval=3.0)
    w = m.members[0]
    m.lose(w, 0.0, 1)
    m.on_timer(w, 3.0)
    m.accepted(w, 3.0)
    assert m.on_timer(w, 7.0) is Event.NOT_FETCHED and w.state is State.LOST
    assert m.wake_at(w) == 10.0
    assert m.on_timer(w, 10.0) is Event.OFFER


@pytest.mark.parametrize("kw, rejoin", [({"rejoin_timeout": 0.0}, True), ({}, False)])
def test_without_rejoin_a_lost_worker_is_gone_at_once(kw, rejoin):
    m = membership(**kw)
    w = m.members[0]
    assert not m.lose(w, 0.0, 2, rejoin=rejoin)
    assert w.state is State.GONE and m.wake_at(w) is None and not m.may_come_back(w)


def test_quorum_and_its_grace():
    m = membership(min_workers=2, rejoin_interval=1.0, rejoin_timeout=30.0)
    assert m.has_quorum() and len(m.live) == 3
    m.lose(m.members[0], 0.0, 1)
    assert m.has_quorum()
    m.lose(m.members[1], 0.0, 1)
    assert not m.has_quorum() and [w.gpu for w in m.live] == ["w3"]
    assert m.grace == 10.0                               # at least 10 s
    assert m.quorum_deadline(50.0) == 60.0
    assert membership(rejoin_interval=5.0).grace == 20.0             # 4 intervals
    assert membership(rejoin_interval=5.0, rejoin_timeout=12.0).grace == 12.0
    assert membership(rejoin_timeout=0.0).grace == 0.0               # no rejoin: no wait


# ---- the worker's side: follow --------------------------------------------------------------------

def _follow(**kw):
    args = dict(mode="sync", newest=10, newest_at=5.0, asked=6.0, step=10, ps_restarts=0,
                version=10, restarts=0, content_step=10)
    args.update(kw)
    return follow(**args)


def test_follow_a_resumed_ps_back_to_its_checkpoint():
    r = _follow(version=7, restarts=1)                     # sync: back to version 7
    assert r == Resync(adopt=True, rewind_to=7, ps_restarts=1)
    r = _follow(mode="async", version=7, restarts=1, content_step=7, step=10)
    assert r == Resync(adopt=True, rewind_to=7, ps_restarts=1)


def test_follow_ignores_content_older_than_a_push_that_came_after_asking():
    r = _follow(version=7, restarts=1, newest_at=6.5, asked=6.0)
    assert r == Resync(adopt=False, rewind_to=None, ps_restarts=1)


def test_follow_keeps_our_version_when_the_same_ps_made_its_content_before_its_last_push():
    assert _follow(version=8) == Resync(adopt=False, rewind_to=None, ps_restarts=0)
    assert _follow(version=10) == Resync(adopt=False, rewind_to=None, ps_restarts=0)


def test_follow_async_rewinds_the_steps_a_resumed_ps_lost_even_at_our_version():
    r = _follow(mode="async", version=10, restarts=2, ps_restarts=1, content_step=8, step=12)
    assert r == Resync(adopt=False, rewind_to=8, ps_restarts=1)


def test_follow_a_ps_ahead_of_us():
    assert _follow(version=12) == Resync(adopt=True, rewind_to=12, ps_restarts=0)
    assert _follow(mode="async", version=12, content_step=12) == \
        Resync(adopt=True, rewind_to=None, ps_restarts=0)
