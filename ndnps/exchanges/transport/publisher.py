"""A producer's pushed versions, sans-I/O: each version's signed segments are kept for probes
(the last `keep_versions`: a Recent) and answered by segment; what to push is returned to the
owner, which paces it out (ndnps.client.pacer).

Signing (and naming) is the owner's: it passes `sign(version, blob) -> wires`, so one
Publisher serves any producer and prefix — the PS's /*distribute*/<ps>/<train>, or a
peer-to-peer worker's own stream — and knows nothing of python-ndn.
"""
from __future__ import annotations

from typing import Callable, Sequence, Union

from .buffers import Recent

# an object: its bytes, or the pieces whose join they are (ndnps.protocol.codec.tensor_pieces)
Blob = Union[bytes, Sequence[Union[bytes, memoryview]]]
Sign = Callable[[int, Blob], list[bytes]]       # (version, blob) -> its signed segments


class Publisher:
    def __init__(self, sign: Sign, keep_versions: int) -> None:
        self._sign = sign
        self._kept: Recent[int, list[bytes]] = Recent(keep_versions)
        self.probes_answered = 0

    def publish(self, version: int, blob: Blob) -> list[bytes]:
        """Version `version` is `blob`: its signed segments, kept for probes; push them.
        Publishing a version again replaces its segments."""
        wires = self._sign(version, blob)
        self._kept.put(version, wires)
        return wires

    def get(self, version: int) -> list[bytes] | None:
        """The kept segments of `version` (None: evicted, or never published)."""
        return self._kept.get(version)

    def answer(self, version: int, segment: int) -> bytes | None:
        """A probe for (version, segment): the kept segment, or None (evicted, not produced
        yet, or beyond the last segment: the Interest is left unanswered)."""
        wires = self._kept.get(version)
        if wires is None or not 0 <= segment < len(wires):
            return None
        self.probes_answered += 1
        return wires[segment]
