"""Leaving a PS-less training without stranding anyone (ndnps.apps.peer, ndnps.apps.stage): the
others may still be fetching what this app produced last. Once its training is over an app
publishes a done marker — its "gradient" of the version after the last, one segment `DONE`, under
the collect name `/<app>/<ps>/<train>/<v>/<s>` — and stays until every other app it exchanges with
has said the same, then until nobody asked it anything for `QUIET`; the training's `linger` at
most. An app that left already is not waited for."""
from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from ndnps.client.fetcher import FetchError, SegmentFetcher
from ndnps.client.security import Security
from ndnps.client.segments import sign_parts
from ndnps.ndn.clock import monotonic
from ndnps.protocol import names
from ndnps.protocol.config import PeerConfig, StageConfig
from ndnps.protocol.parts import Identity

from .published import Published

log = logging.getLogger("linger")

QUIET = 0.5             # s without an Interest for our last version before a done app leaves
DONE = b"done"          # the content of the marker
FRESHNESS_MS = 60_000


class Lingering(Protocol):
    @property
    def cfg(self) -> PeerConfig | StageConfig: ...
    name: str
    sec: Security
    fetcher: SegmentFetcher
    published: Published
    last_asked: float           # clock.monotonic() of the last Interest for our newest version


def done_name(app: str, who: Identity, v: int, seg: int = 0) -> names.FormalName:
    return names.collect(app, who.ps, who.train, v, seg)


async def linger(owner: Lingering, others: list[str], v: int) -> None:
    """Publish our marker for round `v`, wait for the `others`' and for quiet."""
    cfg = owner.cfg
    owner.published.publish((v, "gradient"), sign_parts(
        [DONE], lambda s: done_name(owner.name, cfg.who, v, s), owner.sec.signer, FRESHNESS_MS))
    loop = asyncio.get_running_loop()
    until = loop.time() + cfg.liveness.linger

    async def done(other: str) -> bool:
        try:
            await owner.fetcher.fetch_held(
                lambda s: done_name(other, cfg.who, v, s), 0, cfg.transport.collect_lifetime,
                cfg.transport.collect_lifetime, until, whole=False)
            return True
        except FetchError:
            return False

    heard = await asyncio.gather(*(done(o) for o in others))
    if not all(heard):
        log.info("left without hearing that %s were done",
                 ", ".join(o for o, h in zip(others, heard) if not h))
    while loop.time() < until:
        owner.published.held.purge()
        if monotonic() - owner.last_asked > QUIET and not len(owner.published.held):
            return
        await asyncio.sleep(0.05)
