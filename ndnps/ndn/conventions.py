"""NDN naming conventions (rev. 3) for segmented objects: the version and segment components
and the cutting of an object into segments that each fit one Data packet.

python-ndn's `Component.from_segment` and NDNts's `Segment` write the same bytes; the apps,
the client runtime and the forwarder's management datasets all cut and name segments here.
"""
from __future__ import annotations

from typing import Final, Iterable

from .tlv import SEGMENT_COMPONENT, VERSION_COMPONENT, encode_nonneg, encode_tlv, read_tl

SEGMENT_SIZE: Final = 8000      # content bytes per segment: a Data stays under one 8800-byte packet


def segment_component(n: int) -> bytes:
    """`seg=n`: a SegmentNameComponent (also the form of a FinalBlockId)."""
    if n < 0:
        raise ValueError(f"segment {n} is negative")
    return encode_tlv(SEGMENT_COMPONENT, encode_nonneg(n))


def version_component(n: int) -> bytes:
    """`v=n`: a VersionNameComponent."""
    if n < 0:
        raise ValueError(f"version {n} is negative")
    return encode_tlv(VERSION_COMPONENT, encode_nonneg(n))


def segment_number(component: bytes | memoryview | None) -> int | None:
    """The number of one encoded SegmentNameComponent (a name's last component, a
    FinalBlockId), or None for anything else."""
    if not component:
        return None
    try:
        typ, voff, vend = read_tl(component, 0, len(component))
    except ValueError:
        return None
    if typ != SEGMENT_COMPONENT or vend != len(component) or vend - voff not in (1, 2, 4, 8):
        return None
    return int.from_bytes(component[voff:vend], "big")


def segment(blob: bytes | bytearray | memoryview, max_size: int = SEGMENT_SIZE) -> list[bytes]:
    """Cut a blob into segments of at most max_size bytes; an empty blob is one empty segment."""
    if max_size <= 0:
        raise ValueError("max_size must be positive")
    mv = memoryview(blob).cast("B")
    if len(mv) == 0:
        return [b""]
    return [bytes(mv[i:i + max_size]) for i in range(0, len(mv), max_size)]


def reassemble(segments: Iterable[bytes | bytearray | memoryview]) -> bytes:
    """Concatenate segments in order (the inverse of segment)."""
    return b"".join(segments)
