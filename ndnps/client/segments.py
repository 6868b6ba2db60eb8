"""A producer's side of a segmented object: a blob cut into signed Data packets (content
<= SEGMENT_SIZE, FinalBlockId on every one), written by the base's fixed-shape encoder
(``ndnps.ndn.packet.encode_data``: MetaInfo and SignatureInfo encoded once per object, each
segment's content copied once, into its packet).  The receiver's side (Assembly) is
sans-I/O, in ndnps.exchanges.buffers."""
from __future__ import annotations

from typing import Callable, Sequence

from ndnps.ndn import packet
from ndnps.ndn.conventions import SEGMENT_SIZE, segment_component
from ndnps.ndn.packet import Bytes

from .security import Signer

NameOf = Callable[[int], Sequence[Bytes]]


def sign_segments(blob: Bytes, name_of: NameOf, signer: Signer,
                  freshness_ms: int | None = None, size: int = SEGMENT_SIZE) -> list[bytes]:
    """The wire Data packets of `blob`, segment i named `name_of(i)` (conventions.segment's
    cut, as views of the blob: nothing copied until the packets are written)."""
    if size <= 0:
        raise ValueError("max_size must be positive")
    mv = memoryview(blob).cast("B")
    views: list[Bytes] = [mv[i:i + size] for i in range(0, len(mv), size)] or [b""]
    return sign_parts(views, name_of, signer, freshness_ms)


def sign_parts(parts: Sequence[Bytes], name_of: NameOf, signer: Signer,
               freshness_ms: int | None = None) -> list[bytes]:
    """The wire Data packets of an object already cut: part i is segment i's content (each
    at most SEGMENT_SIZE), named `name_of(i)`, FinalBlockId on every one."""
    meta_wire = packet.encode_meta_info(freshness_ms, segment_component(len(parts) - 1))
    info, sign = signer.signature_info, signer.sign
    return [packet.encode_data(name_of(i), meta_wire, part, info, sign)
            for i, part in enumerate(parts)]
