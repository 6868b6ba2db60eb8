"""The PS's side of in-network aggregation (docs/aggregation.md): a step's gradients summed on the
way. PS-less peers ask the network for their sums through it too (combine.py's ``InNetwork``).

With ``aggregate_at`` set, a worker publishes its gradient as a header segment and summable
value segments (ndnps.protocol.messages); the PS collects every live worker's header as it
collected whole gradients (ps/collect.py, ``Collect.meta``: once all are in, all are
computed), then asks the plan's root — its edge forwarder, ``aggregate_at`` — for the sum of
each value segment: ``/*aggregate*/<ps>/<train>/<step>/<seg>`` with the plan in the Interest's
ApplicationParameters, signed under the training's key (an aggregator claims slots only for
plans so signed), and a ForwardingHint naming the edge (ndnps.ndn.aggregation), fetched
windowed with loss recovery by a fetcher of its own (few tries, short patience: a sum that
does not come is better made here than waited for).

The plan: the edge sums the workers ``aggregate_via`` does not list and the partial sums of
the aggregators it does (each a group of its workers: python -m ndnps.placement's plan).

A segment the network could not sum — Nacked (a busy slot, a member's Nack, a deadline: the
forwarder's rules, ndnps/forwarder/aggregator.py), unanswered after its tries, or a sum that does
not stand for every worker — falls back: the PS fetches that segment from every worker and
adds them itself with the same fixed-point sum (ndnps.ndn.summable), so the sum is the same
bytes either way. Counted: segments_aggregated, segments_fallback. A worker silent for
worker_timeout during a fallback is dropped; the values it did not give are the sum of the
others (the PS divides each value by the gradients it is the sum of).
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
from typing import Any, Callable

import numpy as np

from ndnps.client.errors import InterestNack
from ndnps.client.fetcher import (MIN_RTO, Declined, FetchError, FetchStats, SegmentFetcher,
                                  reorder_floor)
from ndnps.client.security import Security
from ndnps.exchanges.ps.membership import Member
from ndnps.ndn import aggregation, summable
from ndnps.ndn.aggregation import Group
from ndnps.ndn.rto import RtoEstimator
from ndnps.ndn.tlv import read_components
from ndnps.protocol import messages, names
from ndnps.protocol.config import PeerConfig, PsConfig

from .training import JobFailed, PsCounters

log = logging.getLogger("ps")

SUM_TRIES = 3             # Interests per segment sum before it falls back
# a sum's round trip includes the aggregators' queue of the sums asked before it, and its
# first tries are the only round trips measured (Karn): below this floor the RTO learnt from
# the first, quick sums of a burst expired the later ones, re-asked (measured: 16 of 20 a
# version on the digits tree), each answered twice
SUM_MIN_RTO = 0.1
FALLBACK = b""            # a Nacked sum's content, as the fetcher hands it on: fall back


class Aggregate:
    """`cfg`: the PS's (or an "ina" peer's); `fetcher`: the PS's own (fallback collects);
    `drop`: the roster's."""

    def __init__(self, cfg: PsConfig | PeerConfig, app: Any, fetcher: SegmentFetcher, sec: Security,
                 n_params: int, counters: PsCounters,
                 drop: Callable[[Member, str], None],
                 own: tuple[str, Callable[[int], list[bytes]]] | None = None) -> None:
        self.cfg, self.app, self.fetcher, self.n_params = cfg, app, fetcher, n_params
        self.counters, self.drop = counters, drop
        # a member that is this app (a peer, ndnps.apps.peer): its name, and its gradient's
        # segment contents by step — a fallback takes them here, not over its own face
        self.own = own
        agg, t = cfg.aggregation, cfg.transport
        self.groups = agg.groups()
        self.per = messages.summable_values(bool(agg.aggregate_via))    # values per segment
        self.stats = FetchStats()
        self.sums = SegmentFetcher(
            self._express, sec.validator, agg.aggregate_window,
            RtoEstimator(t.segment_timeout, min_rto=max(MIN_RTO, SUM_MIN_RTO),
                         max_rto=4 * t.segment_timeout),
            SUM_TRIES, self.stats, reorder_floor=reorder_floor(app),
            suppression=t.retx_suppression_ms / 1000,
            suppression_max=t.retx_suppression_max_ms / 1000,
            patience=t.collect_lifetime, initial_window=t.initial_window)
        self._plan_wire = b""
        # the plans are signed under the training's key (validate() makes aggregate_at need one)
        self._mac = hmac.new(sec.key or b"", digestmod=hashlib.sha256)
        self._key_name = b"".join(bytes(c) for c in names.key(cfg.who.ps, cfg.who.train))
        # the last call's sums all came back or were declined (a Nack frees the slot): no
        # slot of it may still be held in the network (the share controller's release)
        self.clean = True

    def plan(self, workers: list[str]) -> Group:
        """The plan for these workers: the edge sums its own and its aggregators' groups."""
        members: list[aggregation.Member] = []
        grouped: set[str] = set()
        for node, group in self.groups.items():
            mine = tuple(w for w in group if w in workers)
            grouped.update(group)
            if len(mine) > 1:
                members.append(Group(node, mine))
            elif mine:
                members.append(mine[0])         # a group of one gains nothing: the edge
        members += [w for w in workers if w not in grouped]
        return Group(self.cfg.aggregation.aggregate_at, tuple(members))

    async def __call__(self, step: int, workers: list[Member], segments: int,
                       network: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """The sum of `workers`' gradients of `step` (float32, one value per parameter) and,
        for each value, how many gradients it is the sum of. `network` False (the share
        controller gave the aggregators to another job): every segment summed here."""
        got: dict[int, bytes] = {}
        self.clean = True
        if network:
            await self._ask_sums(step, workers, segments, got)
        else:
            self.counters.segments_ordinary += segments
        sums: dict[int, tuple[np.ndarray, int]] = {}
        for s in range(1, segments + 1):
            content = got.get(s, FALLBACK)
            try:
                values, k = summable.decode(content)
                if k != len(workers) or values.size != self._size(s):
                    raise summable.SummableError("not the plan's sum")
                sums[s] = values, k
            except summable.SummableError:
                pass
        missing = [s for s in range(1, segments + 1) if s not in sums]
        self.counters.segments_aggregated += len(sums)
        if network:
            self.counters.segments_fallback += len(missing)
        if missing:
            sums.update(await self._fallback(step, workers, missing))
        total = np.empty(self.n_params, np.float32)
        counts = np.empty(self.n_params, np.float32)
        for s, (values, k) in sums.items():
            at = (s - 1) * self.per
            total[at:at + values.size] = values
            counts[at:at + values.size] = k
        return total, counts

    async def _ask_sums(self, step: int, workers: list[Member], segments: int,
                        got: dict[int, bytes]) -> None:
        """Each segment's sum asked of the network, into `got` (a Nacked one: FALLBACK)."""
        cfg = self.cfg
        self._plan_wire = aggregation.encode_plan(self.plan([w.gpu for w in workers]))
        t = self.sums.transfer(lambda s: names.aggregate(cfg.who.ps, cfg.who.train, step, s),
                               fresh=True, on_segment=lambda seg: got.update(
                                   {seg.number: seg.content}))
        t.want(range(1, segments + 1))
        try:
            await t.run()
        except FetchError as e:             # whatever did not come falls back
            self.clean = False
            log.info("step %d: %d of %d sums did not come (%s): the PS sums them", step,
                     segments - len(got), segments, e)
        finally:
            t.close()

    def _size(self, seg: int) -> int:
        at = (seg - 1) * self.per
        return max(0, min(self.per, self.n_params - at))

    async def _fallback(self, step: int, workers: list[Member],
                        segs: list[int]) -> dict[int, tuple[np.ndarray, int]]:
        """Segments `segs` collected from every worker and summed here."""
        cfg = self.cfg

        async def fetch(w: Member) -> dict[int, bytes | memoryview]:
            if self.own is not None and w.gpu == self.own[0]:
                mine = self.own[1](step)
                return {s: mine[s] for s in segs}
            got = await self.fetcher.fetch_many(
                lambda s: names.collect(w.gpu, cfg.who.ps, cfg.who.train, step, s), segs)
            return {s: seg.content for s, seg in got.items()}

        results = await asyncio.gather(*(fetch(w) for w in workers), return_exceptions=True)
        adders = {s: _Adder(self._size(s)) for s in segs}
        for w, r in zip(workers, results):
            if isinstance(r, FetchError):
                self.drop(w, f"silent for {cfg.liveness.worker_timeout:.0f} s ({r})")
                continue
            if isinstance(r, BaseException):
                raise r
            for s in segs:
                if not adders[s].add(r[s]):
                    self.counters.malformed += 1
                    log.warning("malformed gradient segment %d from %s, step %d", s, w.gpu,
                                step)
        out = {}
        for s, adder in adders.items():
            if not adder.count:
                raise JobFailed(f"no worker gave segment {s} of step {step}")
            out[s] = adder.result()
        return out

    def _express(self, name: list, validator, lifetime: int = 4000, **_kw) -> asyncio.Future:
        """The fetcher's express: the `*aggregate*` Interest for `name` with the plan; a Nack
        answers FALLBACK (the segment is summed here) instead of failing the fetch."""
        wire, full = aggregation.encode_interest(b"".join(bytes(c) for c in name),
                                                 self._plan_wire,
                                                 self.cfg.aggregation.aggregate_at,
                                                 lifetime, self._mac, self._key_name)
        inner = self.app.express_wire([bytes(c) for c in read_components(full, 0, len(full))],
                                      wire, lifetime, validator, must_be_fresh=True)
        outer: asyncio.Future = asyncio.get_running_loop().create_future()

        def settle(f: asyncio.Future) -> None:
            if outer.done():
                return
            if f.cancelled():
                outer.cancel()
            elif isinstance(f.exception(), InterestNack):
                # no sum this way: the PS makes it (and the fetch takes it as congestion, not
                # as a round trip: a Nack comes back faster than any sum)
                self.stats.nacks += 1
                outer.set_exception(Declined(FALLBACK))
            elif f.exception() is not None:
                outer.set_exception(f.exception())      # type: ignore[arg-type]
            else:
                outer.set_result(f.result())
        inner.add_done_callback(settle)
        outer.add_done_callback(lambda o: inner.cancel() if o.cancelled() else None)
        return outer


class _Adder:
    """One segment's sum over workers, as an aggregator makes it (fixed point, order-free),
    or in float64 when a value is beyond what fixed point holds (summable.VALUE_LIMIT)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.contents: list[bytes | memoryview] = []

    @property
    def count(self) -> int:
        return len(self.contents)

    def add(self, content: bytes | memoryview) -> bool:
        """False: not one worker's segment of this size (malformed)."""
        try:
            values, k = summable.decode(content)
        except summable.SummableError:
            return False
        if values.size != self.size or k != 1 or not np.isfinite(values).all():
            return False
        self.contents.append(content)
        return True

    def result(self) -> tuple[np.ndarray, int]:
        exact = summable.FixedPointSum(self.size)
        try:
            for c in self.contents:
                exact.add(c)
            return summable.decode(exact.result())[0], self.count
        except summable.SummableError:
            floats = np.sum([summable.decode(c)[0] for c in self.contents], axis=0,
                            dtype=np.float64)
            return np.asarray(floats, np.float32), self.count
