"""Summable gradient segments: the Content a forwarder may add up (in-network aggregation,
issue 24), in the base because both the apps and the forwarder read it.

    b"NSG1" | u16 contributors | u8 dtype (1: float32) | u8 0 | u32 count | float32 x count

All little-endian; 12 octets of header, then the values. `contributors` says how many
gradients the values are the sum of (1 for a worker's own segment), so the PS knows what a sum
stands for.

Sums do not depend on the order contributions arrive in: each float32 value is turned into a
fixed-point int64 with FRACTION_BITS fractional bits (exact for every float32 of magnitude at
least 2^-17; below it, rounded the same way whatever the order), the int64s add exactly, and
the result goes back to float32 once, rounded once. So a forwarder that sums w1 then w2 and one
that sums w2 then w1 send the same bytes; a sum differs from a float32 sum by at most one
rounding. Values of magnitude VALUE_LIMIT (256) or more per contributor (or NaN, inf) are
refused: the caller falls back to the ordinary collect (the PS sums them in float).
"""
from __future__ import annotations

import struct
from typing import Final

import numpy as np

MAGIC: Final = b"NSG1"
FLOAT32: Final = 1
_HEADER = struct.Struct("<4sHBBI")
HEADER_SIZE: Final = _HEADER.size                  # 12
FRACTION_BITS: Final = 40
MAX_CONTRIBUTORS: Final = 1 << 15
# |value| below this for every contribution keeps the sum of MAX_CONTRIBUTORS of them inside
# int64: 2^(63 - FRACTION_BITS - 15) = 256 (gradients are far smaller; larger ones fall back)
VALUE_LIMIT: Final = float(2 ** (63 - FRACTION_BITS - 15))
_SCALE: Final = float(2 ** FRACTION_BITS)


class SummableError(ValueError):
    """Not a summable segment, or one that cannot be summed here (the caller falls back)."""


def encode(values: np.ndarray, contributors: int = 1) -> bytes:
    """A segment's Content: `values` (cast to float32) as the sum of `contributors`."""
    if not 1 <= contributors <= MAX_CONTRIBUTORS:
        raise SummableError(f"contributors must be within [1, {MAX_CONTRIBUTORS}]")
    v = np.ascontiguousarray(values, dtype="<f4").reshape(-1)
    return _HEADER.pack(MAGIC, contributors, FLOAT32, 0, v.size) + v.tobytes()


def decode(content: bytes | memoryview) -> tuple[np.ndarray, int]:
    """(values, contributors): a read-only float32 view into `content`."""
    if len(content) < HEADER_SIZE:
        raise SummableError("shorter than the header")
    magic, contributors, dtype, reserved, count = _HEADER.unpack_from(content)
    if magic != MAGIC:
        raise SummableError("not a summable segment")
    if dtype != FLOAT32 or reserved:
        raise SummableError(f"unknown value type {dtype}")
    if not 1 <= contributors <= MAX_CONTRIBUTORS:
        raise SummableError(f"contributors {contributors} out of range")
    if len(content) != HEADER_SIZE + 4 * count:
        raise SummableError(f"{len(content) - HEADER_SIZE} octets of values for count {count}")
    return np.frombuffer(content, dtype="<f4", count=count, offset=HEADER_SIZE), contributors


class FixedPointSum:
    """The running sum of summable segments of one segment number: exact, order-free."""

    __slots__ = ("count", "contributors", "_acc")

    def __init__(self, count: int) -> None:
        self.count = count
        self.contributors = 0
        self._acc = np.zeros(count, dtype=np.int64)

    def add(self, content: bytes | memoryview) -> None:
        """Add one segment (a worker's, or another forwarder's partial sum). SummableError
        when it is malformed, of another length, or has values this sum cannot hold; the sum
        is then unchanged."""
        values, contributors = decode(content)
        if values.size != self.count:
            raise SummableError(f"{values.size} values, this sum has {self.count}")
        if self.contributors + contributors > MAX_CONTRIBUTORS:
            raise SummableError("too many contributors")
        v = values.astype(np.float64)
        # each original value below VALUE_LIMIT: a sum of c of them below c times it
        if not np.all(np.abs(v) < VALUE_LIMIT * contributors):     # also false for NaN
            raise SummableError(f"a value is NaN, infinite or of magnitude >= {VALUE_LIMIT:g} "
                                "per contributor")
        self._acc += np.rint(v * _SCALE).astype(np.int64)
        self.contributors += contributors

    def result(self) -> bytes:
        """The sum as a summable segment (float32, rounded once)."""
        if not self.contributors:
            raise SummableError("nothing added")
        return encode((self._acc.astype(np.float64) / _SCALE).astype(np.float32),
                      self.contributors)
