"""Forwarding strategies (NFD names): best-route with exponential retransmission suppression,
and multicast. A strategy decides where a pending Interest goes and what a Nack means; it acts
only through the forwarder's outgoing pipelines.

As in NFD, a strategy's instance name may carry parameters after its version, one per name
component: ``/localhost/nfd/strategy/best-route/v=5/retx-suppression-initial~2`` (ms),
``retx-suppression-max~<ms>``, ``retx-suppression-multiplier~<factor>``.  NFD's defaults (10 ms,
250 ms, x2) suit consumers that retransmit on a timer; a consumer that detects loss from its
answers (RACK) re-asks about one round trip later, and on a sub-millisecond link a 10 ms
suppression interval, doubling per retransmission, is what its repair waits for."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Final, TYPE_CHECKING

from ndnps.ndn.nfd import RETX_INITIAL, RETX_MAX, RETX_MULTIPLIER
from ndnps.ndn.packet import NACK_NO_ROUTE, Interest, Nack, less_severe

from .tables.fib import FibEntry
from .tables.pit import PitEntry

if TYPE_CHECKING:
    from .pipelines import Forwarder

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


class Strategy:
    base_name = ""

    def __init__(self, suppression: RetxSuppression = RetxSuppression()) -> None:
        self.suppression = suppression
        # the instance name, as strategy-choice/list reports it
        self.name = "/".join([self.base_name, *suppression.parameters()])

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
    base_name = STRATEGY_PREFIX + "best-route"

    def after_receive_interest(self, fw: "Forwarder", entry: PitEntry, interest: Interest,
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


class Multicast(Strategy):
    base_name = STRATEGY_PREFIX + "multicast"

    def after_receive_interest(self, fw: "Forwarder", entry: PitEntry, interest: Interest,
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
