"""Summable gradient segments: the Content a forwarder may add up (in-network aggregation,
issue 24), in the base because both the apps and the forwarder read it.

    b"NSG1" | u16 contributors | u8 type | u8 0 | u32 count | values
    type 1 (FLOAT32): float32 x count           a worker's gradient, or a sum for the PS
    type 2 (EXACT):   int64 x count             a partial sum, exact: value x 2^FRACTION_BITS

All little-endian; 12 octets of header, then the values. `contributors` says how many
gradients the values are the sum of (1 for a worker's own segment), so the PS knows what a sum
stands for.

Sums do not depend on the order contributions arrive in, nor on how they are grouped: each
float32 value is turned into a fixed-point int64 with FRACTION_BITS fractional bits (exact for
every float32 of magnitude at least 2^-17; below it, rounded to the grid the same way wherever
it is added), the int64s add exactly, and a partial sum that will be added again travels as
those int64s (EXACT: nothing rounded), so the total is the same integers whatever summed
where. Only the sum handed to the PS is float32, turned back once from the exact total, by a
function of that total alone: a forwarder that sums w1 then w2, one that adds a sub-group's
partial sum, and the PS summing a fallen-back segment itself send the same bytes. Values of
magnitude VALUE_LIMIT (256) or more per contributor (or NaN, inf) are refused: the caller
falls back to the ordinary collect (the PS sums them in float).
"""
from __future__ import annotations

import struct
from typing import Final

import numpy as np

MAGIC: Final = b"NSG1"
FLOAT32: Final = 1
EXACT: Final = 2                                   # int64 fixed point, FRACTION_BITS
_HEADER = struct.Struct("<4sHBBI")
HEADER_SIZE: Final = _HEADER.size                  # 12
VALUE_SIZE: Final = {FLOAT32: 4, EXACT: 8}         # octets per value
FRACTION_BITS: Final = 40
MAX_CONTRIBUTORS: Final = 1 << 15
# |value| below this for every contribution keeps the sum of MAX_CONTRIBUTORS of them inside
# int64: 2^(63 - FRACTION_BITS - 15) = 256 (gradients are far smaller; larger ones fall back)
VALUE_LIMIT: Final = float(2 ** (63 - FRACTION_BITS - 15))
_FIXED_LIMIT: Final = 1 << (63 - 15)               # VALUE_LIMIT on the fixed-point grid
_SCALE: Final = float(2 ** FRACTION_BITS)
_DTYPE: Final[dict[int, np.dtype]] = {FLOAT32: np.dtype("<f4"), EXACT: np.dtype("<i8")}


class SummableError(ValueError):
    """Not a summable segment, or one that cannot be summed here (the caller falls back)."""


def encode(values: np.ndarray, contributors: int = 1) -> bytes:
    """A segment's Content: `values` (cast to float32) as the sum of `contributors`."""
    return _encode(np.ascontiguousarray(values, dtype="<f4").reshape(-1), FLOAT32, contributors)


def _encode(v: np.ndarray, typ: int, contributors: int) -> bytes:
    if not 1 <= contributors <= MAX_CONTRIBUTORS:
        raise SummableError(f"contributors must be within [1, {MAX_CONTRIBUTORS}]")
    return _HEADER.pack(MAGIC, contributors, typ, 0, v.size) + v.tobytes()


def parse(content: bytes | memoryview) -> tuple[np.ndarray, int]:
    """(values, contributors) of either type: a read-only view into `content`, float32
    values or EXACT int64 fixed point (its dtype says which)."""
    if len(content) < HEADER_SIZE:
        raise SummableError("shorter than the header")
    magic, contributors, typ, reserved, count = _HEADER.unpack_from(content)
    if magic != MAGIC:
        raise SummableError("not a summable segment")
    if typ not in _DTYPE or reserved:
        raise SummableError(f"unknown value type {typ}")
    if not 1 <= contributors <= MAX_CONTRIBUTORS:
        raise SummableError(f"contributors {contributors} out of range")
    if len(content) != HEADER_SIZE + VALUE_SIZE[typ] * count:
        raise SummableError(f"{len(content) - HEADER_SIZE} octets of values for count {count}")
    return np.frombuffer(content, dtype=_DTYPE[typ], count=count, offset=HEADER_SIZE), \
        contributors


def decode(content: bytes | memoryview) -> tuple[np.ndarray, int]:
    """(values, contributors) of a FLOAT32 segment (a worker's, or the sum the PS asked for):
    a read-only float32 view into `content`. An EXACT one is refused here: it is a partial
    sum, for an aggregator to add (FixedPointSum.add)."""
    values, contributors = parse(content)
    if values.dtype != _DTYPE[FLOAT32]:
        raise SummableError("an exact partial sum where float32 values were expected")
    return values, contributors


def is_exact(content: bytes | memoryview) -> bool:
    """Whether a (well-formed) segment carries EXACT values."""
    return len(content) >= HEADER_SIZE and content[6] == EXACT


class FixedPointSum:
    """The running sum of summable segments of one segment number: exact, order-free."""

    __slots__ = ("count", "contributors", "_acc")

    def __init__(self, count: int) -> None:
        self.count = count
        self.contributors = 0
        self._acc = np.zeros(count, dtype=np.int64)

    def add(self, content: bytes | memoryview) -> None:
        """Add one segment (a worker's float32 values, or another forwarder's partial sum,
        EXACT or float32). SummableError when it is malformed, of another length, or has
        values this sum cannot hold; the sum is then unchanged."""
        values, contributors = parse(content)
        if values.size != self.count:
            raise SummableError(f"{values.size} values, this sum has {self.count}")
        if self.contributors + contributors > MAX_CONTRIBUTORS:
            raise SummableError("too many contributors")
        if values.dtype == _DTYPE[EXACT]:
            # a sum of c contributions each below the limit is below c times it: so the total
            # of at most MAX_CONTRIBUTORS stays inside int64 (c << 48 <= 2^63)
            bound = (contributors * _FIXED_LIMIT) - 1
            if values.size and not (-bound <= int(values.min()) and int(values.max()) <= bound):
                raise SummableError(f"a value is of magnitude >= {VALUE_LIMIT:g} per "
                                    "contributor")
            self._acc += values
        else:
            v = values.astype(np.float64)
            # each original value below VALUE_LIMIT: a sum of c of them below c times it
            if not np.all(np.abs(v) < VALUE_LIMIT * contributors):     # also false for NaN
                raise SummableError(f"a value is NaN, infinite or of magnitude >= "
                                    f"{VALUE_LIMIT:g} per contributor")
            self._acc += np.rint(v * _SCALE).astype(np.int64)
        self.contributors += contributors

    def result(self, exact: bool = False) -> bytes:
        """The sum as a summable segment: EXACT (the accumulator itself, for a requester that
        adds it to others) or float32 (rounded from the exact total: the same bytes for the
        same total, however it was made)."""
        if not self.contributors:
            raise SummableError("nothing added")
        if exact:
            return _encode(self._acc.astype("<i8"), EXACT, self.contributors)
        return encode((self._acc.astype(np.float64) / _SCALE).astype(np.float32),
                      self.contributors)
