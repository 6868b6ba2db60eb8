"""The PS's collect (protocol step 5): /<gpu>/<ps>/<train>/<step>/<seg>, sent when
ndnps.exchanges.ps.collector says the worker's gradient will be ready, held by the worker until
then, fetched by the PS's SegmentFetcher.  ``Collect`` owns this I/O and the retries (a
malformed or mixed gradient is fetched again; our own face down meanwhile gives the worker
worker_timeout again); a worker silent for worker_timeout is dropped through `drop` (the
roster's).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from ndnps.client.fetcher import TLP_FLOOR, FetchError, SegmentFetcher
from ndnps.exchanges.ps import collector
from ndnps.exchanges.ps.membership import Member
from ndnps.protocol import messages, names
from ndnps.protocol.codec import CodecError, MixedSegments
from ndnps.protocol.config import PsConfig

from ..common.training import PsCounters

log = logging.getLogger("ps")


class Collect:
    """`app`: the PS's app (its reconnects and connection state are read)."""

    def __init__(self, cfg: PsConfig, app: Any, fetcher: SegmentFetcher, n_params: int,
                 counters: PsCounters, drop: Callable[[Member, str], None],
                 on_push_report: Callable[[object], None] = lambda _: None) -> None:
        self.cfg, self.app, self.fetcher, self.n_params = cfg, app, fetcher, n_params
        self.counters, self.drop = counters, drop
        self.on_push_report = on_push_report     # what the worker saw of the push (push_rate)

    async def __call__(self, w: Member, step: int, ref: float) -> messages.Gradient | None:
        """Worker w's gradient of `step`, asked for when its history says it will be ready
        (relative to `ref`: exchanges.ps.collector's rules).  None: the worker was dropped
        (silent for worker_timeout)."""
        n = self.n_params
        got = await self._collect(w, step, ref, True,
                                  lambda parts: messages.parse_gradient(b"".join(parts), n, step))
        return got if isinstance(got, messages.Gradient) else None

    async def meta(self, w: Member, step: int, ref: float) -> messages.GradientMeta | None:
        """With in-network aggregation: worker w's gradient header of `step` (segment 0 alone,
        asked for as the whole gradient is without it); its values are summed on the way
        (common/aggregate.py)."""
        n = self.n_params
        per = messages.summable_values(bool(self.cfg.aggregation.aggregate_via))
        got = await self._collect(w, step, ref, False, lambda parts: messages.parse_gradient_meta(
            parts[0], n, step, per))
        return got if isinstance(got, messages.GradientMeta) else None

    async def _collect(self, w: Member, step: int, ref: float, whole: bool,
                       parse: Callable[[list[bytes | memoryview]], object]) -> object | None:
        who, longest = self.cfg.who, self.cfg.transport.collect_lifetime
        timeout = self.cfg.liveness.worker_timeout
        loop = asyncio.get_running_loop()
        delay = collector.send_at(w.estimator, ref) - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)

        def name_of(s: int):
            return names.collect(w.gpu, who.ps, who.train, step, s)

        why = "malformed gradients"
        for attempt in range(3):
            sent = loop.time()
            reconnects = self.app.reconnects
            rtt = collector.round_trip(self.fetcher)
            lifetime = collector.held_lifetime(w.estimator, ref, sent, self.fetcher,
                                               longest, TLP_FLOOR)
            try:
                # once the first Data is in, the fetcher's loss recovery takes over
                parts, arrived, waited = await self.fetcher.fetch_held(
                    name_of, w.last_segment if whole else 0, lifetime, longest,
                    sent + timeout, whole=whole)
            except FetchError as e:
                why = f"silent for {timeout:.0f} s ({e})"
                if self.app.reconnects == reconnects and self.app.connected:
                    break
                # our own face was down meanwhile, or is (a forwarder restart): the worker was
                # not silent, we could not hear it; it gets worker_timeout again
                log.info("collect from %s: asking again after our reconnect", w.gpu)
                continue
            if attempt == 0:
                # whichever try brought it: without a history the first ones expire early,
                # and a sample from them alone would never come
                w.estimator.observe(arrived - ref, sent - ref,
                                    held=collector.was_held(waited, rtt))
            if whole:
                w.last_segment = len(parts) - 1
            try:
                grad = parse(parts)
            except CodecError as e:
                if isinstance(e, MixedSegments):
                    self.counters.mixed_objects += 1
                else:
                    self.counters.malformed += 1
                log.warning("malformed gradient from %s, step %d: %s; refetching", w.gpu, step, e)
                continue
            self.counters.gradients += 1
            push = getattr(grad, "push", None)
            if push is not None:
                self.on_push_report(push)
            return grad
        self.drop(w, why)
        return None
