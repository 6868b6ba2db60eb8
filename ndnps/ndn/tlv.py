"""Minimal NDN TLV primitives (packet format v0.3): just what the forwarder's hot path needs.

Every function works on `bytes` and offsets; nothing is copied until a caller slices.
"""
from __future__ import annotations

import hashlib
from typing import Final

MAX_PACKET_SIZE: Final = 8800

# Network layer
INTEREST: Final = 0x05
DATA: Final = 0x06
NAME: Final = 0x07
GENERIC_COMPONENT: Final = 0x08
IMPLICIT_DIGEST: Final = 0x01
PARAMS_DIGEST: Final = 0x02
VERSION_COMPONENT: Final = 0x36
SEGMENT_COMPONENT: Final = 0x32
CAN_BE_PREFIX: Final = 0x21
MUST_BE_FRESH: Final = 0x12
FORWARDING_HINT: Final = 0x1E
NONCE: Final = 0x0A
INTEREST_LIFETIME: Final = 0x0C
HOP_LIMIT: Final = 0x22
APP_PARAMETERS: Final = 0x24
META_INFO: Final = 0x14
CONTENT_TYPE: Final = 0x18
FRESHNESS_PERIOD: Final = 0x19
FINAL_BLOCK_ID: Final = 0x1A
CONTENT: Final = 0x15
SIGNATURE_INFO: Final = 0x16
SIGNATURE_VALUE: Final = 0x17
SIGNATURE_TYPE: Final = 0x1B
KEY_LOCATOR: Final = 0x1C
INTEREST_SIGNATURE_INFO: Final = 0x2C
INTEREST_SIGNATURE_VALUE: Final = 0x2E

# NDNLPv2
LP_PACKET: Final = 0x64
LP_FRAGMENT: Final = 0x50
LP_SEQUENCE: Final = 0x51
LP_FRAG_INDEX: Final = 0x52
LP_FRAG_COUNT: Final = 0x53
LP_PIT_TOKEN: Final = 0x62
LP_NACK: Final = 0x0320
LP_NACK_REASON: Final = 0x0321
LP_INCOMING_FACE_ID: Final = 0x032C
LP_NEXT_HOP_FACE_ID: Final = 0x0330
LP_CACHE_POLICY: Final = 0x0334
LP_CONGESTION_MARK: Final = 0x0340
LP_ACK: Final = 0x0344
LP_TX_SEQUENCE: Final = 0x0348
LP_NON_DISCOVERY: Final = 0x034C
LP_PREFIX_ANNOUNCEMENT: Final = 0x0350


class DecodeError(ValueError):
    """The bytes are not a well-formed TLV structure of the expected kind."""


def read_varnum(buf: bytes | memoryview, off: int) -> tuple[int, int]:
    """Read one TLV-TYPE or TLV-LENGTH number; return (value, offset after it)."""
    try:
        first = buf[off]
    except IndexError:
        raise DecodeError("truncated TLV number") from None
    if first < 253:
        return first, off + 1
    size = 2 if first == 253 else 4 if first == 254 else 8
    end = off + 1 + size
    if end > len(buf):
        raise DecodeError("truncated TLV number")
    return int.from_bytes(buf[off + 1:end], "big"), end


def read_tl(buf: bytes | memoryview, off: int, end: int) -> tuple[int, int, int]:
    """Read TYPE and LENGTH at `off`; return (type, value offset, value end). Checks bounds.
    One-octet TYPE and LENGTH (nearly every element) are read inline."""
    try:
        typ = buf[off]
        length = buf[off + 1]
    except IndexError:
        raise DecodeError("truncated TLV") from None
    if typ < 253 and length < 253:
        off += 2
    else:
        typ, off = read_varnum(buf, off)
        length, off = read_varnum(buf, off)
    vend = off + length
    if vend > end:
        raise DecodeError(f"TLV 0x{typ:x} length {length} exceeds its container")
    return typ, off, vend


def read_components(buf: bytes | memoryview, start: int, end: int) -> list:
    """The components of a Name's TLV-VALUE `buf[start:end]`, each a slice of `buf` with its
    TYPE and LENGTH (memoryviews into a memoryview: nothing copied)."""
    comps = []
    pos = start
    while pos < end:
        _, _, cend = read_tl(buf, pos, end)
        comps.append(buf[pos:cend])
        pos = cend
    return comps


def read_component(comp: bytes | memoryview) -> tuple[int, bytes]:
    """One encoded component's TLV-TYPE and value (DecodeError unless it is exactly one)."""
    typ, voff, vend = read_tl(comp, 0, len(comp))
    if vend != len(comp):
        raise DecodeError("not one component")
    return typ, bytes(comp[voff:vend])


def encode_varnum(n: int) -> bytes:
    if n < 253:
        return bytes((n,))
    if n <= 0xFFFF:
        return b"\xfd" + n.to_bytes(2, "big")
    if n <= 0xFFFFFFFF:
        return b"\xfe" + n.to_bytes(4, "big")
    return b"\xff" + n.to_bytes(8, "big")


def encode_tlv(typ: int, value: bytes) -> bytes:
    return encode_varnum(typ) + encode_varnum(len(value)) + value


def tl(typ: int, length: int) -> bytes:
    """TYPE and LENGTH of an element whose value follows (`encode_tlv` without the copy)."""
    if typ < 253 and length < 253:
        return bytes((typ, length))
    return encode_varnum(typ) + encode_varnum(length)


def nonneg_element(typ: int, value: int) -> bytes:
    """A NonNegativeInteger element, in its shortest of 1, 2, 4 or 8 bytes."""
    if value < 0:
        raise ValueError(f"{value} is not a non-negative integer")
    return encode_tlv(typ, encode_nonneg(value))


def encode_nonneg(n: int) -> bytes:
    """NonNegativeInteger: 1, 2, 4 or 8 bytes, big endian."""
    if n <= 0xFF:
        return bytes((n,))
    if n <= 0xFFFF:
        return n.to_bytes(2, "big")
    if n <= 0xFFFFFFFF:
        return n.to_bytes(4, "big")
    return n.to_bytes(8, "big")


def decode_nonneg(buf: bytes | memoryview, start: int, end: int) -> int:
    size = end - start
    if size not in (1, 2, 4, 8):
        raise DecodeError(f"NonNegativeInteger of {size} bytes")
    return int.from_bytes(buf[start:end], "big")


def short_length(buf: bytes | bytearray | memoryview, off: int) -> tuple[int, int] | None:
    """The TLV-LENGTH at `off` in one or three octets, as every packet of ours has (at most
    8800 octets): (value offset, length); None when it is longer or truncated.  The fixed-shape
    readers of NDNLPv2 headers (link reliability, fragmentation, the apps' LpPacket) use it."""
    if off >= len(buf):
        return None
    first = buf[off]
    if first < 253:
        return off + 1, first
    if first == 253 and off + 3 <= len(buf):
        return off + 3, (buf[off + 1] << 8) | buf[off + 2]
    return None


def lp_fragment(wire: bytes | memoryview) -> tuple[int, int, int, int]:
    """Where an LpPacket's parts lie, by the one walk over its header fields to its Fragment
    (the markers, congestion marks, link reliability and fragmentation read them so):
    (header fields' start, their end — where the Fragment field begins —, network packet's
    start, its end — the Fragment's TLV-VALUE).  A bare network packet is all packet,
    (0, 0, 0, len); an LpPacket without a Fragment (IDLE, Acks alone) all header fields, its
    packet empty at their end.  The walk stops at the first Fragment: what follows is not
    read.  DecodeError if malformed.  Here, below every reader of an LpPacket (packet.py
    imports congestion.py, which reads it too), beside NDNLPv2's TLV-TYPEs."""
    if not wire or wire[0] != LP_PACKET:
        return 0, 0, 0, len(wire)
    _, off, end = read_tl(wire, 0, len(wire))
    start = off
    while off < end:
        field = off
        typ, voff, off = read_tl(wire, off, end)
        if typ == LP_FRAGMENT:
            return start, field, voff, off
    return start, end, end, end


def outer_length(buf: bytes | bytearray, off: int) -> tuple[int, int] | None:
    """For stream framing: (header size, value length) of the TLV at `off`, or None if the
    header itself is not complete yet."""
    n = len(buf) - off
    if n < 2:
        return None
    # TYPE
    t0 = buf[off]
    tsize = 1 if t0 < 253 else 3 if t0 == 253 else 5 if t0 == 254 else 9
    if n < tsize + 1:
        return None
    l0 = buf[off + tsize]
    if l0 < 253:
        return tsize + 1, l0
    lsize = 3 if l0 == 253 else 5 if l0 == 254 else 9
    if n < tsize + lsize:
        return None
    length = int.from_bytes(buf[off + tsize + 1:off + tsize + lsize], "big")
    return tsize + lsize, length


def split_frames(data: bytes | bytearray, start: int = 0) -> tuple[list[bytes], int, bool]:
    """Stream framing: the complete TLV packets in `data` from `start`, the offset after the
    last one, and whether the next one is longer than MAX_PACKET_SIZE (framing is lost: the
    face must close). An incomplete packet at the end waits for more bytes."""
    packets: list[bytes] = []
    off = start
    n = len(data)
    while off < n:
        # inline the usual header (1-byte TYPE, 1- or 3-byte LENGTH); outer_length does the
        # general case
        if off + 4 <= n and data[off] < 253 and data[off + 1] <= 253:
            length = data[off + 1]
            total = 2 + length if length < 253 else 4 + ((data[off + 2] << 8) | data[off + 3])
        else:
            hdr = outer_length(data, off)
            if hdr is None:
                break
            total = hdr[0] + hdr[1]
        if total > MAX_PACKET_SIZE:
            return packets, off, True
        if off + total > n:
            break
        packets.append(bytes(data[off:off + total]))
        off += total
    return packets, off, False


_MAX_HEADER: Final = 18         # a TLV-TYPE and a TLV-LENGTH of 9 octets each


class StreamFramer:
    """Stream framing across reads.  A packet within one read is copied once, out of it; only
    the start of a packet a read ends in is kept, and joined with its rest from the next read.
    A read is never copied into a buffer whole: with 8 KB packets nearly every read of a busy
    socket ends inside one, and those copies were a third of the framing's cost in the
    compiled forwarder (bench/HISTORY.md)."""

    def __init__(self) -> None:
        self._part = bytearray()            # the start of a packet an earlier read ended in

    def feed(self, data: bytes) -> tuple[list[bytes], bool]:
        """The packets this read completes, in order, and whether the next one is longer than
        MAX_PACKET_SIZE (framing is lost: the face must close)."""
        part = self._part
        if not part:
            packets, off, oversize = split_frames(data)
        else:
            start = 0
            hdr = outer_length(part, 0)
            if hdr is None:                         # its header too was split
                start = min(len(data), _MAX_HEADER)
                part += data[:start]
                hdr = outer_length(part, 0)
                if hdr is None:
                    return [], False
            total = hdr[0] + hdr[1]
            if total > MAX_PACKET_SIZE:
                return [], True
            # the bytes it still misses; below 0 when completing the header took bytes past it
            need = total - len(part)
            if need > len(data) - start:
                part += memoryview(data)[start:]
                return [], False
            first = bytes(part[:total]) if need <= 0 else \
                b"".join((part, memoryview(data)[start:start + need]))
            part.clear()
            packets, off, oversize = split_frames(data, start + need)
            packets.insert(0, first)
        if off < len(data) and not oversize:
            part += memoryview(data)[off:]
        return packets, oversize


# ---- names -------------------------------------------------------------------------------

def component_offsets(name: bytes) -> list[int]:
    """End offsets of each component in a Name TLV-VALUE (the concatenated component TLVs).

    offsets[k-1] is the byte length of the k-component prefix, so `name[:offsets[k-1]]` is
    that prefix: prefixes of a name are byte prefixes of its encoding, which lets every
    table key names by raw bytes.
    """
    offs = []
    off = 0
    end = len(name)
    while off < end:
        t = name[off]
        if t < 253 and off + 1 < end and name[off + 1] < 253:
            off += 2 + name[off + 1]
            if off > end:
                raise DecodeError("name component exceeds the name")
        else:
            _, _, off = read_tl(name, off, end)
        offs.append(off)
    return offs


_DIGEST_HEAD: Final = bytes((IMPLICIT_DIGEST, 32))


def implicit_digest(name: bytes) -> bytes | None:
    """The SHA-256 of an ImplicitSha256DigestComponent that ends `name`, else None.  Any
    other name costs one comparison of two bytes; a match is confirmed against the name's
    component boundaries (a generic component's value may end with the same bytes)."""
    if len(name) < 34 or name[-34] != IMPLICIT_DIGEST or name[-33] != 32:
        return None
    offsets = component_offsets(name)
    last_start = offsets[-2] if len(offsets) >= 2 else 0
    return name[-32:] if last_start == len(name) - 34 else None


def digest_component(packet: bytes) -> bytes:
    """The ImplicitSha256DigestComponent naming this exact packet (its whole Data TLV)."""
    return _DIGEST_HEAD + hashlib.sha256(packet).digest()


def name_from_str(uri: str) -> bytes:
    """Name TLV-VALUE from an NDN URI with generic components only (`/a/b%2Ac`).

    For configuration and tests; the apps use python-ndn's Name for typed components.
    """
    from urllib.parse import unquote_to_bytes

    out = b""
    for part in uri.strip("/").split("/"):
        if part:
            value = unquote_to_bytes(part)
            if len(value) >= 3 and not value.strip(b"."):
                value = value[3:]       # NDN URI: "..." is the empty component, "...." is "."
            out += encode_tlv(GENERIC_COMPONENT, value)
    return out


def name_to_str(name: bytes) -> str:
    """NDN URI of a Name TLV-VALUE (generic components percent-encoded; typed ones as T=hex)."""
    parts = []
    off = 0
    end = len(name)
    while off < end:
        t, v, off = read_tl(name, off, end)
        val = name[v:off]
        if t == GENERIC_COMPONENT:
            if not val.strip(b"."):     # only periods (or empty): three more, as the scheme says
                parts.append("..." + "." * len(val))
                continue
            parts.append("".join(
                chr(b) if (48 <= b <= 57 or 65 <= b <= 90 or 97 <= b <= 122 or b in b"-._~")
                else f"%{b:02X}" for b in val))
        elif t == VERSION_COMPONENT:
            parts.append(f"v={int.from_bytes(val, 'big')}")
        elif t == SEGMENT_COMPONENT:
            parts.append(f"seg={int.from_bytes(val, 'big')}")
        else:
            parts.append(f"{t}={val.hex()}")
    return "/" + "/".join(parts)

