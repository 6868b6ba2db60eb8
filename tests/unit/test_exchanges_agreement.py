"""The share controller's agreement with a job's nodes (ndnps.exchanges.sharing.agreement),
on a fake clock: plain calls, no I/O."""
from __future__ import annotations

import heapq
import random

import pytest

from ndnps.exchanges.sharing.agreement import Answer, Asker, Controller, Verdict

A, R, O = Verdict.AGGREGATE, Verdict.RETRY, Verdict.ORDINARY


def verdicts(answers: list[Answer]) -> dict[tuple[str, int], Verdict]:
    return {(a.node, a.round): a.verdict for a in answers}


def test_every_node_of_a_job_gets_the_same_decision_once_all_have_asked():
    c = Controller({"j": ["p1", "p2"]})
    assert c.ask("j", "p1", 0, 0.0) == []                  # p1 holds its lock: waits
    got = c.ask("j", "p2", 0, 0.1)
    assert verdicts(got) == {("p1", 0): A, ("p2", 0): A}    # free: use the aggregators
    assert c.holder == "j"
    # a retransmitted ask (its answer was lost) gets the recorded decision
    assert verdicts(c.ask("j", "p1", 0, 0.2)) == {("p1", 0): A}


def test_a_node_at_another_round_aborts_and_the_retries_agree_or_give_up():
    c = Controller({"j": ["p1", "p2"]}, backoff=0.1, tries=2)
    c.ask("j", "p1", 5, 0.0)
    got = c.ask("j", "p2", 6, 0.0)                          # they disagree: abort both
    assert {(a.node, a.round, a.verdict, a.retry_after) for a in got} == \
        {("p1", 5, R, 0.1), ("p2", 6, R, 0.1)}
    c.ask("j", "p1", 5, 0.1)
    got = c.ask("j", "p2", 6, 0.1)
    assert {a.retry_after for a in got} == {0.2}            # the backoff doubles
    c.ask("j", "p1", 5, 0.3)
    got = c.ask("j", "p2", 6, 0.3)                          # third abort > tries: round 5 ordinary
    assert verdicts(got)[("p1", 5)] is O
    assert c.jobs["j"].stats.gave_up == 1 and c.jobs["j"].stats.aborts == 3
    assert verdicts(c.ask("j", "p2", 5, 0.4)) == {("p2", 5): O}     # the same for a late node


def test_a_lost_ask_times_out_and_the_round_is_agreed_when_it_comes_again():
    c = Controller({"j": ["p1", "p2"]}, timeout=1.0, backoff=0.05)
    c.ask("j", "p1", 0, 0.0)                                # p2's ask is lost
    assert c.next_wake() == 1.0
    assert verdicts(c.tick(1.0)) == {("p1", 0): R}
    c.ask("j", "p2", 0, 1.01)                               # p2 asks again (its lifetime)
    assert verdicts(c.ask("j", "p1", 0, 1.05)) == {("p1", 0): A, ("p2", 0): A}


def test_a_round_some_node_never_asks_for_is_never_aggregated():
    """A node cut off from the controller decides the ordinary way by itself; the controller,
    never hearing it, gives the others the ordinary way too."""
    c = Controller({"j": ["p1", "p2"]}, timeout=0.5, backoff=0.05, tries=3)
    now, answers = 0.0, []
    for _ in range(10):
        answers += c.ask("j", "p1", 0, now)
        now += 0.6
        answers += c.tick(now)
    assert {a.verdict for a in answers if a.round == 0} <= {R, O}
    assert verdicts(c.ask("j", "p1", 0, now))[("p1", 0)] is O
    cut_off = Asker(0, 0.0, lifetime=0.5, patience=2.0)
    assert cut_off.send(0.0)
    cut_off.on_timeout(0.5)
    cut_off.tick(2.0)
    assert cut_off.decision is False and cut_off.why == "unreachable"


def test_s1_a_job_arriving_while_another_holds_goes_the_ordinary_way():
    c = Controller({"a": ["ps-a"], "b": ["ps-b"]})
    assert verdicts(c.ask("a", "ps-a", 0, 0.0)) == {("ps-a", 0): A}
    assert verdicts(c.ask("b", "ps-b", 0, 0.1)) == {("ps-b", 0): O}   # never waits
    c.done("a", "ps-a", 0, True, 0.5)                       # clean: free at once
    assert c.holder is None
    assert verdicts(c.ask("b", "ps-b", 1, 0.6)) == {("ps-b", 1): A}
    assert c.status(1.0)["busy_seconds"] == pytest.approx(0.5 + 0.4)


def test_an_unclean_round_keeps_the_aggregators_until_its_slots_expire():
    c = Controller({"a": ["ps-a"], "b": ["ps-b"]}, slot_timeout=2.0, hold_limit=10.0)
    c.ask("a", "ps-a", 0, 0.0)
    c.done("a", "ps-a", 0, False, 1.0)                      # a sum did not come back
    assert verdicts(c.ask("b", "ps-b", 0, 2.0)) == {("ps-b", 0): O}
    assert c.next_wake() == 3.0
    c.tick(3.0)
    assert c.holder is None
    # a holder that never says done is released after hold_limit
    c.ask("a", "ps-a", 1, 4.0)
    assert c.next_wake() == 14.0
    c.tick(14.0)
    assert c.holder is None and c.jobs["a"].stats.released_late == 1


def test_asking_for_the_next_round_says_done_with_the_last():
    c = Controller({"a": ["p1", "p2"], "b": ["ps-b"]})
    c.ask("a", "p1", 0, 0.0)
    c.ask("a", "p2", 0, 0.0)
    c.ask("a", "p1", 1, 1.0)                                # p1 done with 0, p2 not yet
    assert c.holder == "a"
    c.ask("a", "p2", 1, 1.2)                                # both done: measured, freed, and
    assert c.jobs["a"].round_s.value == pytest.approx(1.2)  # round 1 decided at once
    assert c.jobs["a"].decisions[1] is True


def test_always_wait_queues_a_round_until_the_holder_finishes():
    c = Controller({"a": ["ps-a"], "b": ["ps-b"]}, policy="always-wait")
    c.ask("a", "ps-a", 0, 0.0)
    assert c.ask("b", "ps-b", 0, 0.1) == []                 # waits: no answer yet
    assert verdicts(c.done("a", "ps-a", 0, True, 0.7)) == {("ps-b", 0): A}
    assert c.holder == "b" and c.jobs["b"].stats.queued == 1


def test_bad_arguments_and_strangers():
    with pytest.raises(ValueError, match="policy"):
        Controller({"a": ["x"]}, policy="fifo")
    with pytest.raises(ValueError, match="score"):
        Controller({"a": ["x"]}, score="bytes")
    with pytest.raises(ValueError, match="distinct"):
        Controller({"a": ["x", "x"]})
    c = Controller({"a": ["x"]})
    assert c.ask("zz", "x", 0, 0.0) == [] and c.ask("a", "y", 0, 0.0) == []
    assert c.strangers == 2


def test_the_asker_retries_after_a_retry_and_a_timeout():
    k = Asker(3, 10.0, lifetime=0.5, patience=5.0)
    assert k.send(10.0) and not k.send(10.0)                # one Interest at a time
    k.on_answer(R, 0.2, 10.1)
    assert k.next_wake() == pytest.approx(10.3) and not k.send(10.2) and k.send(10.3)
    k.on_timeout(10.8)
    assert k.send(10.8)
    k.on_answer(A, 0.0, 10.9)
    assert k.decision is True and k.wait(10.9) == pytest.approx(0.9) and k.next_wake() is None


# ---- many rounds over a lossy, delaying network: the invariants ---------------------------

def simulate(policy: str, rounds: int, loss: float, seed: int) -> tuple[list, list, Controller]:
    """Two jobs (2 peers; 1 PS) each running `rounds` rounds through Askers and a Controller,
    every message delayed 1-20 ms and lost with probability `loss`. Returns each node's
    decisions, the holder's intervals, and the controller."""
    rng = random.Random(seed)
    jobs = {"a": ["p1", "p2"], "b": ["ps"]}
    c = Controller(jobs, policy=policy, timeout=0.3, backoff=0.02, tries=4, slot_timeout=0.2)
    events: list = []                       # (time, seq, kind, payload)
    seq = 0

    def at(t: float, kind: str, payload) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(events, (t, seq, kind, payload))

    def net(t: float, kind: str, payload) -> None:
        if rng.random() >= loss:
            at(t + rng.uniform(0.001, 0.02), kind, payload)

    state = {n: {"job": j, "round": 0, "asker": None, "decided": {}}
             for j, ns in jobs.items() for n in ns}
    decisions = []
    use_log = []                            # (start, end, job) of aggregated rounds at a node

    def start(n: str, t: float) -> None:
        s = state[n]
        s["asker"] = Asker(s["round"], t, lifetime=0.1, patience=3.0)
        pump(n, t)

    def pump(n: str, t: float) -> None:
        k = state[n]["asker"]
        if k.send(t):
            net(t, "ask", (n, k.round))
            at(t + k.lifetime, "lifetime", (n, k.round, k.expressed))
        if (w := k.next_wake()) is not None:
            at(w, "wake", (n, k.round))

    def decided(n: str, t: float) -> None:
        s, k = state[n], state[n]["asker"]
        decisions.append((s["job"], s["round"], n, k.decision))
        length = rng.uniform(0.02, 0.1)
        if k.decision:
            use_log.append((t, t + length, s["job"]))
        at(t + length, "end", (n, s["round"]))

    def deliver(answers: list[Answer], t: float) -> None:
        for a in answers:
            net(t, "answer", a)

    for n in state:
        at(rng.uniform(0, 0.05), "begin", n)
    while events:
        t, _, kind, p = heapq.heappop(events)
        deliver(c.tick(t), t)
        if kind == "begin":
            start(p, t)
        elif kind == "ask":
            deliver(c.ask(state[p[0]]["job"], p[0], p[1], t), t)
        elif kind == "done":
            deliver(c.done(state[p[0]]["job"], p[0], p[1], True, t), t)
        elif kind in ("answer", "lifetime", "wake"):
            n = p.node if kind == "answer" else p[0]
            k = state[n]["asker"]
            r = p.round if kind == "answer" else p[1]
            if k is None or k.finished or k.round != r:
                continue
            if kind == "answer":
                k.on_answer(p.verdict, p.retry_after, t)
            elif kind == "lifetime" and p[2] == k.expressed:
                k.on_timeout(t)
            k.tick(t)
            if k.finished:
                decided(n, t)
            else:
                pump(n, t)
        elif kind == "end":
            n, r = p
            net(t, "done", (n, r))
            state[n]["round"] += 1
            if state[n]["round"] < rounds:
                # a peer job's next round waits for both peers (lockstep)
                start(n, t)
        if (w := c.next_wake()) is not None and w > t:
            at(w, "tick", None)
    return decisions, use_log, c


@pytest.mark.parametrize("policy", ["time-division", "always-wait"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_over_many_rounds_with_loss_nodes_agree_and_jobs_never_overlap(policy, seed):
    decisions, use_log, c = simulate(policy, 400, 0.05, seed)
    by_round: dict[tuple[str, int], set[bool]] = {}
    for job, r, _node, use in decisions:
        by_round.setdefault((job, r), set()).add(use)
    assert len(by_round) == 800                             # every round of both jobs ran
    mismatches = [k for k, v in by_round.items() if len(v) > 1]
    assert mismatches == []
    # no two jobs' aggregated rounds at once (a node's round: its decision to its end)
    overlaps, ends = [], {}                                 # job -> latest end so far
    for start, end, job in sorted(use_log):
        overlaps += [(job, other) for other, e in ends.items() if other != job and start < e]
        ends[job] = max(end, ends.get(job, end))
    assert overlaps == []
    agg = sum(1 for v in by_round.values() if v == {True})
    assert agg > 100                                        # sharing, not refusing


def test_a_round_duration_not_measured_again_for_a_while_is_measured_again():
    """A job measured once the ordinary way at a bad moment (slow: it seemed to save a lot)
    and winning the aggregators ever since: after STALE_PERIODS of its periods the old
    measurement no longer counts, its saving is taken as unknown (1 s per s), and a job that
    saves more gets the aggregators — so the first one runs the ordinary way and is measured
    again."""
    from ndnps.exchanges.sharing.agreement import STALE_PERIODS, Mean, _Job
    from ndnps.exchanges.sharing.decision import decide, time_saved
    m = Mean()
    m.add(0.2, now=1.0)
    assert m.fresh(2.0, horizon=5.0) == 0.2 and m.fresh(7.0, horizon=5.0) == 0.0
    small = _Job("small", ("ps",))
    small.ordinary_s.add(0.21, now=0.0)            # two rounds at the start, under contention
    small.period.add(0.15, now=0.15)
    small.last_start = 0.15
    for i in range(38):                            # then aggregated, every period
        small.round_s.add(0.05, now=0.2 + 0.15 * i)
        small.last_granted = 0.2 + 0.15 * i
    peers = _Job("peers", ("p1", "p2"))
    peers.round_s.add(0.066, now=6.0)
    peers.ordinary_s.add(0.193, now=6.0)
    peers.period.add(0.15, now=6.0)
    peers.last_start = 5.88                        # next round expected at 6.03
    early, late = 0.5, 6.0
    assert late > STALE_PERIODS * 0.15
    assert time_saved(small.state(early), early) > time_saved(peers.state(early), early)
    assert small.state(late).ordinary_seconds == 0.0            # stale: not measured
    assert time_saved(small.state(late), late) < time_saved(peers.state(late), late)
    assert decide(small.state(late), [peers.state(late)], None, late) is False
