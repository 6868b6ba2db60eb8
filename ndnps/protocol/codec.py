"""Tensor and control-message codec.

Tensor blob layout (all integers little-endian)::

    b"NPT2" | u32 header_len | u64 sum64 | msgpack header | pad | tensor 0 | pad | tensor 1 | ...

The header is ``{"meta": {...}, "names": [str, ...] | None, "tensors": [[dtype, shape], ...]}``.
Each tensor's raw bytes start at the next 8-byte-aligned offset after the previous one, so the
offsets are implied by dtypes and shapes and the blob has exactly one valid length: every
truncation or trailing garbage is detected.  ``sum64`` is the sum, mod 2**64, of the 64-bit words
after the prefix: it binds an object's segments together.  Each segment is signed on its own, so
a blob assembled from the segments of two objects made under the same names (a producer that
restarted mid-fetch and made the object again differently) would pass every signature check;
its sum does not match.  Not an integrity check against an attacker (the signatures are): a
sum, not a CRC, because it costs ~0.01 ms per 400 KB against the CRC's 0.13, each way, on the
path of every version.  Decoding returns read-only ``np.frombuffer`` views into the blob
(zero-copy).

Straight to and from numpy buffers: ``tensor_pieces`` gives the blob as pieces — the prefix and
header, then each tensor's own memory (a view, nothing copied) and the zero padding between —
so a producer that cuts segments from the pieces (ndnps.client.segments) copies a tensor once,
into its packets; ``encode_tensors`` is their join.  A receiver joins its segments once
(views of the packets they came in) and decodes views of that.
"""

from __future__ import annotations

import math
import struct
from typing import Any, Iterable, Sequence

import msgpack
import numpy as np

__all__ = [
    "CodecError",
    "MixedSegments",
    "encode_tensors",
    "tensor_pieces",
    "decode_tensors",
    "flatten",
    "unflatten",
    "param_spec",
    "pack",
    "unpack",
]

_MAGIC = b"NPT2"
_PREFIX = struct.Struct("<4sIQ")        # 16 bytes: what follows starts on a 64-bit word
_MASK64 = (1 << 64) - 1
_ALIGN = 8
_MAX_NDIM = 32
# Plain numeric kinds only: no object, string, void or datetime dtypes from the wire.
_KINDS = frozenset("biufc")

Tensors = dict[str, np.ndarray] | list[np.ndarray]


class CodecError(ValueError):
    """Malformed, truncated or unsupported encoded data."""


class MixedSegments(CodecError):
    """A blob of the right shape whose sum does not match: segments of two objects made under
    the same names (each segment is signed, so not an altered one on the way).  Fetched again,
    it is whole; counted apart from malformed data."""


def _pad(n: int) -> int:
    return -n % _ALIGN


def _wire_dtype(dt: np.dtype) -> np.dtype:
    if dt.kind not in _KINDS:
        raise CodecError(f"unsupported dtype {dt}")
    return dt.newbyteorder("<")  # no-op for 1-byte and already little-endian dtypes


def pack(obj: Any) -> bytes:
    """msgpack-encode a small control message."""
    try:
        return msgpack.packb(obj, use_bin_type=True)
    except Exception as e:  # TypeError, OverflowError, ValueError ...
        raise CodecError(f"cannot pack {type(obj).__name__}: {e}") from e


def unpack(buf: bytes | bytearray | memoryview) -> Any:
    """Decode one msgpack message; any malformed input raises CodecError."""
    try:
        return msgpack.unpackb(buf, raw=False)
    except Exception as e:  # msgpack raises a zoo: ExtraData, FormatError, StackError, TypeError ...
        raise CodecError(f"bad msgpack: {e}") from e


def encode_tensors(tensors: Tensors, /, **meta: Any) -> bytes:
    """Encode named (dict) or positional (list) arrays plus msgpack-able ``meta`` into one blob."""
    return b"".join(tensor_pieces(tensors, **meta))


def tensor_pieces(tensors: Tensors, /, **meta: Any) -> list[bytes | memoryview]:
    """``encode_tensors``' blob as pieces whose join it is: the prefix and header, then each
    tensor's own memory (a view of the array: nothing copied unless the array must first be
    made C-contiguous little-endian) and the padding between.  The arrays must not change
    until the pieces are used."""
    if isinstance(tensors, dict):
        keys = list(tensors)
        if not all(isinstance(n, str) for n in keys):
            raise CodecError("tensor names must be str")
        names: list[str] | None = keys
        arrays = list(tensors.values())
    else:
        names, arrays = None, list(tensors)

    wire = []
    for a in arrays:
        a = np.asarray(a)
        wire.append(np.asarray(a, dtype=_wire_dtype(a.dtype), order="C"))  # keeps 0-d arrays 0-d
    header = pack({"meta": meta, "names": names, "tensors": [[a.dtype.str, list(a.shape)] for a in wire]})

    parts: list[bytes | memoryview] = [header]
    pos = _PREFIX.size + len(header)
    for a in wire:
        if _pad(pos):
            parts.append(b"\0" * _pad(pos))
            pos += _pad(pos)
        parts.append(a.reshape(-1).view(np.uint8).data)
        pos += a.nbytes
    # the header and each tensor start on a word and the padding is zeros: the sum of the parts
    # is the sum of the blob after the prefix
    total = sum(_sum64(memoryview(part)) for part in parts) & _MASK64
    return [_PREFIX.pack(_MAGIC, len(header), total), *parts]


def _sum64(mv: memoryview) -> int:
    """The sum of a buffer's little-endian 64-bit words, mod 2**64 (the last one zero-padded)."""
    whole = len(mv) // 8
    total = int(np.frombuffer(mv, "<u8", count=whole).sum(dtype=np.uint64)) if whole else 0
    return (total + int.from_bytes(mv[whole * 8:], "little")) & _MASK64


def _check_header(h: Any) -> tuple[dict, list[str] | None, list[tuple[np.dtype, tuple[int, ...]]]]:
    if not isinstance(h, dict) or set(h) != {"meta", "names", "tensors"}:
        raise CodecError("bad header keys")
    meta, names, entries = h["meta"], h["names"], h["tensors"]
    if not isinstance(meta, dict) or not isinstance(entries, list):
        raise CodecError("bad header types")
    if names is not None:
        if (not isinstance(names, list) or len(names) != len(entries)
                or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names)):
            raise CodecError("bad tensor names")
    specs = []
    for e in entries:
        if not (isinstance(e, list) and len(e) == 2 and isinstance(e[0], str) and isinstance(e[1], list)):
            raise CodecError("bad tensor entry")
        try:
            dt = np.dtype(e[0])
        except Exception as ex:
            raise CodecError(f"bad dtype {e[0]!r}") from ex
        # Canonical little-endian spelling only, so encode(decode(x)) is byte-identical.
        if dt.kind not in _KINDS or dt.str != e[0] or e[0][0] not in "<|":
            raise CodecError(f"unsupported dtype {e[0]!r}")
        shape = e[1]
        if len(shape) > _MAX_NDIM or not all(type(d) is int and d >= 0 for d in shape):
            raise CodecError(f"bad shape {shape!r}")
        specs.append((dt, tuple(shape)))
    return meta, names, specs


def decode_tensors(buf: bytes | bytearray | memoryview) -> tuple[Tensors, dict[str, Any]]:
    """Inverse of encode_tensors: ``(dict or list of arrays, meta)``.

    Arrays are views into ``buf`` (read-only for bytes; they alias a bytearray).
    """
    mv = memoryview(buf).cast("B")
    if len(mv) < _PREFIX.size:
        raise CodecError("blob shorter than prefix")
    magic, hlen, total = _PREFIX.unpack_from(mv)
    if magic != _MAGIC:
        raise CodecError("bad magic")
    pos = _PREFIX.size + hlen
    if pos > len(mv):
        raise CodecError("truncated header")
    meta, names, specs = _check_header(unpack(mv[_PREFIX.size:pos]))

    arrays = []
    for dt, shape in specs:
        pos += _pad(pos)
        count = math.prod(shape)
        end = pos + count * dt.itemsize
        if end > len(mv):
            raise CodecError("truncated tensor data")
        arrays.append(np.frombuffer(mv, dtype=dt, count=count, offset=pos).reshape(shape))
        pos = end
    if pos != len(mv):
        raise CodecError(f"{len(mv) - pos} trailing bytes")
    # last: a blob that is whole in shape but not one object's
    if _sum64(mv[_PREFIX.size:]) != total:
        raise MixedSegments("checksum mismatch: parts of two objects (or changed bytes)")
    return (dict(zip(names, arrays)) if names is not None else arrays), meta


def param_spec(params: dict[str, np.ndarray]) -> list[tuple[str, tuple[int, ...]]]:
    """The (name, shape) list that unflatten() needs to undo flatten(params)."""
    return [(k, tuple(v.shape)) for k, v in params.items()]


def flatten(params: dict[str, np.ndarray]) -> np.ndarray:
    """Concatenate all parameters, in dict order, into one contiguous float32 vector."""
    if not params:
        return np.zeros(0, np.float32)
    return np.concatenate([np.asarray(v, np.float32).reshape(-1) for v in params.values()])


def unflatten(vec: np.ndarray, spec: Iterable[tuple[str, Sequence[int]]]) -> dict[str, np.ndarray]:
    """Split a flat float32 vector back into named arrays (views into ``vec``)."""
    vec = np.asarray(vec, np.float32)
    if vec.ndim != 1:
        raise CodecError(f"expected a 1-D vector, got shape {vec.shape}")
    out, pos = {}, 0
    for name, shape in spec:
        n = math.prod(shape)
        if pos + n > vec.size:
            raise CodecError(f"vector of {vec.size} too short for spec")
        out[name] = vec[pos:pos + n].reshape(tuple(shape))
        pos += n
    if pos != vec.size:
        raise CodecError(f"vector of {vec.size} longer than spec ({pos})")
    return out

