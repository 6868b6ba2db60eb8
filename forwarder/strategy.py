"""Forwarding strategies (NFD names): best-route with exponential retransmission suppression,
and multicast. A strategy decides where a pending Interest goes and what a Nack means; it acts
only through the forwarder's outgoing pipelines."""
from __future__ import annotations

from typing import Final, TYPE_CHECKING

from .packet import NACK_NO_ROUTE, Interest, Nack, less_severe
from .tables.fib import FibEntry
from .tables.pit import PitEntry

if TYPE_CHECKING:
    from .pipelines import Forwarder

# NFD's RetxSuppressionExponential defaults
RETX_INITIAL: Final = 0.010
RETX_MAX: Final = 0.250
RETX_MULTIPLIER: Final = 2.0


class Strategy:
    name = ""

    def after_receive_interest(self, fw: "Forwarder", entry: PitEntry, interest: Interest,
                               in_face: int, fib_entry: FibEntry | None, now: float) -> None:
        raise NotImplementedError

    def after_receive_nack(self, fw: "Forwarder", entry: PitEntry, nack: Nack, in_face: int,
                           now: float) -> None:
        """Default (NFD best-route): once every upstream has Nacked, Nack the downstreams with
        the least severe reason."""
        reason = None
        for rec in entry.out_records.values():
            if rec.expires > now and rec.nack_reason is None:
                return                      # some upstream may still answer
            if rec.nack_reason is not None:
                reason = rec.nack_reason if reason is None else less_severe(reason, rec.nack_reason)
        fw.reject_pending_interest(entry, reason if reason is not None else nack.reason)


def eligible_hops(fw: "Forwarder", fib_entry: FibEntry | None, interest: Interest,
                  in_face: int) -> list[int]:
    if fib_entry is None:
        return []
    hops = fib_entry.sorted_hops
    if len(hops) == 1:                          # the common case, without a comprehension
        face = hops[0][1]
        return [face] if face != in_face and fw.can_send_interest(face, interest) else []
    return [f for _, f in hops if f != in_face and fw.can_send_interest(f, interest)]


class BestRoute(Strategy):
    name = "/localhost/nfd/strategy/best-route"

    def after_receive_interest(self, fw: "Forwarder", entry: PitEntry, interest: Interest,
                               in_face: int, fib_entry: FibEntry | None, now: float) -> None:
        hops = eligible_hops(fw, fib_entry, interest, in_face)
        if not hops:
            fw.reject_pending_interest(entry, NACK_NO_ROUTE, only_face=in_face)
            return
        if not entry.out_records or not entry.has_unexpired_out_records(now):   # new Interest
            entry.retx_interval = RETX_INITIAL
            fw.send_interest(entry, hops[0], interest, now)
            return
        last = max(o.last_sent for o in entry.out_records.values())
        if now - last < entry.retx_interval:                   # suppressed retransmission
            fw.count_suppressed(in_face)
            return
        entry.retx_interval = min(entry.retx_interval * RETX_MULTIPLIER, RETX_MAX)
        # a retransmission goes to a next hop not tried yet, else to the least recently used
        untried = [f for f in hops if f not in entry.out_records]
        face = untried[0] if untried else min(hops, key=lambda f: entry.out_records[f].last_sent)
        fw.send_interest(entry, face, interest, now)


class Multicast(Strategy):
    name = "/localhost/nfd/strategy/multicast"

    def after_receive_interest(self, fw: "Forwarder", entry: PitEntry, interest: Interest,
                               in_face: int, fib_entry: FibEntry | None, now: float) -> None:
        hops = eligible_hops(fw, fib_entry, interest, in_face)
        if not hops:
            fw.reject_pending_interest(entry, NACK_NO_ROUTE, only_face=in_face)
            return
        sent = False
        for face in hops:
            rec = entry.out_records.get(face)
            if rec is not None and rec.expires > now and now - rec.last_sent < RETX_INITIAL:
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
    """Accepts 'best-route', or NFD's full strategy name (with or without a version)."""
    short = name.rstrip("/").split("/strategy/")[-1].split("/")[0]
    try:
        return STRATEGIES[short]()
    except KeyError:
        raise ValueError(f"unknown strategy {name!r}; known: {', '.join(STRATEGIES)}") from None
