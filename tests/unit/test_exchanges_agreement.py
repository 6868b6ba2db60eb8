"""The agreement among a job's nodes (ndnps.exchanges.agreement, issue 26) with a fake clock:
the happy path, a node at another round, a lost message, a dead controller."""
from __future__ import annotations

from ndnps.exchanges.agreement import (Coordinator, Kind, Message, Participant, Phase, Send)


def network(jobs: dict[str, list[str]], rounds: dict[str, int], **kw):
    c = Coordinator(jobs, **kw)
    nodes = {n: Participant(n, round=rounds.get(n, 7)) for ns in jobs.values() for n in ns}
    return c, nodes


def deliver(c: Coordinator, nodes: dict[str, Participant], sends: list[Send], now: float,
            drop: set[tuple[str, Kind]] = frozenset()) -> list[Send]:
    """Hand each message to its node and each answer back; the coordinator's next sends."""
    out = []
    for s in sends:
        if (s.node, s.message.kind) in drop:
            continue
        answer = nodes[s.node].on_message(s.message, now)
        if answer is not None and (s.node, answer.kind) not in drop:
            out += c.on_message(s.node, answer, now)
    return out


def run(c, nodes, sends, now, drop=frozenset()):
    while sends:
        sends = deliver(c, nodes, sends, now, drop)


def test_every_node_applies_the_update_from_the_round_after_the_one_they_agree_on():
    c, nodes = network({"a": ["a0", "a1", "a2"], "b": ["b0"]}, {"b0": 3})
    run(c, nodes, c.start({"holder": "a"}, 0.0), 0.0)
    assert c.phase is Phase.IDLE and c.aborts == 0
    assert {n: (p.state, p.from_round, p.locked) for n, p in nodes.items()} == {
        "a0": ({"holder": "a"}, 8, False), "a1": ({"holder": "a"}, 8, False),
        "a2": ({"holder": "a"}, 8, False), "b0": ({"holder": "a"}, 4, False)}


def test_a_node_at_another_round_aborts_the_attempt_and_it_is_tried_again():
    c, nodes = network({"a": ["a0", "a1"]}, {"a1": 8}, backoff=0.2)
    run(c, nodes, c.start("s", 0.0), 0.0)
    assert c.phase is Phase.BACKOFF and c.aborts == 1
    assert not any(p.locked for p in nodes.values()) and nodes["a0"].state is None
    nodes["a0"].round = 8                       # it caught up meanwhile
    assert c.tick(0.1) == [] and c.next_wake() == 0.2
    run(c, nodes, c.tick(0.2), 0.2)
    assert c.phase is Phase.IDLE and {p.from_round for p in nodes.values()} == {9}


def test_a_lost_answer_times_out_then_the_retry_succeeds():
    c, nodes = network({"a": ["a0", "a1"]}, {}, timeout=1.0, backoff=0.5)
    run(c, nodes, c.start("s", 0.0), 0.0, drop={("a1", Kind.LOCKED)})
    assert c.phase is Phase.PREPARING and nodes["a1"].locked
    run(c, nodes, c.tick(1.0), 1.0)             # no answer from a1: abort (a1 released)
    assert c.phase is Phase.BACKOFF and not nodes["a1"].locked
    run(c, nodes, c.tick(1.5), 1.5)
    assert c.phase is Phase.IDLE and nodes["a1"].state == "s"


def test_the_coordinator_gives_up_after_its_tries_and_an_old_attempts_answers_are_ignored():
    c, nodes = network({"a": ["a0", "a1"]}, {"a1": 9}, tries=2, backoff=0.1)
    first = c.start("s", 0.0)
    run(c, nodes, first, 0.0)
    run(c, nodes, c.tick(0.1), 0.1)
    assert c.phase is Phase.FAILED and c.aborts == 2 and c.next_wake() is None
    assert c.on_message("a0", Message(Kind.LOCKED, 1, 7), 0.2) == []
    assert c.on_message("stranger", Message(Kind.LOCKED, c.seq, 7), 0.2) == []


def test_a_node_releases_its_lock_when_the_controller_is_gone():
    p = Participant("a0", lock_timeout=3.0, round=4)
    assert p.on_message(Message(Kind.PREPARE, 1), 0.0) == Message(Kind.LOCKED, 1, 4)
    assert p.locked and p.next_wake() == 3.0
    p.tick(2.9)
    assert p.locked
    p.tick(3.0)
    assert not p.locked and p.expired_locks == 1
    # an UPDATE for a lock it no longer holds is not applied
    assert p.on_message(Message(Kind.UPDATE, 1, 5, "s"), 3.1) is None and p.state is None
