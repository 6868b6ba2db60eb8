"""Summable gradient segments (ndnps/ndn/summable.py): the format, the refusals, and sums that
do not depend on the order their parts arrive in."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ndnps.ndn.summable import (HEADER_SIZE, VALUE_LIMIT, FixedPointSum, SummableError, decode,
                                encode)


def test_round_trip():
    v = np.array([1.5, -2.25, 0.0, 3e-5], dtype=np.float32)
    content = encode(v, contributors=3)
    assert len(content) == HEADER_SIZE + 16
    out, n = decode(content)
    assert n == 3 and out.dtype == np.float32 and np.array_equal(out, v)


@pytest.mark.parametrize("bad, why", [
    (b"NSG1", "shorter than the header"),
    (b"XXXX" + encode(np.ones(2))[4:], "not a summable segment"),
    (encode(np.ones(2))[:-1], "octets of values for count 2"),
    (encode(np.ones(2))[:6] + b"\x02" + encode(np.ones(2))[7:], "unknown value type"),
    (encode(np.ones(2))[:4] + b"\x00\x00" + encode(np.ones(2))[6:], "contributors 0"),
])
def test_malformed_segments_are_refused(bad, why):
    with pytest.raises(SummableError, match=why):
        decode(bad)


def test_a_sum_refuses_what_it_cannot_hold_and_stays_unchanged():
    s = FixedPointSum(2)
    s.add(encode(np.array([1.0, 2.0])))
    for bad in (encode(np.array([1.0, 2.0, 3.0])), encode(np.array([np.nan, 1.0])),
                encode(np.array([VALUE_LIMIT, 0.0])), encode(np.array([np.inf, 0.0]))):
        with pytest.raises(SummableError):
            s.add(bad)
    assert decode(s.result()) [1] == 1
    assert np.array_equal(decode(s.result())[0], [1.0, 2.0])
    # a partial sum of 3 may hold up to 3 x the limit
    s.add(encode(np.array([2.5 * VALUE_LIMIT, 0.0]), contributors=3))
    assert decode(s.result())[1] == 4
    with pytest.raises(SummableError, match="nothing added"):
        FixedPointSum(2).result()


values = st.lists(st.floats(-100.0, 100.0, width=32, allow_subnormal=False), min_size=1,
                  max_size=6)


@settings(max_examples=60, deadline=None)
@given(st.lists(values, min_size=2, max_size=5).filter(
    lambda vs: len({len(v) for v in vs}) == 1))
def test_the_sum_is_the_same_in_every_order_and_by_any_tree(vectors):
    parts = [encode(np.array(v, dtype=np.float32)) for v in vectors]
    results = set()
    for order in itertools.permutations(parts):
        s = FixedPointSum(len(vectors[0]))
        for p in order:
            s.add(p)
        results.add(s.result())
    assert len(results) == 1
    (flat,) = results
    exact = np.sum(np.array(vectors, dtype=np.float64), axis=0)
    got, n = decode(flat)
    assert n == len(vectors)
    assert np.allclose(got, exact, rtol=1e-6, atol=1e-9)
    # summed in two levels (an aggregator, then the edge): the same sum up to the rounding of
    # the partial sum to float32
    left = FixedPointSum(len(vectors[0]))
    for p in parts[:2]:
        left.add(p)
    top = FixedPointSum(len(vectors[0]))
    top.add(left.result())
    for p in parts[2:]:
        top.add(p)
    two, n2 = decode(top.result())
    # the partial sum's float32 rounding is relative to it, not to the total (64 + 0.142 - 62:
    # 64.142 rounds by 4e-6, which the total 2.142 keeps)
    partial = np.abs(np.sum(np.array(vectors[:2], dtype=np.float64), axis=0))
    assert n2 == len(vectors) and np.all(np.abs(two - exact) <= 1e-6 + 1e-6 * np.abs(exact)
                                         + 2.0 ** -23 * partial)
