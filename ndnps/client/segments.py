"""A producer's side of a segmented object: a blob cut into signed Data packets (content
<= SEGMENT_SIZE, FinalBlockId on every one).  The receiver's side (Assembly) is sans-I/O, in
ndnps.exchanges.buffers."""
from __future__ import annotations

from typing import Callable, Sequence

from ndn.encoding import FormalName, MetaInfo, Name, Signer, make_data

from ndnps.ndn import packet
from ndnps.ndn.conventions import SEGMENT_SIZE, segment, segment_component

from .security import DigestSigner, HmacSigner

# Signers whose wire form ndnps.client.wire reproduces byte for byte (tests/unit/test_wire.py)
_FIXED_SHAPE_SIGNERS = (HmacSigner, DigestSigner)


def sign_segments(blob: bytes, name_of: Callable[[int], FormalName], signer: Signer,
                  freshness_ms: int | None = None, size: int = SEGMENT_SIZE) -> list[bytes]:
    """The wire Data packets of `blob`, segment i named `name_of(i)`.

    With our own signers the packets are written by the fixed-shape encoder (MetaInfo and
    SignatureInfo encoded once per object, ~4x cheaper than python-ndn's make_data, the same
    bytes); any other signer goes through make_data."""
    if size <= 0:
        raise ValueError("max_size must be positive")
    if type(signer) not in _FIXED_SHAPE_SIGNERS:
        return sign_parts(segment(blob, size), name_of, signer, freshness_ms)
    # conventions.segment's cut, as views: the content is copied once, into the packet
    mv = memoryview(blob).cast("B")
    views: list[bytes | memoryview] = [mv[i:i + size] for i in range(0, len(mv), size)] or [b""]
    return sign_parts(views, name_of, signer, freshness_ms)


def sign_parts(parts: Sequence[bytes | memoryview], name_of: Callable[[int], FormalName],
               signer: Signer, freshness_ms: int | None = None) -> list[bytes]:
    """The wire Data packets of an object already cut: part i is segment i's content (each
    at most SEGMENT_SIZE), named `name_of(i)`, FinalBlockId on every one."""
    if type(signer) not in _FIXED_SHAPE_SIGNERS:
        meta = MetaInfo(freshness_period=freshness_ms,
                        final_block_id=segment_component(len(parts) - 1))
        return [bytes(make_data(name_of(i), meta, bytes(part), signer=signer))
                for i, part in enumerate(parts)]
    meta_wire = packet.encode_meta_info(freshness_ms, segment_component(len(parts) - 1))
    info, sign = signer.signature_info, signer.sign
    out = []
    for i, part in enumerate(parts):
        name = name_of(i)
        try:
            out.append(packet.encode_data(name, meta_wire, part, info, sign))
        except TypeError:                     # a NonStrictName (str components, ...)
            out.append(packet.encode_data(Name.normalize(name), meta_wire, part, info, sign))
    return out
