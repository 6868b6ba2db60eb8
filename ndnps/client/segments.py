"""A producer's side of a segmented object: a blob cut into signed Data packets (content
<= SEGMENT_SIZE, FinalBlockId on every one), written by the base's fixed-shape encoder
(``ndnps.ndn.encoders.encode_data``: MetaInfo and SignatureInfo encoded once per object, each
segment's content copied once, into its packet, from the blob or straight from the pieces it
is made of: ndnps.protocol.codec.tensor_pieces).  The receiver's side (Assembly) is
sans-I/O, in ndnps.exchanges.transport.buffers."""
from __future__ import annotations

from typing import Callable, Sequence, Union

from ndnps.ndn import encoders
from ndnps.ndn.conventions import SEGMENT_SIZE, segment_component
from ndnps.ndn.encoders import Bytes

from .security import Signer

NameOf = Callable[[int], Sequence[Bytes]]
Blob = Union[Bytes, Sequence[Bytes]]      # a buffer, or the pieces whose join it is


def sign_segments(blob: Blob, name_of: NameOf, signer: Signer,
                  freshness_ms: int | None = None, size: int = SEGMENT_SIZE) -> list[bytes]:
    """The wire Data packets of `blob` (a buffer, or the pieces whose join it is:
    ndnps.protocol.codec.tensor_pieces), segment i named `name_of(i)`."""
    return sign_parts(cut(blob, size), name_of, signer, freshness_ms)


def cut(blob: Blob, size: int = SEGMENT_SIZE) -> list[Bytes]:
    """conventions.segment's cut, as views of the blob (a segment that spans two pieces is the
    one joined): each byte is copied once, into its packet, when the segments are signed."""
    if size <= 0:
        raise ValueError("max_size must be positive")
    pieces = [blob] if isinstance(blob, (bytes, bytearray, memoryview)) else blob
    out: list[Bytes] = []
    spanning: list[Bytes] = []          # the start of a segment an earlier piece ended in
    have = 0
    for piece in pieces:
        mv = memoryview(piece).cast("B")
        pos, end = 0, len(mv)
        if spanning:
            pos = min(size - have, end)
            spanning.append(mv[:pos])
            have += pos
            if have < size:
                continue
            out.append(b"".join(spanning))
            spanning, have = [], 0
        while end - pos >= size:
            out.append(mv[pos:pos + size])
            pos += size
        if pos < end:
            spanning, have = [mv[pos:]], end - pos
    if spanning or not out:
        out.append(b"".join(spanning))
    return out


def sign_parts(parts: Sequence[Bytes], name_of: NameOf, signer: Signer,
               freshness_ms: int | None = None) -> list[bytes]:
    """The wire Data packets of an object already cut: part i is segment i's content (each
    at most SEGMENT_SIZE), named `name_of(i)`, FinalBlockId on every one."""
    meta_wire = encoders.encode_meta_info(freshness_ms, segment_component(len(parts) - 1))
    info, sign = signer.signature_info, signer.sign
    return [encoders.encode_data(name_of(i), meta_wire, part, info, sign)
            for i, part in enumerate(parts)]
