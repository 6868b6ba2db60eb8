"""The unicast baseline (push_mode = "unicast"): NDN without the persistent PIT.  Every worker
fetches every version from the PS under its own name, so the PS sends one copy per worker:

    /<ps>/<train>/<gpu>/params/<version>/<seg>

PS side (``ParamsServer``): each version's raw segments are kept (a worker's copy is signed
when it asks: its name differs from every other worker's); an Interest for a version not made
yet is held until it is; the final version's fetches are tracked, so the PS lingers until
every live worker has all of it.

Worker side (``fetch_copy``): the next version is fetched as any object, its first Interests
living collect_lifetime and re-expressed for ps_timeout in all (the PS holds them until the
version exists).
"""
from __future__ import annotations

import math
from typing import Callable

from ndnps.client.fetcher import SegmentFetcher
from ndnps.client.pending import HeldInterests
from ndnps.exchanges.transport.buffers import Recent
from ndnps.ndn.conventions import segment, segment_component
from ndnps.protocol import names

Reply = Callable[[bytes], object]
ParamsKey = tuple[str, int, int]        # gpu, version, segment


class ParamsServer:
    """`make_data(name, content, final_block_id=...) -> wire` signs one Data (the app's)."""

    def __init__(self, ps: str, train: str, keep: int,
                 make_data: Callable[..., bytes]) -> None:
        self.ps, self.train = ps, train
        self._make_data = make_data
        self.blobs: Recent[int, list[bytes]] = Recent(keep)   # raw segments per version
        self.held: HeldInterests[ParamsKey] = HeldInterests()
        self.served = 0                 # segments sent (params_served)
        self._final: dict[str, set[int]] = {}       # the final version's segments served
        self._fetched_final: set[str] = set()       # workers sent all of them

    def wire(self, gpu: str, version: int, seg: int, parts: list[bytes]) -> bytes:
        return bytes(self._make_data(names.params(self.ps, self.train, gpu, version, seg),
                                     parts[seg], final_block_id=segment_component(len(parts) - 1)))

    def publish(self, version: int, blob: bytes) -> None:
        """Version `version` is `blob`: kept, and the Interests held for it answered."""
        parts = segment(blob)
        self.blobs.put(version, parts)
        for key in [k for k in self.held.keys() if k[1] == version]:
            gpu, _, seg = key
            if seg < len(parts):
                self.served += self.held.release(key, self.wire(gpu, version, seg, parts))

    def serve(self, p: names.Params, reply: Reply, deadline_ms: int, newest: int,
              final: bool) -> bool:
        """Answer a worker's Interest for its copy; one for a version newer than `newest`
        (the PS's) is held.  `final`: `newest` is the last version.  True when this answer
        completed the worker's fetch of the last version."""
        parts = self.blobs.get(p.version)
        if parts is None:
            if p.version > newest:
                self.held.hold((p.gpu, p.version, p.segment), reply, deadline_ms)
            return False
        if p.segment >= len(parts):
            return False
        self.served += 1
        reply(self.wire(p.gpu, p.version, p.segment, parts))
        if not (final and p.version == newest):
            return False
        got = self._final.setdefault(p.gpu, set())
        got.add(p.segment)
        if len(got) < len(parts):
            return False
        self._fetched_final.add(p.gpu)
        return True

    def fetched_final(self, gpu: str) -> bool:
        """Whether `gpu` was sent every segment of the last version."""
        return gpu in self._fetched_final


async def fetch_copy(fetcher: SegmentFetcher, ps: str, train: str, gpu: str, version: int,
                     lifetime: float, patience: float) -> list[bytes | memoryview]:
    """Worker side: our own copy of `version`'s segments (raises FetchError)."""
    return await fetcher.fetch(lambda s: names.params(ps, train, gpu, version, s),
                               first_lifetime=lifetime, fresh=True,
                               first_tries=max(1, math.ceil(patience / lifetime)))
