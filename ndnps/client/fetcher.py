"""The asyncio side of fetching an object's segments: ``Transfer`` drives the sans-I/O
``SegmentTransfer`` of ndnps.exchanges.transport.fetch (congestion window, RACK, tail loss probe,
per-segment RTO, time-bounded tries — read there) with the app's ``express``, and
``SegmentFetcher`` shares one path's estimates among an app's transfers (and a congestion
window among those towards one producer: ``flow_of``) and offers the usual shapes of fetch (one
segment, a whole object, an object its producer holds until it exists).

``express`` is ``App.express_future`` (the pending entry's own future: no Task per Interest)
or anything with its signature returning an awaitable of a Data (``ndnps.client.wire.Data``)
or raising ``ndnps.client.errors``' exceptions (run in a Task); one cancelled by anything
but the transfer, or ended by the face's closing (InterestCanceled), is FaceDown: asked again
without backoff once the face is back.  ``Declined`` is an express's way of saying "no Data,
but the owner stands in for it" (a Nacked `*aggregate*` sum the PS makes itself).

A segment's content is handed on as a view of the packet it arrived in (``Segment.content``):
the consumer's join is its one copy.
"""
from __future__ import annotations

import asyncio
import weakref
from functools import partial
from typing import Awaitable, Callable, Hashable, Iterable, Sequence

from ndnps.exchanges.transport.fetch import SegmentTransfer
from ndnps.exchanges.transport.flight import Action, Cancel, FetchError, Flight, Segment, Send
from ndnps.exchanges.transport.loss import TLP_FLOOR
from ndnps.exchanges.transport.path import (LINK_REPAIR, MAX_FAST, MIN_RTO, PATIENCE,
                                            REORDER_FLOOR, SUPPRESSION_MARGIN, FetchPath,
                                            FetchStats)
from ndnps.exchanges.transport.window import INITIAL_WINDOW
from ndnps.ndn.conventions import segment_number
from ndnps.ndn.nfd import RETX_INITIAL, RETX_MAX
from ndnps.ndn.rto import RtoEstimator

from ndnps.ndn.encoders import Bytes
from ndnps.ndn.tlv import name_to_str

from .errors import (FaceDown, InterestCanceled, InterestNack, InterestTimeout, NetworkError,
                     ValidationFailure)
from .wakeup import Wakeup

__all__ = ["LINK_REPAIR", "MIN_RTO", "REORDER_FLOOR", "SUPPRESSION_MARGIN", "TLP_FLOOR",
           "Declined", "FetchError", "FetchStats", "Segment", "SegmentFetcher", "Transfer",
           "reorder_floor"]

Name = Sequence[Bytes]
Express = Callable[..., Awaitable]
NameOf = Callable[[int], Name]
FlowOf = Callable[[Name], Hashable]


class Declined(NetworkError):
    """No Data came, but a refusal the owner handles itself: the segment lands with
    `content` as the owner says (ndnps.exchanges.transport.fetch's `on_data(declined=True)`)."""

    def __init__(self, content: bytes = b"") -> None:
        super().__init__("declined")
        self.content = content


def producer_prefix(name: Name) -> Hashable:
    """The flow of a name: its first component, the prefix its producer registers (ndnps
    producers register one component: /<ps>, /<gpu>)."""
    return bytes(name[0]) if name else None


class Transfer:
    """The segments of one object (see SegmentTransfer for every rule), fetched with the
    fetcher's `express`: ``want(segments)``, ``have(seg)``, ``await run()`` (the segments by
    number), ``retry_now()``, ``close()``; `on_segment` is called with each wanted segment as
    it arrives."""

    def __init__(self, fetcher: "SegmentFetcher", name_of: NameOf, *,
                 on_segment: Callable[[Segment], None] | None = None, **kw) -> None:
        self.f = fetcher
        self.name_of = name_of
        self.on_segment = on_segment
        self.loop = asyncio.get_running_loop()
        self.core = SegmentTransfer(fetcher, lambda s: name_to_str(b"".join(name_of(s))),
                                    flow=fetcher.flow_of(name_of(0)), **kw)
        self.wake = Wakeup(self.loop.time, self._on_timer)
        self.done: asyncio.Future = self.loop.create_future()
        fetcher.transfers.add(self)

    # what the owner reads of the transfer
    @property
    def flights(self) -> dict[int, Flight]:
        return self.core.flights

    @property
    def wanted(self) -> set[int]:
        return self.core.wanted

    @property
    def asked(self) -> int:
        return self.core.asked

    @property
    def final(self) -> int | None:
        return self.core.final

    @final.setter
    def final(self, final: int | None) -> None:
        self.core.final = final

    @property
    def ready_at(self) -> float | None:
        return self.core.ready_at

    @property
    def ready_wait(self) -> float:
        return self.core.ready_wait

    @property
    def finished(self) -> bool:
        return self.done.done()

    # ---- the owner's side -------------------------------------------------------------------

    def want(self, segments: Iterable[int]) -> None:
        self._do(self.core.want(segments, self.loop.time()))

    def have(self, seg: int) -> None:
        """Segment `seg` arrived another way: stop asking for it."""
        self._do(self.core.have(seg, self.loop.time()))

    async def run(self) -> dict[int, Segment]:
        self._do(self.core.start(self.loop.time()))
        try:
            return await self.done
        finally:
            self.close()

    def retry_now(self) -> None:
        """The producer is back: every missing segment is asked again now (no backoff)."""
        if not self.done.done():
            self._do(self.core.retry_now(self.loop.time()))

    def close(self) -> None:
        self.f.transfers.discard(self)
        self.wake.cancel()
        self._apply(self.core.close())
        if not self.done.done():
            self.done.cancel()

    # ---- carrying out the core's actions ------------------------------------------------------

    def _do(self, actions: list[Action]) -> None:
        self._apply(actions)
        core = self.core
        if not self.done.done():
            if core.result is not None:
                self.wake.cancel()
                self.done.set_result(core.result)
            elif core.error is not None:
                self.done.set_exception(core.error)
                self.close()
                return
        self.wake.at(core.next_timer())

    def _apply(self, actions: list[Action]) -> None:
        for a in actions:
            flight = a.flight
            if isinstance(a, Send):
                if self.core.flights.get(flight.seg) is flight:     # not superseded meanwhile
                    self._express(flight)
            elif isinstance(a, Cancel) and flight.handle is not None:
                flight.handle.cancel()                              # type: ignore[attr-defined]

    def _express(self, flight: Flight) -> None:
        task = asyncio.ensure_future(self.f.express(
            self.name_of(flight.seg), self.f.validator, lifetime=max(1, int(flight.life * 1000)),
            must_be_fresh=flight.fresh, can_be_prefix=False))
        flight.handle = task
        task.add_done_callback(partial(self._answered, flight))

    def _on_timer(self) -> None:
        if not self.done.done():
            self._do(self.core.on_timer(self.loop.time()))

    def _answered(self, flight: Flight, task: asyncio.Future) -> None:
        if self.done.done():
            return
        core, now = self.core, self.loop.time()
        if task.cancelled():
            if core.flights.get(flight.seg) is not flight:
                return                              # we cancelled it (superseded)
            exc: BaseException | None = FaceDown()  # not by us: the face is gone
        else:
            exc = task.exception()
        if exc is None:
            data = task.result()
            self._landed(flight, data.content, segment_number(data.final_block_id),
                         data.mark, False, now)
        elif isinstance(exc, Declined):
            self._landed(flight, exc.content, None, 0, True, now)
        elif isinstance(exc, (FaceDown, InterestCanceled)):
            self._do(core.on_face_down(flight, now))
        elif isinstance(exc, InterestTimeout):
            self._do(core.on_expired(flight, now))
        elif isinstance(exc, InterestNack):
            self._do(core.on_nack(flight, exc.reason, now))
        elif isinstance(exc, ValidationFailure):
            self._do(core.on_rejected(flight, now))
        elif isinstance(exc, NetworkError):
            self._do(core.on_expired(flight, now))
        else:
            self._do(core.on_failed(flight, exc))

    def _landed(self, flight: Flight, content: bytes | memoryview, final: int | None, mark: int,
                declined: bool, now: float) -> None:
        core = self.core
        self._apply(core.on_data(flight, content, final, now, marked=bool(mark),
                                 declined=declined))
        arrived, core.arrived = core.arrived, []
        for segment in arrived:
            if self.on_segment is not None:
                self.on_segment(segment)            # (may close the transfer)
        self._do(core.settle(now))


class SegmentFetcher(FetchPath):
    """Fetches for one app: the RTO estimator and the statistics (FetchPath) are shared by its
    transfers, a congestion window (at most `window`) by those whose names `flow_of` says
    come from one producer.  `patience`: the job's wait for a silent peer (s), the least a
    segment is tried before its fetch fails."""

    def __init__(self, express: Express, validator, window: int = 16,
                 rto: RtoEstimator | None = None, max_tries: int = 8,
                 stats: FetchStats | None = None, max_fast: int = MAX_FAST,
                 reorder_floor: float = REORDER_FLOOR,
                 suppression: float = RETX_INITIAL,
                 suppression_max: float = RETX_MAX, patience: float = PATIENCE,
                 initial_window: float = INITIAL_WINDOW,
                 flow_of: FlowOf = producer_prefix) -> None:
        super().__init__(window, rto, max_tries, stats, max_fast, reorder_floor, suppression,
                         suppression_max, patience, initial_window)
        self.flow_of = flow_of
        self.express = express
        self.validator = validator
        # those under way (retry_now); weak: one never run (its task cancelled first) goes
        self.transfers: weakref.WeakSet[Transfer] = weakref.WeakSet()

    def retry_now(self) -> None:
        """Every transfer under way asks again now for what it misses (Transfer.retry_now)."""
        for t in list(self.transfers):
            t.retry_now()

    def transfer(self, name_of: NameOf, **kw) -> Transfer:
        """A transfer to drive by hand (``want``, ``have``, ``await run()``)."""
        return Transfer(self, name_of, **kw)

    async def fetch_one(self, name: Name, lifetime: float | None = None,
                        tries: int | None = None, held: bool = False, fresh: bool = False,
                        max_lifetime: float | None = None, deadline: float | None = None,
                        prompt: bool = False) -> Segment:
        """One segment.  ``lifetime`` (s) for the first try, or the RTO when None; with
        ``max_lifetime`` it doubles after each expiry up to that.  ``held``: the producer may
        hold the Interest until it has the Data, so an expiry is not loss; ``prompt``: it
        answers at once, so a round trip is a sample.  Gives up after ``tries`` (default
        max_tries) or at ``deadline`` (loop time)."""
        number = names_segment(name)
        t = Transfer(self, lambda _s: name, fresh=fresh, life=lifetime, max_life=max_lifetime,
                     held=held, prompt=prompt, first_tries=tries, tries=tries,
                     deadline=deadline)
        t.want([number])
        return (await t.run())[number]

    async def fetch_many(self, name_of: NameOf, numbers: list[int],
                         on_segment: Callable[[Segment], None] | None = None,
                         fresh: bool = False) -> dict[int, Segment]:
        """Every segment in ``numbers``, as the window allows."""
        t = Transfer(self, name_of, fresh=fresh, on_segment=on_segment)
        t.want(numbers)
        return await t.run()

    async def fetch(self, name_of: NameOf, have: dict[int, bytes | memoryview] | None = None,
                    final: int | None = None, first_lifetime: float | None = None,
                    first_tries: int | None = None, fresh: bool = False,
                    max_lifetime: float | None = None,
                    max_rejected: int | None = None) -> list[bytes | memoryview]:
        """The whole object: segment 0 first unless the count is known (``final``), then the
        missing rest windowed.  ``have`` holds segments already received (e.g. pushed).
        ``first_lifetime``/``first_tries``: the first segment may be held by its producer;
        with ``max_lifetime`` its lifetime doubles after each expiry up to that."""
        have = dict(have or {})
        t = Transfer(self, name_of, fresh=fresh, to_final=final is None, life=first_lifetime,
                     max_life=max_lifetime, held=first_lifetime is not None,
                     first_tries=first_tries, max_rejected=max_rejected)
        if final is None:
            if have:
                raise ValueError("segments in hand but no final: pass final")
            t.want([0])
        else:
            t.final = final
            t.want(s for s in range(final + 1) if s not in have)
        got = await t.run()
        last = t.final
        assert last is not None         # a whole object's transfer ends once its final is known
        parts = {**have, **{s: seg.content for s, seg in got.items()}}
        return [parts[s] for s in range(last + 1)]

    async def fetch_held(self, name_of: NameOf, last_hint: int | None, lifetime: float,
                         max_lifetime: float, deadline: float, fresh: bool = True,
                         whole: bool = True) -> tuple[list[bytes | memoryview], float, float]:
        """An object whose producer holds Interests until it exists (a gradient being
        computed).  Segment 0 and, when ``last_hint`` says how many there were last time, up
        to ``window`` - 1 more are wanted at once, as many as the congestion window allows
        asked at once, all held, so they come back in one round trip once ready; the rest
        windowed.  ``deadline``: loop time.  Returns the
        segments, when the first Data arrived (loop time) and how long the Interest it
        answered had waited: much more than a round trip, the producer held it (it became
        ready about then, whichever try that was); about one, it was ready before.
        ``whole`` False: segment 0 alone (a header whose rest comes another way)."""
        t = Transfer(self, name_of, fresh=fresh, to_final=whole, life=lifetime,
                     max_life=max_lifetime, held=True, deadline=deadline)
        t.want(range(min(last_hint or 0, self.window - 1) + 1))
        got = await t.run()
        if not whole:
            assert t.ready_at is not None
            return [got[0].content], t.ready_at, t.ready_wait
        assert t.final is not None      # a whole object's transfer ends once its final is known
        assert t.ready_at is not None   # (and so is its first Data)
        return [got[s].content for s in range(t.final + 1)], t.ready_at, t.ready_wait


def names_segment(name: Name) -> int:
    """The segment number a name ends with (0 if it ends with none)."""
    n = segment_number(bytes(name[-1])) if name else None
    return 0 if n is None else n


def reorder_floor(app) -> float:
    """The reordering window's floor for an app's fetches: LINK_REPAIR on a face with link
    reliability, or on a path whose links have it (the links repair their losses: a consumer
    that re-asks sooner races them, and its re-asks cost every hop), REORDER_FLOOR otherwise."""
    return LINK_REPAIR if app.lp_reliability or app.link_repair else REORDER_FLOOR
