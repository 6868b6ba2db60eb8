"""Forwarding strategies (NFD names): best-route with exponential retransmission suppression,
and multicast. A strategy decides where a pending Interest goes, what a Nack means, and what
an arriving Data does to its PIT entry; it acts on the forwarder only through `Actions`.

Which strategy handles an entry is the strategy choice table's (NFD's findEffectiveStrategy:
the longest prefix of the entry's name, a protocol marker stripped as for routing), set per
prefix by `strategy-choice/set` or the config's [[strategies]]. One instance serves every entry
under its prefix: state per entry (NFD's StrategyInfo) is the strategy's to keep, keyed by the
entry (a PitEntry hashes by identity; `entry.erased` tells one that is gone).

Triggers (methods of `Strategy`, called by the pipelines; NFD's Strategy in parentheses):

- ``after_receive_interest(fw, entry, interest, in_face, fib_entry, now)``
  (afterReceiveInterest): forward, suppress or reject. Every strategy defines it.
- ``after_receive_nack(fw, entry, nack, in_face, now)`` (afterReceiveNack). Default: once every
  upstream has Nacked, Nack the downstreams with the least severe reason (best-route's rule).
- ``after_receive_data(fw, entry, data, in_face, now)`` (afterReceiveData): a Data satisfied
  exactly this one PIT entry. Before the call the entry's expiry is `now` (NFD sets its expiry
  timer to 0); unless the strategy extends it with ``fw.set_expiry``, the forwarder finalizes
  the entry (satisfied) as soon as the call returns. Default: ``before_satisfy_interest`` then
  ``fw.send_data_to_all`` — every pending downstream but the in-face, each once. A strategy that
  overrides it may hold the entry until more Data arrived (each Data that matches a held entry
  runs this trigger again, its expiry set to `now` again), answer some downstreams only, or Nack.
  A held entry has taken its Data: the in-face's out-record goes (its nonce to the dead-nonce
  list when MustBeFresh Data goes stale first, as NFD), and when its expiry comes it counts as
  satisfied.
- ``before_satisfy_interest(fw, entry, data, in_face, now)`` (beforeSatisfyInterest): a
  notification. Called by the default after_receive_data, and by the forwarder for each entry
  when one Data satisfies several (say a CanBePrefix entry and an exact one; a held entry
  too): then, as in NFD, no strategy decides: the forwarder sends the Data once to the union
  of their downstreams and finalizes every entry. Default: nothing.

A pushed `*distribute*` Data is the persistent PIT's (pipelines.on_incoming_distribute): where
it goes along the persistent entry is no strategy's decision, and the ordinary entries it
satisfies too (probes, the registration's `*insert*` Interest), however many, take the
several-entries path: their strategies are told (before_satisfy_interest), not asked. A hook
for the persistent fan-out was left out: nothing needs one yet, and a strategy there would
have to see the persistent table, which the Actions do not show.

Actions (`Actions`, which the Forwarder implements; NFD's Strategy members in parentheses):
``send_interest(entry, face, interest, now)`` (sendInterest), ``send_data(entry, data, face)``
(sendData: answers one downstream and drops its in-record), ``send_data_to_all(entry, data,
in_face, now)`` (sendDataToAll; the in-face's and expired in-records stay), ``send_nack(entry, face, reason)`` (sendNack: Nacks one
downstream and drops its in-record), ``reject_pending_interest(entry, reason, only_face=None)``
(sendNacks + rejectPendingInterest: Nacks the downstreams, or only `only_face`, and finalizes
the entry once none is left), ``set_expiry(entry, duration, now)`` (setExpiryTimer), and two
queries for the strategies here: ``can_send_interest(face, interest)`` (the scope and HopLimit
rules of NFD's isNextHopEligible) and ``count_suppressed(face)`` (a suppressed retransmission).
A strategy sees the forwarder only through these (and the PIT entry, FIB entry and packets it
is given), so this module does not import the pipelines.

Strategies are compiled with the forwarder's core when it is built (forwarder.compile); they
allow interpreted subclasses, so a strategy written in plain Python may extend them.

As in NFD, a strategy's instance name may carry parameters after its version, one per name
component: ``/localhost/nfd/strategy/best-route/v=5/retx-suppression-initial~2`` (ms),
``retx-suppression-max~<ms>``, ``retx-suppression-multiplier~<factor>``.  NFD's defaults (10 ms,
250 ms, x2) suit consumers that retransmit on a timer; a consumer that detects loss from its
answers (RACK) re-asks about one round trip later, and on a sub-millisecond link a 10 ms
suppression interval, doubling per retransmission, is what its repair waits for."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ndnps.ndn.nfd import RETX_INITIAL, RETX_MAX, RETX_MULTIPLIER
from ndnps.ndn.packet import NACK_NO_ROUTE, Data, Interest, Nack, less_severe

from ndnps.ndn._mypyc import mypyc_attr
from .tables.fib import FibEntry
from .tables.pit import PitEntry

STRATEGY_PREFIX: Final = "/localhost/nfd/strategy/"


class UnknownStrategy(ValueError):
    """No strategy of that name (NFD: 404 "Strategy not registered"); a ValueError of any other
    kind from strategy_by_name is a bad parameter (NFD: 409, "Error instantiating strategy")."""


@dataclass(frozen=True)
class RetxSuppression:
    """A retransmission within `initial` of the last one forwarded is suppressed; each one
    forwarded multiplies the interval by `multiplier`, up to `max` (s)."""
    initial: float = RETX_INITIAL
    max: float = RETX_MAX
    multiplier: float = RETX_MULTIPLIER

    def parameters(self) -> list[str]:
        """The instance-name components that differ from NFD's defaults."""
        out = []
        if self.initial != RETX_INITIAL:
            out.append(f"retx-suppression-initial~{round(self.initial * 1000)}")
        if self.max != RETX_MAX:
            out.append(f"retx-suppression-max~{round(self.max * 1000)}")
        if self.multiplier != RETX_MULTIPLIER:
            out.append(f"retx-suppression-multiplier~{self.multiplier:g}")
        return out


class Actions:
    """What a strategy may do to the forwarder (NFD's Strategy actions); the Forwarder
    (pipelines.py) implements them. A plain base class rather than a Protocol: in the compiled
    core a call through it is a native virtual call, not a Python attribute lookup."""

    def send_interest(self, entry: PitEntry, face_id: int, interest: Interest,
                      now: float) -> None:
        """Forward `interest` to `face_id` (an out-record; HopLimit decremented)."""
        raise NotImplementedError

    def send_data(self, entry: PitEntry, data: Data, face_id: int) -> None:
        """Answer the downstream `face_id` (with its PIT token) and drop its in-record."""
        raise NotImplementedError

    def send_data_to_all(self, entry: PitEntry, data: Data, in_face: int, now: float) -> None:
        """Answer every unexpired downstream but `in_face`, in arrival order; drop their
        in-records."""
        raise NotImplementedError

    def send_nack(self, entry: PitEntry, face_id: int, reason: int,
                  congestion_mark: int = 0) -> None:
        """Nack the downstream `face_id` (its own Interest, its PIT token, `congestion_mark`:
        the mark of the Nack passed on, if any); drop its in-record."""
        raise NotImplementedError

    def reject_pending_interest(self, entry: PitEntry, reason: int,
                                only_face: int | None = None, congestion_mark: int = 0) -> None:
        """Nack the downstreams (or only `only_face`), drop them, and finalize the entry
        (unsatisfied) once it has none left."""
        raise NotImplementedError

    def set_expiry(self, entry: PitEntry, duration: float, now: float) -> None:
        """The entry expires `duration` seconds after `now` (shortened or extended)."""
        raise NotImplementedError

    def can_send_interest(self, face_id: int, interest: Interest) -> bool:
        """The face exists and `interest` may leave by it (/localhost scope, HopLimit)."""
        raise NotImplementedError

    def count_suppressed(self, face_id: int) -> None:
        """Count a retransmission from `face_id` that was not forwarded."""
        raise NotImplementedError


@mypyc_attr(allow_interpreted_subclasses=True)
class Strategy:
    base_name = ""

    def __init__(self, suppression: RetxSuppression = RetxSuppression()) -> None:
        self.suppression = suppression
        # the instance name, as strategy-choice/list reports it
        self.name = "/".join([self.base_name, *suppression.parameters()])

    def after_receive_interest(self, fw: Actions, entry: PitEntry, interest: Interest,
                               in_face: int, fib_entry: FibEntry | None, now: float) -> None:
        raise NotImplementedError

    def after_receive_nack(self, fw: Actions, entry: PitEntry, nack: Nack, in_face: int,
                           now: float) -> None:
        """Default (NFD best-route): once every upstream has Nacked, Nack the downstreams with
        the least severe reason (and this last Nack's CongestionMark)."""
        reason = None
        for rec in entry.out_records.values():
            if rec.expires > now and rec.nack_reason is None:
                return                      # some upstream may still answer
            if rec.nack_reason is not None:
                reason = rec.nack_reason if reason is None else less_severe(reason, rec.nack_reason)
        fw.reject_pending_interest(entry, reason if reason is not None else nack.reason,
                                   congestion_mark=nack.congestion_mark)

    def after_receive_data(self, fw: Actions, entry: PitEntry, data: Data, in_face: int,
                           now: float) -> None:
        """Default (NFD): satisfy the entry, every pending downstream gets the Data."""
        self.before_satisfy_interest(fw, entry, data, in_face, now)
        fw.send_data_to_all(entry, data, in_face, now)

    def before_satisfy_interest(self, fw: Actions, entry: PitEntry, data: Data, in_face: int,
                                now: float) -> None:
        """The entry is about to be satisfied by `data` (a notification)."""


def eligible_hops(fw: Actions, fib_entry: FibEntry | None, interest: Interest,
                  in_face: int) -> list[int]:
    if fib_entry is None:
        return []
    hops = fib_entry.sorted_hops
    if len(hops) == 1:                          # the common case, without a comprehension
        face = hops[0][1]
        return [face] if face != in_face and fw.can_send_interest(face, interest) else []
    return [f for _, f in hops if f != in_face and fw.can_send_interest(f, interest)]


@mypyc_attr(allow_interpreted_subclasses=True)
class BestRoute(Strategy):
    base_name = STRATEGY_PREFIX + "best-route"

    def after_receive_interest(self, fw: Actions, entry: PitEntry, interest: Interest,
                               in_face: int, fib_entry: FibEntry | None, now: float) -> None:
        hops = eligible_hops(fw, fib_entry, interest, in_face)
        if not hops:
            fw.reject_pending_interest(entry, NACK_NO_ROUTE, only_face=in_face)
            return
        rs = self.suppression
        if not entry.out_records or not entry.has_unexpired_out_records(now):   # new Interest
            entry.retx_interval = rs.initial
            fw.send_interest(entry, hops[0], interest, now)
            return
        last = max(o.last_sent for o in entry.out_records.values())
        if now - last < entry.retx_interval:                   # suppressed retransmission
            fw.count_suppressed(in_face)
            return
        entry.retx_interval = min(entry.retx_interval * rs.multiplier, rs.max)
        # a retransmission goes to a next hop not tried yet, else to the least recently used
        untried = [f for f in hops if f not in entry.out_records]
        face = untried[0] if untried else min(hops, key=lambda f: entry.out_records[f].last_sent)
        fw.send_interest(entry, face, interest, now)


@mypyc_attr(allow_interpreted_subclasses=True)
class Multicast(Strategy):
    base_name = STRATEGY_PREFIX + "multicast"

    def after_receive_interest(self, fw: Actions, entry: PitEntry, interest: Interest,
                               in_face: int, fib_entry: FibEntry | None, now: float) -> None:
        hops = eligible_hops(fw, fib_entry, interest, in_face)
        if not hops:
            fw.reject_pending_interest(entry, NACK_NO_ROUTE, only_face=in_face)
            return
        sent = False
        for face in hops:
            rec = entry.out_records.get(face)
            if rec is not None and rec.expires > now and \
                    now - rec.last_sent < self.suppression.initial:
                continue                                       # per-upstream suppression
            fw.send_interest(entry, face, interest, now)
            sent = True
        if not sent:
            fw.count_suppressed(in_face)


STRATEGIES: dict[str, type[Strategy]] = {
    "best-route": BestRoute,
    "multicast": Multicast,
}


def strategy_by_name(name: str) -> Strategy:
    """Accepts 'best-route', or NFD's full strategy name, with or without a version, and NFD's
    retransmission-suppression parameters after it (each `key~value` one component; a
    version-less short name may carry them too: ``best-route/retx-suppression-initial~2``).
    ValueError names what is wrong."""
    path = name.strip("/")
    if path.startswith(STRATEGY_PREFIX.strip("/") + "/"):
        path = path[len(STRATEGY_PREFIX) - 1:]
    short, *rest = path.split("/")
    cls = STRATEGIES.get(short)
    if cls is None:
        raise UnknownStrategy(f"unknown strategy {name!r}; known: {', '.join(STRATEGIES)}")
    if rest and "~" not in rest[0]:
        rest = rest[1:]                                         # the version (any is taken)
    return cls(_suppression(rest, name))


def _suppression(params: list[str], name: str) -> RetxSuppression:
    values: dict[str, float] = {}
    for p in params:
        key, sep, value = p.partition("~")
        if not sep or key not in _PARAMETERS:
            raise ValueError(f"strategy {name!r}: unknown parameter {p!r} (known: "
                             f"{', '.join(k + '~<' + u + '>' for k, u in _PARAMETERS.items())})")
        try:
            number = float(value) if key.endswith("multiplier") else int(value) / 1000
        except ValueError:
            raise ValueError(f"strategy {name!r}: {key}: not a number: {value!r}") from None
        values[key] = number
    rs = RetxSuppression(values.get("retx-suppression-initial", RETX_INITIAL),
                         values.get("retx-suppression-max", RETX_MAX),
                         values.get("retx-suppression-multiplier", RETX_MULTIPLIER))
    if not (0 < rs.initial <= rs.max and rs.multiplier >= 1):
        raise ValueError(f"strategy {name!r}: need 0 < retx-suppression-initial <= "
                         "retx-suppression-max and retx-suppression-multiplier >= 1")
    return rs


_PARAMETERS: Final = {"retx-suppression-initial": "ms", "retx-suppression-max": "ms",
                      "retx-suppression-multiplier": "factor"}
