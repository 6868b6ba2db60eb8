"""Summable gradient segments (ndnps/ndn/summable.py): the format (float32 and exact int64
values), the refusals, and sums that do not depend on the order their parts arrive in nor on
how they were grouped: a tree of exact partial sums, with any of its groups fallen back, gives
the root the bytes of a one-level sum."""
from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ndnps.ndn.summable import (BATCH_ROWS, EXACT, FRACTION_BITS, HEADER_SIZE, MAX_CONTRIBUTORS,
                                VALUE_LIMIT, FixedPointSum, SummableError, decode, encode,
                                is_exact, parse)


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
    (encode(np.ones(2))[:6] + b"\x03" + encode(np.ones(2))[7:], "unknown value type"),
    (encode(np.ones(2))[:6] + b"\x02" + encode(np.ones(2))[7:], "octets of values for count 2"),
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


def test_an_exact_sum_is_the_accumulator_itself():
    s = FixedPointSum(3)
    s.add(encode(np.array([1.5, -2.0, 2.0 ** -30], np.float32)))
    s.add(encode(np.array([0.25, 1.0, 0.0], np.float32)))
    exact = s.result(exact=True)
    assert len(exact) == HEADER_SIZE + 8 * 3 and is_exact(exact)
    assert exact[6] == EXACT and not is_exact(s.result())
    ints, n = parse(exact)
    assert n == 2 and ints.dtype == np.int64
    assert ints.tolist() == [int(1.75 * 2 ** FRACTION_BITS), -(2 ** FRACTION_BITS), 2 ** 10]
    # the PS reads float32 sums only: an exact one is a partial sum for an aggregator
    with pytest.raises(SummableError, match="exact partial sum"):
        decode(exact)
    # added to another sum as it is: nothing rounded
    top = FixedPointSum(3)
    top.add(exact)
    assert top.result(exact=True)[12:] == exact[12:] and top.contributors == 2


def test_an_exact_sum_out_of_bounds_is_refused_and_the_sum_unchanged():
    s = FixedPointSum(1)
    s.add(encode(np.array([1.0])))
    limit = 1 << (63 - 15)                       # VALUE_LIMIT on the grid, per contributor
    for values, n in (([limit], 1), ([-limit], 1), ([3 * limit], 3), ([-(1 << 63)], 5)):
        bad = b"NSG1" + n.to_bytes(2, "little") + bytes((EXACT, 0)) + (1).to_bytes(4, "little") \
            + np.array(values, "<i8").tobytes()
        with pytest.raises(SummableError, match="magnitude"):
            s.add(bad)
    assert (s.contributors, decode(s.result())[0].tolist()) == (1, [1.0])
    ok = b"NSG1" + (3).to_bytes(2, "little") + bytes((EXACT, 0)) + (1).to_bytes(4, "little") \
        + np.array([3 * limit - 1], "<i8").tobytes()
    s.add(ok)
    assert s.contributors == 4
    # the most a sum may stand for: any int64 but the one whose magnitude is 2^63
    full = FixedPointSum(1)
    full.add(b"NSG1" + MAX_CONTRIBUTORS.to_bytes(2, "little") + bytes((EXACT, 0)) +
             (1).to_bytes(4, "little") + np.array([(1 << 63) - 1], "<i8").tobytes())
    with pytest.raises(SummableError, match="too many contributors"):
        full.add(encode(np.array([0.0])))


values = st.lists(st.floats(-100.0, 100.0, width=32, allow_subnormal=False), min_size=1,
                  max_size=6)


@settings(max_examples=60, deadline=None)
@given(st.lists(values, min_size=2, max_size=5).filter(
    lambda vs: len({len(v) for v in vs}) == 1))
def test_the_sum_is_the_same_in_every_order(vectors):
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


def summed(tree, parts: dict[str, bytes], rng: random.Random, size: int, top: bool) -> bytes:
    """How a plan's node sums `tree` = (fallen_back, members): its members in a random order,
    a sub-group either asked (its exact partial sum) or fallen back (its workers added here,
    as an aggregator does when a sub-group is Nacked), its workers' rows added one by one or
    in batches of any size (as the forwarder's aggregator adds them). The root answers
    float32."""
    acc = FixedPointSum(size, rng.choice([0, 2, 3, BATCH_ROWS]))
    for m in rng.sample(tree[1], len(tree[1])):
        if isinstance(m, str):
            acc.add(parts[m])
        elif m[0]:                                  # fallen back: its workers, one by one
            for w in rng.sample(leaves(m), len(leaves(m))):
                acc.add(parts[w])
        else:
            acc.add(summed(m, parts, rng, size, False))
    return acc.result(exact=not top)


def leaves(tree) -> list[str]:
    return [w for m in tree[1] for w in ([m] if isinstance(m, str) else leaves(m))]


def trees(workers: list[str], rng: random.Random, depth: int = 0):
    """A random plan over `workers`: nested groups (up to 4 levels), each may fall back."""
    members: list = []
    rest = workers[:]
    rng.shuffle(rest)
    while rest:
        if depth < 3 and len(rest) > 1 and rng.random() < 0.4:
            k = rng.randint(1, len(rest))
            members.append(trees(rest[:k], rng, depth + 1))
            rest = rest[k:]
        else:
            members.append(rest.pop())
    return (rng.random() < 0.3, members)


# float32 values across every scale the grid meets: exact ones, and ones below 2^-17 that the
# grid rounds (the same way wherever they are added)
scaled = st.tuples(st.floats(-1.0, 1.0, width=32, allow_subnormal=False),
                   st.integers(-60, 7)).map(lambda t: float(np.float32(t[0] * 2.0 ** t[1])))


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 12).flatmap(lambda n: st.tuples(
    st.integers(1, 8).flatmap(lambda k: st.lists(st.lists(scaled, min_size=k, max_size=k),
                                                 min_size=n, max_size=n)),
    st.randoms(use_true_random=False))))
def test_any_tree_of_exact_partial_sums_with_any_fallbacks_gives_the_one_level_bytes(case):
    vectors, rng = case
    size = len(vectors[0])
    parts = {f"w{i}": encode(np.array(v, np.float32)) for i, v in enumerate(vectors)}
    one = FixedPointSum(size)                       # the PS's own sum of every worker
    for w in parts:
        one.add(parts[w])
    reference = one.result()
    for _ in range(4):                              # trees, orders, fallbacks
        tree = trees(list(parts), rng)
        assert summed(tree, parts, rng, size, True) == reference
    # and it is the float32 rounding of the exact total of the values on the grid
    grid = np.sum([np.rint(np.array(v, np.float64) * 2.0 ** FRACTION_BITS) for v in vectors],
                  axis=0)
    assert decode(reference)[0].tolist() == (grid / 2.0 ** FRACTION_BITS).astype(
        np.float32).tolist()


def test_a_float32_partial_sum_would_not_be_exact():
    # what the exact type is for: the same tree with the partial sum rounded to float32 (as
    # before it existed) misses the one-level bytes
    a, b, c = (np.array([v], np.float32) for v in (64.0, 0.142, -62.0))
    one = FixedPointSum(1)
    for v in (a, b, c):
        one.add(encode(v))
    left = FixedPointSum(1)
    left.add(encode(a))
    left.add(encode(b))
    for partial in (left.result(), left.result(exact=True)):
        top = FixedPointSum(1)
        top.add(partial)
        top.add(encode(c))
        assert (top.result() == one.result()) == is_exact(partial)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 70).flatmap(lambda n: st.tuples(
    st.lists(st.lists(scaled, min_size=3, max_size=3), min_size=n, max_size=n),
    st.integers(0, BATCH_ROWS))))
def test_a_batched_sum_is_the_one_by_one_sum(case):
    # rows held and added a block at a time, with exact partial sums and float32 sums of
    # several between them: the same integers as adding each at once
    vectors, batch = case
    eager, batched = FixedPointSum(3), FixedPointSum(3, batch)
    for i, v in enumerate(vectors):
        part = encode(np.array(v, np.float32)) if i % 7 else \
            encode(np.array(v, np.float32) * 2, contributors=2)
        if i % 11 == 5:
            inner = FixedPointSum(3)
            inner.add(part)
            part = inner.result(exact=True)
        eager.add(part)
        batched.add(part)
    assert batched.result(exact=True) == eager.result(exact=True)
    assert batched.result() == eager.result() and batched.contributors == eager.contributors


def test_a_value_refused_in_a_batch_spoils_the_sum():
    s = FixedPointSum(2, batch=3)
    s.add(encode(np.array([1.0, 2.0])))
    s.add(encode(np.array([np.nan, 2.0])))            # held: found when the batch is added
    with pytest.raises(SummableError):
        s.result()
    for call in (s.result, lambda: s.add(encode(np.array([1.0, 1.0])))):
        with pytest.raises(SummableError, match="spoilt"):
            call()
    full = FixedPointSum(1, batch=2)
    full.add(encode(np.array([1.0])))
    with pytest.raises(SummableError):                # the batch fills: added at once
        full.add(encode(np.array([VALUE_LIMIT])))
    with pytest.raises(ValueError, match="batch"):
        FixedPointSum(1, batch=BATCH_ROWS + 1)
