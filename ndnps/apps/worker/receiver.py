"""A worker's receive side: the asyncio adapter of its Subscriber
(ndnps.exchanges.transport.subscriber). Pushed segments and the answers to fetches go in; the
subscriber's actions come out and are carried out here: recoveries (windowed fetches of the
segments it names, by ordinary Interests: the nearest cache or the PS answers), probes of versions
of which nothing is known, a complete version decoded and handed to the job. The subscriber's
timers run on one loop timer (ndnps.client.wakeup).

The receiver belongs to one job, which it sees through `Owner`: the training's names, its
fetcher, counters and parameters, and `on_version`, called with each new version.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Coroutine, Protocol

import numpy as np

from ndnps.client.fetcher import FetchError, SegmentFetcher, Transfer
from ndnps.client.wakeup import Wakeup
from ndnps.exchanges.transport.buffers import Recent
from ndnps.exchanges.transport.subscriber import (Action, Complete, Corrupt, Fetch, Probe,
                                                  Subscriber, SubscriberCounters)
from ndnps.protocol import messages, names
from ndnps.protocol.codec import CodecError, MixedSegments

from ..common.unicast import fetch_copy
from .join import JobFailed

log = logging.getLogger("worker")


class RxCounters(Protocol):
    malformed: int
    mixed_objects: int
    probe_segments: int
    collect_probes: int


class Owner(Protocol):
    """What the receiver reads and calls of its job."""
    ps: str
    train: str
    gpu: str
    knobs: dict
    n_params: int
    received_after: float | None

    @property
    def counters(self) -> RxCounters: ...
    @property
    def fetcher(self) -> SegmentFetcher: ...
    @property
    def params(self) -> np.ndarray | None: ...
    @property
    def done(self) -> bool: ...
    def now(self) -> float: ...
    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None: ...
    def on_version(self, p: messages.Params) -> None: ...


class Receiver:
    def __init__(self, job: Owner) -> None:
        self.job = job
        self.sub: Subscriber | None = None          # made with the training content
        self.wake = Wakeup(job.now, self.on_wake)   # the subscriber's next timer
        self.recoveries: Recent[int, Transfer] = Recent(4)   # version -> its missing segments

    @property
    def newest(self) -> int:
        return -1 if self.sub is None else self.sub.newest_of(self.job.ps)

    @property
    def counters(self) -> SubscriberCounters:
        return self.sub.counters if self.sub is not None else SubscriberCounters()

    def close(self) -> None:
        self.wake.cancel()
        self.end_recoveries(up_to=None)

    def receive_segment(self, version: int, seg: int, content: bytes | memoryview,
                        final: int | None,
                        pushed: bool = False) -> None:
        if self.sub is None or self.job.params is None:
            return
        actions = self.sub.on_segment(self.job.now(), self.job.ps, version, seg, content, final, pushed)
        if pushed and version > self.newest and not any(isinstance(a, Corrupt) for a in actions):
            recovery = self.recoveries.get(version)
            if recovery is not None and seg not in recovery.flights:
                recovery.have(seg)                  # came by the push after all
        # (one asked for is likely the answer, seen here first: the fetch takes it next)
        self.act(actions)

    def act(self, actions: list[Action]) -> None:
        for a in actions:
            if isinstance(a, Complete):
                self.complete(a)
            elif isinstance(a, Corrupt):
                self.job.counters.malformed += 1
            elif isinstance(a, Fetch):
                self.recover(a.version, list(a.segments), a.whole)
            elif isinstance(a, Probe):
                self.job.spawn(self.probe(a.version, a.lifetime))
        self.schedule()

    def schedule(self) -> None:
        self.wake.at(self.sub.next_timer() if self.sub is not None else None)

    def on_wake(self) -> None:
        if self.sub is not None:
            self.act(self.sub.on_timer(self.job.now()))     # act() asks for the next wake-up

    def tail_wait(self) -> float:
        assert self.sub is not None
        return self.sub.tail_wait()

    def asked(self, version: int, seg: int) -> bool:
        """Whether `seg` of `version` is being fetched (its arrival answers our Interest)."""
        t = self.recoveries.get(version)
        return t is not None and seg in t.wanted

    def end_recoveries(self, up_to: int | None) -> None:
        """Stop the recoveries of versions up to `up_to` (None: all)."""
        for v in self.recoveries.keys():
            if up_to is None or v <= up_to:
                recovery = self.recoveries.pop(v)
                if recovery is not None:
                    recovery.close()

    def recover(self, version: int, segments: list[int], whole: bool = False) -> None:
        """Fetch `segments` of `version` by ordinary Interests (the nearest cache or the PS
        answers), adding them to the version's recovery under way if there is one; `whole`:
        and every other segment the first Data's FinalBlockId says exists."""
        if version <= self.newest or not segments:
            return
        t = self.recoveries.get(version)
        if t is None or t.finished:
            def name_of(s: int):
                return names.distribute(self.job.ps, self.job.train, version, s)

            def got(seg) -> None:
                self.receive_segment(version, seg.number, seg.content, seg.final)

            t = self.job.fetcher.transfer(name_of, fresh=True, on_segment=got, to_final=whole)
            self.recoveries.put(version, t)
            self.job.spawn(self.run_recovery(version, t))
        t.want(s for s in segments if s not in t.wanted)

    async def run_recovery(self, version: int, t: Transfer) -> None:
        try:
            await t.run()
        except FetchError:
            pass                                    # the probe timer fires again, backed off
        finally:
            self.job.counters.probe_segments += t.asked
            if self.recoveries.get(version) is t:
                self.recoveries.pop(version)

    def complete(self, got: Complete) -> None:
        assert self.sub is not None
        version = got.version
        try:
            p = messages.parse_params(got.blob, self.job.n_params, version)
        except CodecError as e:
            if isinstance(e, MixedSegments):
                self.job.counters.mixed_objects += 1
            else:
                self.job.counters.malformed += 1
            log.warning("parameters version %d malformed (%s); refetching", version, e)
            return
        expected = self.sub.expected
        waited = self.sub.accepted(self.job.now(), self.job.ps, version)
        if expected is not None and version >= expected[1]:
            self.job.received_after = waited
        self.end_recoveries(up_to=version)
        self.job.on_version(p)

    def spawn_probe(self, version: int, why: str) -> bool:
        """Version `version` is due and (partly) missing: fetch what we lack of it."""
        assert self.sub is not None
        actions = self.sub.want(self.job.ps, version, why)
        self.act(actions)
        return bool(actions)

    async def probe(self, version: int, lifetime: float) -> None:
        """Nothing of `version` is known: ask for segment 0 alone.  If the push is merely
        late, that Interest waits in the forwarder's PIT and the push brings the rest; the
        segment's FinalBlockId tells what else is missing (the tail timer fetches it)."""
        try:
            seg = await self.job.fetcher.fetch_one(
                names.distribute(self.job.ps, self.job.train, version, 0), lifetime, tries=1,
                fresh=True)
            self.job.counters.probe_segments += 1
            self.receive_segment(version, seg.number, seg.content, seg.final)
        except FetchError:
            pass                                    # the timer fires again, backed off
        finally:
            if self.sub is not None:
                self.sub.probe_done(self.job.ps, version)

    async def fetch_unicast(self, version: int) -> None:
        """Unicast baseline: our own copy of `version`, held by the PS until it exists."""
        try:
            job = self.job
            parts = await fetch_copy(job.fetcher, job.ps, job.train, job.gpu, version,
                                     job.knobs["collect_lifetime"], job.knobs["ps_timeout"])
        except FetchError as e:
            raise JobFailed(f"no parameters version {version}: {e}") from None
        for i, part in enumerate(parts):
            self.receive_segment(version, i, part, len(parts) - 1)

    def probe_for_collect(self, step: int) -> None:
        """The PS asks for a step whose parameters we lack: a push was lost (it pushes, then
        collects).  Fetched once the reordering window has passed since the last pushed
        segment came, as a hole is: with link repair on the path that window covers the
        link's own repair, which a fetch started at once would race (at 5 % loss on the link,
        0.7-1.2 such fetches per version, each asking again for what the link was repairing)."""
        assert self.sub is not None
        wait = self.sub.last_push_at + self.job.fetcher.reorder_floor - self.job.now()
        if wait > 0:
            asyncio.get_running_loop().call_later(wait, self.probe_for_collect, step)
        elif not self.job.done and step > self.newest and self.spawn_probe(step, "collect"):
            self.job.counters.collect_probes += 1
