"""The all-reduce schedules (ndnps/exchanges/collectives/schedules.py) against a brute-force
simulation: every peer starts with its own vector, the schedule's messages of each step are
computed from the state before the step and then applied, and every peer must end with the exact
sum."""
from __future__ import annotations

import numpy as np
import pytest

from ndnps.exchanges.collectives.schedules import BCube, Transfer, ring, split, steps

SHAPES = [(2, 1), (2, 2), (3, 2), (2, 3), (4, 2), (3, 3), (4, 3)]


def simulate(peers: int, size: int, transfers: list[Transfer], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    state = rng.integers(-1000, 1000, size=(peers, size)).astype(np.int64)
    total = state.sum(axis=0)
    for group in steps(transfers):
        before = state.copy()
        for t in group:
            lo, hi = t.range
            if t.reduce:
                state[t.dst, lo:hi] += before[t.src, lo:hi]
            else:
                state[t.dst, lo:hi] = before[t.src, lo:hi]
    assert (state == total).all(), "a peer does not hold the sum"
    return state


def test_split_covers_the_range_in_order():
    for m in (0, 1, 7, 100):
        for n in (1, 2, 3, 5):
            parts = split((10, 10 + m), n)
            assert parts[0][0] == 10 and parts[-1][1] == 10 + m
            assert all(a[1] == b[0] for a, b in zip(parts, parts[1:]))
            assert max(b - a for a, b in parts) - min(b - a for a, b in parts) <= 1


@pytest.mark.parametrize("peers", [1, 2, 3, 4, 7, 8])
@pytest.mark.parametrize("size", [1, 10, 997])
def test_the_ring_leaves_every_peer_with_the_sum(peers, size):
    sched = ring(peers, size)
    simulate(peers, size, sched)
    assert len(list(steps(sched))) == 2 * (peers - 1)
    # each peer sends 2(N−1)/N of the vector, within one element per chunk
    for p in range(peers):
        sent = sum(t.range[1] - t.range[0] for t in sched if t.src == p)
        assert abs(sent - 2 * (peers - 1) * size / peers) <= 2 * (peers - 1)
        assert all(t.dst == (p + 1) % peers for t in sched if t.src == p)


@pytest.mark.parametrize("n, k", SHAPES)
@pytest.mark.parametrize("size", [1, 11, 1000])
def test_bcube_leaves_every_peer_with_the_sum(n, k, size):
    cube = BCube(n, k)
    simulate(cube.peers, size, cube.schedule(size), seed=n * 10 + k)


@pytest.mark.parametrize("n, k", SHAPES)
def test_every_bcube_exchange_crosses_one_switch_and_the_sets_use_every_level(n, k):
    cube = BCube(n, k)
    sched = cube.schedule(6000)
    for t in sched:
        assert cube.switch(t.src, t.level) == cube.switch(t.dst, t.level)
        assert t.src in cube.group(t.dst, t.level)
    for group in steps(sched):
        levels = {}
        for t in group:
            levels.setdefault(t.set, set()).add(t.level)
        assert all(len(v) == 1 for v in levels.values())            # a set: one level a step
        assert len({next(iter(v)) for v in levels.values()}) == len(levels)   # sets differ
    assert len(list(steps(sched))) == 2 * k


@pytest.mark.parametrize("n, k", SHAPES)
def test_peers_under_a_switch_held_the_same_part_and_take_different_ones(n, k):
    # BCube synchronisation's rule: peers under one level-i switch summed the same part at level
    # i−1 and sum different parts at level i
    cube = BCube(n, k)
    size = n ** k * k * 6
    for s in range(k):
        for depth, level in enumerate(cube.order(s)):
            for peer in range(cube.peers):
                group = cube.group(peer, level)
                before = {cube.held(p, s, depth - 1, size) for p in group}
                now = [cube.held(p, s, depth, size) for p in group]
                assert len(before) == 1 and len(set(now)) == n


@pytest.mark.parametrize("n, k", SHAPES)
def test_phase_set_level_and_part_name_a_sender_s_range_once_a_version(n, k):
    # what the names of partial sums carry (protocol.names.partial) must tell ranges apart
    cube = BCube(n, k)
    seen: dict[tuple, tuple] = {}
    for t in cube.schedule(n ** k * k * 6) + [t._replace(src=t.src + 10 ** 6)
                                             for t in ring(5, 100)]:
        key = (t.src, t.reduce, t.set, t.level, t.part)
        assert seen.setdefault(key, t.range) == t.range


@pytest.mark.parametrize("n, k", SHAPES)
def test_bytes_per_face_match_the_analytic_value(n, k):
    cube = BCube(n, k)
    size = (n ** k) * k * 60            # divisible: the analytic value is exact
    sched = cube.schedule(size)
    unicast = cube.bytes_per_face(size, merged=False)
    merged = cube.bytes_per_face(size)
    for peer in range(cube.peers):
        for level in range(k):
            mine = [t for t in sched if t.src == peer and t.level == level]
            sent = 4 * sum(t.range[1] - t.range[0] for t in mine)
            assert sent == pytest.approx(unicast[level])
            # one name per part: each distinct part once (the switch fans it out)
            once = {(t.reduce, t.set, t.part): t.range for t in mine}
            assert 4 * sum(r[1] - r[0] for r in once.values()) == pytest.approx(merged[level])


def test_addresses_switches_and_groups():
    cube = BCube(3, 2)
    assert cube.peers == 9
    assert [cube.digit(5, lvl) for lvl in (0, 1)] == [2, 1]
    assert cube.group(5, 0) == [3, 4, 5] and cube.group(5, 1) == [2, 5, 8]
    assert {cube.switch(p, 0) for p in range(9)} == {0, 1, 2}
    assert cube.switch(5, 1) == 2 and cube.switch(8, 1) == 2
    with pytest.raises(ValueError):
        BCube(1, 2)


@pytest.mark.parametrize("n, k", SHAPES)
def test_the_bcube_network_joins_the_peers_the_schedule_pairs(n, k):
    from ndnps.placement.network import bcube, parse_topology
    net = bcube(n, k)
    cube = BCube(n, k)
    assert len(net.hosts) == n ** k and len(net.switches) == k * n ** (k - 1)
    for peer in range(cube.peers):
        assert len(net.neighbours(f"p{peer}")) == k               # one uplink per level
        for level in range(k):
            switch = f"s{level}-{cube.switch(peer, level)}"
            assert switch in net.neighbours(f"p{peer}")
            assert sorted(net.neighbours(switch)) == sorted(f"p{q}" for q in cube.group(peer, level))
    assert parse_topology(f"bcube:{n},{k}").name == f"bcube:{n},{k}"
