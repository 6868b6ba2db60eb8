"""A worker's registration, step 4 from its side: `*insert*` Interests join the persistent PIT
entry /<ps>/<train> until the PS's confirmation (a `*distribute*` Data) comes back, refreshed
every register_interval (soft state, as a forwarder restart forgets it), and `*remove*` when
the worker leaves.  Belongs to one job (`job`: the training's names, its app, fetcher, knobs
and counters, seen through `Owner`)."""
from __future__ import annotations

import asyncio
from typing import Any, Protocol

from ndnps.client.errors import (InterestCanceled, InterestNack, InterestTimeout, NetworkError,
                                 ValidationFailure)
from ndnps.client.events import wait_event
from ndnps.client.fetcher import SegmentFetcher
from ndnps.client.security import Security
from ndnps.client.wire import Data
from ndnps.protocol import names

from .join import JobFailed

REMOVE_TRIES = 8            # *remove* tries on leaving (each at most the RTO's ceiling)


class RegCounters(Protocol):
    register_tries: int


class Owner(Protocol):
    """What registration reads and sets of its job."""
    ps: str
    train: str
    knobs: dict
    last_from_ps: float

    @property
    def app(self) -> Any: ...
    @property
    def sec(self) -> Security: ...
    @property
    def fetcher(self) -> SegmentFetcher: ...
    @property
    def counters(self) -> RegCounters: ...
    def now(self) -> float: ...


class Registration:
    def __init__(self, job: Owner) -> None:
        self.job = job
        self.confirmed = asyncio.Event()

    def send_insert(self) -> None:
        job = self.job
        job.app.express(names.insert(job.ps, job.train), job.sec.validator,
                        lifetime=int(job.knobs["register_timeout"] * 1000),
                        must_be_fresh=True, no_response=True)

    def on_confirm(self, c: names.Training, data: Data) -> None:
        job = self.job
        if (c.ps, c.train) == (job.ps, job.train) and job.sec.verify(data):
            job.last_from_ps = job.now()
            self.confirmed.set()

    async def register(self) -> None:
        """Insert until the PS's confirmation comes back (it is a *distribute* Data, so it
        arrives through App.on_distribute, not as the answer to a pending Interest): every
        few round trips, for register_tries tries and ps_timeout at least (a PS restarting
        is silent for seconds, and tries a few round trips apart are over sooner)."""
        job, k = self.job, self.job.knobs
        give_up = job.now() + k["ps_timeout"]
        attempt = 0
        while attempt < int(k["register_tries"]) or job.now() < give_up:
            job.counters.register_tries += 1
            self.confirmed.clear()
            self.send_insert()
            wait = job.fetcher.bounded(k["register_timeout"] * min(2 ** attempt, 8))
            if await wait_event(self.confirmed, wait):
                return
            attempt += 1
        raise JobFailed(f"registration not confirmed after {attempt} tries in "
                        f"{k['ps_timeout']:g} s")

    async def refresh(self) -> None:
        while True:
            await asyncio.sleep(self.job.knobs["register_interval"])
            self.send_insert()

    async def leave(self) -> None:
        """The PS lingers until every worker has left: a lost *remove* would keep it for
        `linger`, so a few tries, each a few round trips (a forwarder does not pass on the
        *remove* of a worker that is not the last behind it: those never get an answer)."""
        job = self.job
        for _ in range(REMOVE_TRIES):
            try:
                await job.app.express(names.remove(job.ps, job.train), job.sec.validator,
                                      lifetime=int(1000 * job.fetcher.bounded(0.3)),
                                      must_be_fresh=True)
                return
            except (InterestTimeout, InterestNack, ValidationFailure, NetworkError):
                continue
            except InterestCanceled:
                return
