"""How peers combine a version's gradients without a PS (docs/collectives.md): each returns the
mean of every peer's gradient, the same bytes at every peer.

* ``Scheduled`` — ring or BCube all-reduce (the schedules of ndnps.exchanges.collectives.schedules,
  driven by the sans-I/O ndnps.exchanges.collectives.allreduce.AllReduce): at each step a peer
  publishes the parts others fetch from it
  (``/<peer>/<train>/<v>/reduce|gather/<set>/<level>/<part>/<seg>``, raw float32, signed) and
  fetches the parts it needs with the peer's SegmentFetcher (held until the producer's step opens,
  then windowed with loss recovery). A final part several peers fetch (BCube's distribute) has one
  name: the switch's PIT merges their Interests, or its Content Store answers the later ones, so
  the summer sends it once.
* ``Shared`` — ``InNetwork`` or a ring round by round, as the share controller decides
  (several jobs taking the aggregators in turns: docs/sharing.md).
* ``InNetwork`` — every peer publishes its gradient as summable segments under the collect
  name ``/<peer>/<job>/<train>/<v>/<seg>`` and asks ``aggregate_at`` for each segment's sum
  with the same plan (aggregate.py): the aggregator's PIT merges the peers' identical
  Interests, one sum returns to all. A sum that does not come falls back to the peer adding
  every peer's segment itself (the same fixed-point sum, the same bytes).

A peer silent for worker_timeout raises PeerLost: the job stops, or re-forms without it
(ndnps.apps.peer; docs/collectives.md). Exchanges are named by the version's round (`round_of`):
a re-formed collective never reuses an earlier epoch's names.
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable, Protocol

import numpy as np

from ndnps.client.fetcher import FetchError, SegmentFetcher
from ndnps.client.security import Security
from ndnps.client.segments import sign_parts, sign_segments
from ndnps.exchanges.collectives.allreduce import AllReduce
from ndnps.exchanges.collectives.schedules import BCube, Transfer, ring
from ndnps.exchanges.ps.membership import Member
from ndnps.ndn.conventions import SEGMENT_SIZE
from ndnps.protocol import messages, names
from ndnps.protocol.names import FormalName
from ndnps.protocol.config import PeerConfig, StageConfig

from .aggregate import Aggregate
from .published import Published
from .share import Decision, Share
from .training import PsCounters

# Data of a version's parts stay fresh this long (ms): a switch's Content Store answers the
# peers that ask for a final part after its first copy went by (MustBeFresh fetches)
FRESHNESS_MS = 60_000


# The first lifetime of the Interests a producer may hold (its step not open yet): 4 smoothed
# round trips, this at least, doubling per expiry to collect_lifetime. A part is usually ready
# or soon, and a held Interest lost on the way waits its whole lifetime (at 2 s, 5 % loss on
# every link made a ring's version 11 s; at 0.1 s, 0.55 s); shorter than the round trip, it
# expires while its Data queues on a slow link and is asked again (BCube(3, 2) at 20 Mbit/s,
# a 1 MiB tbf queue: 12 % above the analytic bytes at a fixed 0.1 s, 8.5 % at 2 s)
HELD_FIRST = 0.1


class PeerLost(Exception):
    """A peer did not answer for worker_timeout: the collective cannot complete."""


class Owner(Protocol):
    """A peer of a collective (ndnps.apps.peer), or a pipeline's stage (ndnps.apps.stage: its ring
    across machines)."""
    @property
    def cfg(self) -> PeerConfig | StageConfig: ...
    app: Any
    name: str
    fetcher: SegmentFetcher
    sec: Security
    published: Published
    n_params: int
    members: list[str]          # the peers of the current epoch, in index order

    def round(self, v: int) -> int: ...


class PeerOwner(Owner, Protocol):
    """A PS-less peer (its aggregator, its share controller)."""
    @property
    def cfg(self) -> PeerConfig: ...


EPOCH_MASK = (1 << 32) - 1      # a round's version


def round_of(v: int, epoch: int) -> int:
    """The number a version's exchanges are named by: the version in the first epoch, and in
    a re-formed collective's epoch e the version plus e·2^32 — never the name of an earlier
    epoch's part or gradient, whose bytes differ (other peers, other parameters)."""
    return v + (epoch << 32)


def schedule_of(peers: int, size: int, bcube: tuple[int, int] | None = None) -> list[Transfer]:
    """The all-reduce schedule of a `size`-value vector over `peers` peers: a ring, or
    BCube(n, k) level by level when `bcube` is (n, k)."""
    return ring(peers, size) if bcube is None else BCube(*bcube).schedule(size)


def part_key(v: int, t: Transfer) -> tuple:
    """What names a part within a version (its producer is the transfer's source)."""
    return (v, *part_of(t))


def part_of(t: Transfer) -> tuple:
    """A part's name within any version: a distribute part goes to several peers, one name."""
    return (t.reduce, t.set, t.level, t.part)


class Scheduled:
    """Ring all-reduce, or BCube's (`bcube`: its (n, k))."""

    def __init__(self, peer: Owner, bcube: tuple[int, int] | None = None) -> None:
        self.peer = peer
        self.index = peer.members.index(peer.name)
        self.schedule = schedule_of(len(peer.members), peer.n_params, bcube)
        # what this peer serves, once per name (a distribute part goes to several peers)
        offers: dict[tuple, Transfer] = {}
        for t in self.schedule:
            if t.src == self.index:
                offers.setdefault(part_of(t), t)
        self.offers = list(offers.values())

    def analytic(self) -> dict[int, float]:
        """The bytes of values this peer sends per version, by level: each part once."""
        out: dict[int, float] = {}
        for t in self.offers:
            out[t.level] = out.get(t.level, 0.0) + 4.0 * (t.range[1] - t.range[0])
        return out

    async def __call__(self, v: int, vector: np.ndarray, loss: float,
                       compute: float) -> np.ndarray:
        v = self.peer.round(v)
        ar = AllReduce(self.index, vector, self.schedule)
        self._publish(v, ar)
        while not ar.done:
            wants = ar.wants()
            try:
                async with asyncio.TaskGroup() as tg:   # one lost peer cancels the rest
                    tasks = [tg.create_task(self._fetch(v, t)) for t in wants]
            except* PeerLost as group:      # the TaskGroup wraps it: the peer exits 3, not 1
                raise group.exceptions[0] from None
            for t, task in zip(wants, tasks):
                ar.arrived(t.step, t.src, t.range, task.result())
            self._publish(v, ar)
        return ar.vector / np.float32(len(self.peer.members))

    def counts(self) -> dict[str, int]:
        """Counters for the records: none beyond the fetcher's."""
        return {}

    def _publish(self, v: int, ar: AllReduce) -> None:
        """The parts of every step opened so far, signed, as their values stood then."""
        peer = self.peer
        for t in self.offers:
            key = part_key(v, t)
            if key in peer.published.objects:
                continue
            values = ar.served(t.step, t.range)
            if values is None:
                continue
            peer.published.publish(key, sign_segments(
                values.tobytes(), self._namer(peer.name, v, t), peer.sec.signer,
                FRESHNESS_MS))

    def _namer(self, producer: str, v: int, t: Transfer) -> Callable[[int], FormalName]:
        """Segment s of transfer t's part, as `producer` serves it."""
        train = self.peer.cfg.who.train
        return lambda s: names.partial(producer, train, v, t.reduce, t.set, t.level, t.part, s)

    async def _fetch(self, v: int, t: Transfer) -> np.ndarray:
        src = self.peer.members[t.src]
        return await fetch_floats(self.peer.fetcher, self.peer.cfg, self._namer(src, v, t),
                                  t.range[1] - t.range[0], f"peer {src}",
                                  f"version {v & EPOCH_MASK} (step {t.step}, part {t.range})")


async def fetch_floats(fetcher: SegmentFetcher, cfg: PeerConfig | StageConfig,
                       name_of: Callable[[int], FormalName], count: int, producer: str,
                       what: str) -> np.ndarray:
    """`count` float32 values that `producer` serves once it has made them (a partial sum, a
    stage's activation): the Interests held there, first for 4 round trips (HELD_FIRST at
    least), doubling to collect_lifetime; the rest windowed, losses fetched again. PeerLost:
    the producer silent for worker_timeout, or the wrong number of bytes."""
    size = 4 * count
    longest, timeout = cfg.transport.collect_lifetime, cfg.liveness.worker_timeout
    loop = asyncio.get_running_loop()
    try:
        parts, _, _ = await fetcher.fetch_held(
            name_of, max(0, -(-size // SEGMENT_SIZE) - 1),
            min(max(HELD_FIRST, 4 * fetcher.srtt()), longest), longest, loop.time() + timeout)
    except FetchError as e:
        raise PeerLost(f"{producer} silent for {timeout:g} s at {what}: {e}") from None
    blob = b"".join(parts)
    if len(blob) != size:
        raise PeerLost(f"{producer} sent {len(blob)} bytes for {what}, not {size}")
    return np.frombuffer(blob, np.float32)


class InNetwork:
    def __init__(self, peer: PeerOwner) -> None:
        self.peer = peer
        cfg = peer.cfg
        self.counters = PsCounters()            # segments_aggregated / _fallback, malformed
        self.lost: list[str] = []
        self.members = [Member(p, i) for i, p in enumerate(peer.members)]
        self.contents: dict[int, list[bytes]] = {}      # step -> my segments' contents
        self.aggregate = Aggregate(cfg, peer.app, peer.fetcher, peer.sec, peer.n_params,
                                   self.counters, lambda w, why: self.lost.append(
                                       f"peer {w.gpu} {why}"),
                                   own=(peer.name, lambda step: self.contents[step]))

    def analytic(self) -> dict[int, float]:
        """Its gradient's values, once, to the aggregator."""
        return {0: 4.0 * self.peer.n_params}

    def counts(self) -> dict[str, int]:
        """Segments summed by the aggregator, and those summed here instead (fallback)."""
        return {"segments_aggregated": self.counters.segments_aggregated,
                "segments_fallback": self.counters.segments_fallback}

    async def __call__(self, v: int, vector: np.ndarray, loss: float,
                       compute: float) -> np.ndarray:
        peer, cfg = self.peer, self.peer.cfg
        v = peer.round(v)
        parts = messages.gradient_parts(vector, v, v, loss, compute,
                                        per=self.aggregate.per)
        self.contents = {v: parts}
        peer.published.publish((v, "gradient"), sign_parts(
            parts, lambda s: names.collect(peer.name, cfg.who.ps, cfg.who.train, v, s),
            peer.sec.signer, FRESHNESS_MS))
        total, counts = await self.aggregate(v, self.members, len(parts) - 1)
        if self.lost:
            raise PeerLost(f"{self.lost[0]} at version {v & EPOCH_MASK}")
        return total / counts


class Shared:
    """collective = "ina" with a share controller (docs/sharing.md): each round in the network or,
    when the controller gives the aggregators to another job, by ring all-reduce at once —
    the same at every peer, which the controller's agreement guarantees. `last`: the latest
    round's decision, for the records."""

    def __init__(self, peer: PeerOwner, share: Share) -> None:
        self.peer, self.share = peer, share
        self.network = InNetwork(peer)
        self.ring = Scheduled(peer)
        self.last: Decision | None = None
        self.rounds_ring = 0

    def analytic(self) -> dict[int, float]:
        return self.network.analytic()

    def counts(self) -> dict[str, int]:
        return {**self.network.counts(), "rounds_ring": self.rounds_ring}

    def prepare(self, v: int, ready_in: float) -> None:
        """Version v's gradient is being computed, ready in about `ready_in` s: its round
        asked so that the answer comes then."""
        self.share.ask_early(self.peer.round(v), ready_in)

    async def __call__(self, v: int, vector: np.ndarray, loss: float,
                       compute: float) -> np.ndarray:
        r = self.peer.round(v)
        d = self.last = await self.share.ask(r)
        if d.use:
            out = await self.network(v, vector, loss, compute)
            self.share.done(r, self.network.aggregate.clean)
            return out
        self.rounds_ring += 1
        out = await self.ring(v, vector, loss, compute)
        self.share.done(r, True)
        return out
