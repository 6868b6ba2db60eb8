"""Summable gradient segments: the Content a forwarder may add up (in-network aggregation,
docs/aggregation.md), in the base because both the apps and the forwarder read it.

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
_SCALE32: Final = np.float32(_SCALE)
# rows a batched sum adds at once: their float64 column sums stay exact (32 x 2^48 = 2^53)
BATCH_ROWS: Final = 1 << (53 - 48)
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
    """The running sum of summable segments of one segment number: exact, order-free.

    With `batch` (at most BATCH_ROWS), single workers' float32 segments are not added one by
    one but copied into a buffer of that many rows and added a buffer at a time, in a few
    numpy calls over the whole block (what a segment's contributions cost is then mostly the
    copy: numpy's per-call overhead, not the arithmetic, is what a 2000-value add spends). The
    result is the same integers; a refused value among the buffered ones is found when the
    buffer is added (by `add` when it fills, or by `result`), and then the sum is spoilt: every
    later call raises SummableError. Without `batch` every add is checked at once and a refused
    segment leaves the sum unchanged."""

    __slots__ = ("count", "contributors", "_acc", "_rows", "_held", "_spoilt")

    def __init__(self, count: int, batch: int = 0) -> None:
        if not 0 <= batch <= BATCH_ROWS:
            raise ValueError(f"batch must be within [0, {BATCH_ROWS}], got {batch}")
        self.count = count
        self.contributors = 0
        self._acc = np.zeros(count, dtype=np.int64)
        self._rows = np.empty((batch, count), dtype=np.float32) if batch else None
        self._held = 0
        self._spoilt = False

    def add(self, content: bytes | memoryview) -> None:
        """Add one segment (a worker's float32 values, or another forwarder's partial sum,
        EXACT or float32). SummableError when it is malformed, of another length, or has
        values this sum cannot hold (see the class for a batched sum)."""
        values, contributors = parse(content)
        self.add_values(values, contributors)

    def add_values(self, values: np.ndarray, contributors: int) -> None:
        """`add` of a segment already parsed (`parse`'s values and contributors)."""
        if self._spoilt:
            raise SummableError("a value refused earlier spoilt this sum")
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
        elif contributors == 1 and self._rows is not None:
            self._rows[self._held] = values
            self._held += 1
            if self._held == len(self._rows):
                self.contributors += 1
                self._fold()
                return
        else:
            _check_floats(values, VALUE_LIMIT * contributors)
            # v x 2^40 is exact in float32 (a power of two), its rint too (an integer below
            # 2^48, or one below 2^23): the same integers as in float64
            scaled = values * _SCALE32
            np.rint(scaled, out=scaled)
            self._acc += scaled.astype(np.int64)
        self.contributors += contributors

    def _fold(self) -> None:
        """Add the buffered rows: scaled and rounded in place (exact, as in add_values), their
        column sums taken in float64 — exact, since at most BATCH_ROWS integers below 2^48
        add up below 2^53 — then into the accumulator."""
        if not self._held:
            return
        assert self._rows is not None
        rows, self._held = self._rows[:self._held], 0
        try:
            _check_floats(rows, VALUE_LIMIT)
        except SummableError:
            self._spoilt = True
            raise
        rows *= _SCALE32
        np.rint(rows, out=rows)
        self._acc += np.add.reduce(rows, axis=0, dtype=np.float64).astype(np.int64)

    def result(self, exact: bool = False) -> bytes:
        """The sum as a summable segment: EXACT (the accumulator itself, for a requester that
        adds it to others) or float32 (rounded from the exact total: the same bytes for the
        same total, however it was made)."""
        if self._spoilt:
            raise SummableError("a value refused earlier spoilt this sum")
        self._fold()
        if not self.contributors:
            raise SummableError("nothing added")
        if exact:
            return _encode(self._acc.astype("<i8"), EXACT, self.contributors)
        return encode((self._acc.astype(np.float64) / _SCALE).astype(np.float32),
                      self.contributors)


def _check_floats(values: np.ndarray, limit: float) -> None:
    """SummableError unless every value's magnitude is below `limit` (NaN is not: max and min
    carry it, and every comparison with it is false)."""
    if values.size and not (np.maximum.reduce(values, axis=None) < limit and
                            np.minimum.reduce(values, axis=None) > -limit):
        raise SummableError(f"a value is NaN, infinite or of magnitude >= {VALUE_LIMIT:g} per "
                            "contributor")
