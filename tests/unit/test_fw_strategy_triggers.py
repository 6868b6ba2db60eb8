"""Strategy triggers for Data (NFD's afterReceiveData / beforeSatisfyInterest) and the actions a
strategy has on the forwarder (ndnps.forwarder.strategy.Actions), on a fake clock: a strategy chosen
for a prefix holds a PIT entry until several Data came, answers one downstream and Nacks
another, rejects, sets the entry's expiry; the default strategies keep NFD's behaviour."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ndnps.forwarder.strategy import BestRoute, Multicast, Strategy
from ndnps.ndn import tlv
from ndnps.ndn.packet import NACK_CONGESTION, NACK_NO_ROUTE

from tests.support.fwkit import Bench, brief, data, depth, interest, lp, nv, vs

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def b() -> Bench:
    return Bench()


def choose(b: Bench, prefix: str, strategy: Strategy) -> None:
    """strategy-choice set: `strategy` for names under `prefix` ('/' is the root)."""
    b.fw.strategy_choice.set(nv(prefix), depth(prefix), strategy)


def pit_faces(b: Bench) -> list[tuple[str, list[int], list[int]]]:
    """(name, in-record faces, out-record faces) of every PIT entry."""
    return sorted((tlv.name_to_str(e.name), sorted(e.in_records), sorted(e.out_records))
                  for e in b.fw.pit)


class HoldUntil(Multicast):
    """Asks every upstream; holds each PIT entry until `n` Data came for it (each time for
    `hold` seconds more), then answers its downstreams with the last one."""

    def __init__(self, n: int, hold: float = 1.0) -> None:
        super().__init__()
        self.n, self.hold = n, hold
        self.seen: dict[object, int] = {}

    def after_receive_data(self, fw, entry, data, in_face, now):
        count = self.seen.get(entry, 0) + 1
        if count < self.n:
            self.seen[entry] = count
            fw.set_expiry(entry, self.hold, now)
            return
        del self.seen[entry]
        super().after_receive_data(fw, entry, data, in_face, now)


class Recorder(BestRoute):
    """Best-route that records its Data triggers: (trigger, entry name, CanBePrefix, Data
    name, in-face)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, str, bool, str, int]] = []

    def _record(self, what, entry, data, in_face):
        self.calls.append((what, tlv.name_to_str(entry.name), entry.can_be_prefix,
                           tlv.name_to_str(data.name), in_face))

    def after_receive_data(self, fw, entry, data, in_face, now):
        self._record("after", entry, data, in_face)
        super().after_receive_data(fw, entry, data, in_face, now)

    def before_satisfy_interest(self, fw, entry, data, in_face, now):
        self._record("before", entry, data, in_face)


# ---- holding an entry: set_expiry, then send_data_to_all ------------------------------------

def test_a_strategy_for_a_prefix_holds_its_entry_until_two_data_came(b):
    c, p1, p2, up = b.faces(4)
    b.route("/agg", p1)
    b.route("/agg", p2)
    b.route("/b", up)
    choose(b, "/agg", HoldUntil(2))
    assert brief(b.rx(c, interest("/agg/x", cbp=True))) == [(p1, "I", "/agg/x"),
                                                            (p2, "I", "/agg/x")]
    b.later(0.01)
    assert b.rx(p1, data("/agg/x/from-p1")) == []            # held: nobody answered yet
    assert pit_faces(b) == [("/agg/x", [c], [p2])]            # p1's out-record is gone (NFD)
    assert len(b.fw.cs) == 1 and b.fw.counters.satisfied == 0
    b.later(0.01)
    assert brief(b.rx(p2, data("/agg/x/from-p2"))) == [(c, "D", "/agg/x/from-p2")]
    assert len(b.fw.pit) == 0
    assert (b.fw.counters.satisfied, b.fw.counters.unsatisfied) == (1, 0)
    # outside /agg the root strategy (best-route) answers with the first Data
    assert brief(b.rx(c, interest("/b"))) == [(up, "I", "/b")]
    assert brief(b.rx(up, data("/b"))) == [(c, "D", "/b")]
    assert len(b.fw.pit) == 0


def test_a_held_entry_goes_when_the_expiry_its_strategy_set_comes(b):
    c, p1, p2 = b.faces(3)
    b.route("/agg", p1)
    b.route("/agg", p2)
    choose(b, "/agg", HoldUntil(2, hold=0.5))
    b.rx(c, interest("/agg/x", cbp=True, lifetime=4000))
    assert b.rx(p1, data("/agg/x/1")) == []
    b.later(0.4)
    b.fw.tick()
    assert len(b.fw.pit) == 1                                 # held
    b.later(0.2)                                              # 0.6 s: before the Interest's 4 s
    b.fw.tick()
    assert len(b.fw.pit) == 0
    # it took a Data: satisfied (NFD's isSatisfied), though its strategy answered no one
    assert (b.fw.counters.satisfied, b.fw.counters.unsatisfied) == (1, 0)
    assert b.rx(p2, data("/agg/x/2")) == []                   # too late: unsolicited
    assert b.fw.counters.unsolicited == 1


def test_each_data_sets_the_expiry_to_now_so_the_strategy_holds_again(b):
    c, p1, p2, p3 = b.faces(4)
    for p in (p1, p2, p3):
        b.route("/agg", p)
    choose(b, "/agg", HoldUntil(3, hold=0.5))
    b.rx(c, interest("/agg/x", cbp=True))
    assert b.rx(p1, data("/agg/x/1")) == []                   # held until 0.5
    b.later(0.3)
    assert b.rx(p2, data("/agg/x/2")) == []                   # held again: until 0.8
    b.later(0.4)
    b.fw.tick()
    assert pit_faces(b) == [("/agg/x", [c], [p3])]
    assert brief(b.rx(p3, data("/agg/x/3"))) == [(c, "D", "/agg/x/3")]
    assert len(b.fw.pit) == 0 and b.fw.counters.satisfied == 1


class Stream(BestRoute):
    """Answers whoever is pending with every Data, and keeps the entry `hold` s more."""

    def __init__(self, hold: float) -> None:
        super().__init__()
        self.hold = hold

    def after_receive_data(self, fw, entry, data, in_face, now):
        fw.send_data_to_all(entry, data, in_face, now)
        fw.set_expiry(entry, self.hold, now)


def test_send_data_to_all_answers_each_downstream_once_and_keeps_the_others(b):
    c1, c2, c3, up = b.faces(4)
    b.route("/s", up)
    choose(b, "/s", Stream(hold=1.0))
    b.rx(c1, interest("/s", cbp=True))
    b.rx(c2, interest("/s", cbp=True, lifetime=50))           # will have expired
    b.later(0.1)
    assert brief(b.rx(up, data("/s/1"))) == [(c1, "D", "/s/1")]
    assert pit_faces(b) == [("/s", [c2], [])]                 # c1 answered; c2's record stays
    b.rx(c3, interest("/s", cbp=True))                        # joins the held entry
    assert brief(b.rx(up, data("/s/2"))) == [(c3, "D", "/s/2")]
    assert pit_faces(b) == [("/s", [c2], [])]


class ShortLived(BestRoute):
    """Best-route that gives each new entry `life` s, whatever its Interest's lifetime."""

    def __init__(self, life: float) -> None:
        super().__init__()
        self.life = life

    def after_receive_interest(self, fw, entry, interest, in_face, fib_entry, now):
        super().after_receive_interest(fw, entry, interest, in_face, fib_entry, now)
        fw.set_expiry(entry, self.life, now)


def test_set_expiry_may_shorten_an_entry(b):
    c, up = b.faces(2)
    b.route("/short", up)
    choose(b, "/short", ShortLived(0.2))
    assert brief(b.rx(c, interest("/short/x", lifetime=4000))) == [(up, "I", "/short/x")]
    b.later(0.3)
    b.fw.tick()
    assert len(b.fw.pit) == 0 and b.fw.counters.unsatisfied == 1
    assert b.rx(up, data("/short/x")) == [] and b.fw.counters.unsolicited == 1


def test_holding_remembers_the_in_faces_nonce_when_must_be_fresh_data_goes_stale(b):
    c, p1, p2 = b.faces(3)
    b.route("/agg", p1)
    b.route("/agg", p2)
    choose(b, "/agg", HoldUntil(2))
    b.rx(c, interest("/agg/x", cbp=True, mbf=True))
    [entry] = list(b.fw.pit)
    nonce = entry.out_records[p1].nonce
    assert not b.fw.dnl.has(nv("/agg/x"), nonce, b.now)
    b.rx(p1, data("/agg/x/1", fresh=100))                     # stale long before the list forgets
    assert p1 not in entry.out_records and b.fw.dnl.has(nv("/agg/x"), nonce, b.now)


# ---- answering downstreams one by one: send_data, send_nack, reject --------------------------

class FirstComeOnly(BestRoute):
    """Gives the Data to the first downstream and Nacks (congestion) the others."""

    def after_receive_data(self, fw, entry, data, in_face, now):
        first, *rest = list(entry.in_records)
        fw.send_data(entry, data, first)
        for face in rest:
            fw.send_nack(entry, face, NACK_CONGESTION)


def test_send_data_and_send_nack_answer_one_downstream_each(b):
    c1, c2, up = b.faces(3)
    b.route("/q", up)
    choose(b, "/q", FirstComeOnly())
    b.rx(c1, lp(interest("/q/x"), token=b"one"))
    second = interest("/q/x")
    b.rx(c2, lp(second, token=b"two"))
    dw = data("/q/x")
    out = b.rx(up, dw)
    assert [(f, p.kind, p.token, p.reason, p.net) for f, p in out] == [
        (c1, "D", b"one", None, dw), (c2, "N", b"two", NACK_CONGESTION, second)]
    assert len(b.fw.pit) == 0                                 # not held: satisfied at once
    assert (b.fw.counters.satisfied, b.fw.counters.out_nacks) == (1, 1)


class Refuse(BestRoute):
    def after_receive_data(self, fw, entry, data, in_face, now):
        fw.reject_pending_interest(entry, NACK_NO_ROUTE)


def test_reject_pending_interest_from_after_receive_data_nacks_every_downstream(b):
    c1, c2, up = b.faces(3)
    b.route("/q", up)
    choose(b, "/q", Refuse())
    b.rx(c1, interest("/q/x"))
    b.rx(c2, interest("/q/x"))
    out = b.rx(up, data("/q/x"))
    assert [(f, p.kind, p.reason) for f, p in out] == [(c1, "N", NACK_NO_ROUTE),
                                                        (c2, "N", NACK_NO_ROUTE)]
    assert len(b.fw.pit) == 0
    assert (b.fw.counters.satisfied, b.fw.counters.unsatisfied) == (0, 1)
    assert len(b.fw.cs) == 1                                  # the Data is cached all the same


# ---- before_satisfy_interest -----------------------------------------------------------------

def test_one_entry_goes_to_after_receive_data_whose_default_tells_before_satisfy(b):
    c, up = b.faces(2)
    b.route("/r", up)
    rec = Recorder()
    choose(b, "/r", rec)
    b.rx(c, interest("/r/a"))
    assert brief(b.rx(up, data("/r/a"))) == [(c, "D", "/r/a")]
    assert rec.calls == [("after", "/r/a", False, "/r/a", up),
                         ("before", "/r/a", False, "/r/a", up)]


def test_before_satisfy_interest_is_called_for_each_entry_a_data_satisfies(b):
    c1, c2, up = b.faces(3)
    b.route("/r", up)
    rec = Recorder()
    choose(b, "/r", rec)
    b.rx(c1, interest("/r/a/b"))
    b.rx(c2, interest("/r/a", cbp=True))
    dw = data("/r/a/b")
    assert sorted(b.raw(up, dw)) == [(c1, dw), (c2, dw)]
    # several entries: no strategy decides, each is told, all are satisfied
    assert sorted(rec.calls) == [("before", "/r/a", True, "/r/a/b", up),
                                 ("before", "/r/a/b", False, "/r/a/b", up)]
    assert len(b.fw.pit) == 0 and b.fw.counters.satisfied == 2


def test_several_entries_are_satisfied_even_if_one_was_held(b):
    c1, c2, p1, p2 = b.faces(4)
    b.route("/agg", p1)
    b.route("/agg", p2)
    choose(b, "/agg", HoldUntil(2))
    b.rx(c1, interest("/agg/x", cbp=True))
    assert b.rx(p1, data("/agg/x/1")) == []                   # held
    b.rx(c2, interest("/agg/x/2"))
    dw = data("/agg/x/2")
    assert sorted(b.raw(p2, dw)) == [(c1, dw), (c2, dw)]      # two entries: NFD's other path
    assert len(b.fw.pit) == 0 and b.fw.counters.satisfied == 2


def test_a_pushed_data_tells_the_strategy_of_the_probe_it_answers_but_does_not_ask_it(b):
    c, up = b.faces(2)
    b.route("/ps", up)
    rec = Recorder()
    choose(b, "/ps", rec)                          # chosen for the stripped name, as routed
    probe = vs("/ps/t", 1, 0)
    assert brief(b.rx(c, interest(probe))) == [(up, "I", tlv.name_to_str(b"".join(probe)))]
    dw = data(probe)
    assert b.raw(up, dw) == [(c, dw)]
    assert [(what, cbp, in_face) for what, _, cbp, _, in_face in rec.calls] == \
        [("before", False, up)]


# ---- the root strategy, the defaults ---------------------------------------------------------

def test_the_root_strategy_replaced_takes_the_data_triggers_too(b):
    c, p1, p2 = b.faces(3)
    b.route("/", p1)
    b.route("/", p2)
    choose(b, "/", HoldUntil(2))
    b.rx(c, interest("/any/name"))
    assert b.rx(p1, data("/any/name")) == []
    assert brief(b.rx(p2, data("/any/name"))) == [(c, "D", "/any/name")]


@pytest.mark.parametrize("strategy", [BestRoute, Multicast])
def test_default_strategies_answer_every_pending_downstream_but_the_in_face_in_order(b, strategy):
    d1, d2, d3, d4, up = b.faces(5)
    b.route("/a", up)
    choose(b, "/", strategy())
    b.rx(d1, lp(interest("/a"), token=b"1"))
    b.rx(d2, interest("/a", lifetime=50))                     # will have expired
    b.rx(d3, interest("/a"))
    b.rx(d4, lp(interest("/a"), token=b"4"))
    b.later(0.1)
    dw = data("/a")
    out = b.rx(d3, dw)                                        # a downstream answers it
    assert [(f, p.kind, p.token, p.net) for f, p in out] == [(d1, "D", b"1", dw),
                                                             (d4, "D", b"4", dw)]
    assert len(b.fw.pit) == 0 and b.fw.counters.satisfied == 1


# ---- the strategy sees the forwarder through Actions only ------------------------------------

@pytest.mark.parametrize("module", ["strategy.py", "tables/strategy_choice.py", "tables/pit.py",
                                    "tables/fib.py"])
def test_the_strategy_side_does_not_import_the_pipelines(module):
    found: set[str] = set()                   # TYPE_CHECKING imports included
    for node in ast.walk(ast.parse((ROOT / "ndnps" / "forwarder" / module).read_text())):
        if isinstance(node, ast.ImportFrom):
            found |= {node.module or ""} | {a.name for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    # the Forwarder's layers (outgoing, incoming, pipelines)
    assert not [m for m in found if {"pipelines", "incoming", "outgoing"} & set(m.split("."))]
