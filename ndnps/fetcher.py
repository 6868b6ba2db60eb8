"""Windowed segment fetcher with retransmission: content, gradients, probes and unicast
parameters all come through here.

python-ndn's own fetcher keeps one Interest in flight (DESIGN.md pitfall).  This one learns the
segment count from the first Data's FinalBlockId, then keeps up to ``window`` Interests in
flight; each segment is retried on timeout (the Interest lifetime is the retransmission timer,
from an RtoEstimator: adaptive, backed off, bounded), on Nack and on a failed signature check
(then with MustBeFresh, so a cache cannot serve the bad copy again).  After ``max_tries`` for
one segment the fetch fails with FetchError: nothing waits for ever.

``express`` is ``NDNApp.express`` or anything with its signature and exceptions.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Awaitable, Callable

from ndn.encoding import FormalName
from ndn.types import InterestNack, InterestTimeout, ValidationFailure

from . import names
from .estimator import RtoEstimator

Express = Callable[..., Awaitable[tuple]]
NameOf = Callable[[int], FormalName]


class FetchError(Exception):
    """A segment could not be fetched within its tries."""


@dataclass
class FetchStats:
    segments: int = 0            # Data received and accepted
    bytes: int = 0               # content bytes accepted
    retransmissions: int = 0     # Interests re-sent after a timeout, Nack or bad signature
    timeouts: int = 0
    nacks: int = 0
    rejected: int = 0            # Data that failed the signature check
    held_timeouts: int = 0       # first-segment Interests that expired while held (not loss)


@dataclass
class Segment:
    number: int
    content: bytes
    final: int | None            # FinalBlockId, if the Data carried one


class SegmentFetcher:
    def __init__(self, express: Express, validator, window: int = 16,
                 rto: RtoEstimator | None = None, max_tries: int = 8,
                 stats: FetchStats | None = None) -> None:
        if window < 1:
            raise ValueError("window must be >= 1")
        self.express = express
        self.validator = validator
        self.window = window
        self.rto = rto or RtoEstimator(initial=1.0, min_rto=0.2, max_rto=4.0)
        self.max_tries = max_tries
        self.stats = stats or FetchStats()
        # smallest round trip seen, held Interests included: some are answered at once, so
        # this approaches the path's RTT even when every Interest may be held
        self.min_rtt: float | None = None

    async def fetch_one(self, name: FormalName, lifetime: float | None = None,
                        tries: int | None = None, held: bool = False, fresh: bool = False,
                        max_lifetime: float | None = None,
                        deadline: float | None = None) -> Segment:
        """One segment, retried.  ``lifetime`` (s) for the first try, or the RTO when None;
        with ``max_lifetime`` it doubles after each expiry up to that, else it stays.
        ``held``: the producer may hold the Interest until it has the Data, so an expiry is not
        counted as loss; ``fresh``: MustBeFresh from the first try.  Gives up after ``tries``
        (default max_tries, unlimited when a ``deadline`` is given) or at ``deadline``
        (time.monotonic())."""
        if tries is None:
            tries = self.max_tries if deadline is None else 1 << 30
        number = names_segment(name)
        life = lifetime
        attempt = 0
        while attempt < tries and (deadline is None or attempt == 0 or time.monotonic() < deadline):
            if lifetime is None:
                life = self.rto.rto
            if deadline is not None:
                life = max(0.001, min(life, deadline - time.monotonic()))
            if attempt:
                self.stats.retransmissions += 1
            attempt += 1
            start = time.monotonic()
            try:
                _, content, ctx = await self.express(
                    name, self.validator, lifetime=max(1, int(life * 1000)),
                    must_be_fresh=fresh, can_be_prefix=False)
            except InterestTimeout:
                if held:
                    self.stats.held_timeouts += 1
                else:
                    self.stats.timeouts += 1
                    if lifetime is None:
                        self.rto.backoff()
                if lifetime is not None and max_lifetime is not None:
                    life = min(2 * life, max_lifetime)
                continue
            except InterestNack:
                self.stats.nacks += 1
                await asyncio.sleep(min(life, 0.05 * 2 ** attempt))
                continue
            except ValidationFailure:
                self.stats.rejected += 1
                fresh = True
                continue
            if attempt == 1:
                rtt = time.monotonic() - start
                self.min_rtt = rtt if self.min_rtt is None else min(self.min_rtt, rtt)
                if not held:
                    self.rto.observe(rtt)
            content = bytes(content or b"")
            self.stats.segments += 1
            self.stats.bytes += len(content)
            meta = ctx.get("meta_info") if isinstance(ctx, dict) else None
            final = names.segment_number(meta.final_block_id) if meta is not None else None
            return Segment(number, content, final)
        raise FetchError(f"{names.to_str(name)}: no valid Data after {attempt} tries")

    async def fetch_many(self, name_of: NameOf, numbers: list[int],
                         on_segment: Callable[[Segment], None] | None = None,
                         fresh: bool = False) -> dict[int, Segment]:
        """Every segment in ``numbers``, at most ``window`` Interests in flight."""
        pending = list(reversed(numbers))
        got: dict[int, Segment] = {}

        async def lane() -> None:
            while pending:
                seg = await self.fetch_one(name_of(pending.pop()), fresh=fresh)
                got[seg.number] = seg
                if on_segment is not None:
                    on_segment(seg)

        lanes = [asyncio.ensure_future(lane()) for _ in range(min(self.window, len(pending)))]
        try:
            await asyncio.gather(*lanes)
        finally:
            for t in lanes:
                t.cancel()
        return got

    async def fetch(self, name_of: NameOf, have: dict[int, bytes] | None = None,
                    final: int | None = None, first_lifetime: float | None = None,
                    first_tries: int | None = None, fresh: bool = False) -> list[bytes]:
        """The whole object: segment 0 first unless the count is known (``final``), then the
        missing rest windowed.  ``have`` holds segments already received (e.g. pushed).
        ``first_lifetime``/``first_tries``: the first segment may be held by its producer."""
        got = dict(have or {})
        if final is None:
            first = await self.fetch_one(name_of(0), first_lifetime, first_tries,
                                         held=first_lifetime is not None, fresh=fresh)
            got[0] = first.content
            final = first.final if first.final is not None else 0
        missing = [s for s in range(final + 1) if s not in got]
        for seg in (await self.fetch_many(name_of, missing, fresh=fresh)).values():
            got[seg.number] = seg.content
        return [got[s] for s in range(final + 1)]


    async def fetch_held(self, name_of: NameOf, last_hint: int | None, lifetime: float,
                         max_lifetime: float, deadline: float,
                         fresh: bool = True) -> tuple[list[bytes], float]:
        """An object whose producer holds Interests until it exists (a gradient being
        computed).  Segment 0 and, when ``last_hint`` says how many there were last time, up
        to ``window`` more are asked at once, all held, so the whole object comes back in one
        round trip once ready; the rest, if any, windowed.  Returns the segments and when the
        first segment arrived (time.monotonic())."""
        kw = dict(held=True, fresh=fresh, max_lifetime=max_lifetime, deadline=deadline)
        early = range(1, min(last_hint or 0, self.window - 1) + 1)
        tasks = {s: asyncio.ensure_future(self.fetch_one(name_of(s), lifetime, **kw))
                 for s in early}
        try:
            first = await self.fetch_one(name_of(0), lifetime, **kw)
            arrived = time.monotonic()
            last = first.final or 0
            got = {0: first.content}
            for s, task in tasks.items():
                if s <= last:
                    got[s] = (await task).content
                else:
                    task.cancel()
            missing = [s for s in range(1, last + 1) if s not in got]
            for seg in (await self.fetch_many(name_of, missing, fresh=fresh)).values():
                got[seg.number] = seg.content
            return [got[s] for s in range(last + 1)], arrived
        finally:
            for task in tasks.values():
                task.cancel()
            await asyncio.gather(*tasks.values(), return_exceptions=True)


def names_segment(name: FormalName) -> int:
    """The segment number a name ends with (0 if it ends with none)."""
    n = names.segment_number(bytes(name[-1])) if name else None
    return 0 if n is None else n
