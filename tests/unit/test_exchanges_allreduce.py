"""One peer's all-reduce (ndnps/exchanges/collectives/allreduce.py) with every peer simulated: parts
delivered in random orders and at random times (a fast peer runs ahead, a slow one fetches
late), duplicates and early parts; every peer must end with the same bytes, the sum."""
from __future__ import annotations

import random

import numpy as np
import pytest

from ndnps.exchanges.collectives.allreduce import AllReduce, AllReduceError
from ndnps.exchanges.collectives.schedules import BCube, ring


def run(peers: int, schedule, size: int, seed: int) -> list[AllReduce]:
    rng = random.Random(seed)
    vectors = np.random.default_rng(seed).normal(0, 1, (peers, size)).astype(np.float32)
    nodes = [AllReduce(p, vectors[p], schedule) for p in range(peers)]
    for _ in range(100000):
        if all(n.done for n in nodes):
            break
        # a random peer tries to fetch one of its wants; it gets it only if the source has
        # opened that step (else the request is held: nothing happens yet)
        node = rng.choice([n for n in nodes if not n.done])
        t = rng.choice(node.wants())
        values = nodes[t.src].served(t.step, t.range)
        if values is not None:
            assert node.arrived(t.step, t.src, t.range, values)
            if rng.random() < 0.1:                               # a duplicate answer
                assert not node.arrived(t.step, t.src, t.range, values)
    assert all(n.done for n in nodes)
    ref = nodes[0].vector
    assert all(n.vector.tobytes() == ref.tobytes() for n in nodes)   # the same bytes
    assert np.allclose(ref, vectors.astype(np.float64).sum(axis=0), atol=1e-4)
    return nodes


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("peers", [2, 3, 5])
def test_a_ring_all_reduce_ends_with_the_same_sum_everywhere(peers, seed):
    run(peers, ring(peers, 101), 101, seed)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("n, k", [(2, 2), (3, 2), (2, 3)])
def test_a_bcube_all_reduce_ends_with_the_same_sum_everywhere(n, k, seed):
    cube = BCube(n, k)
    run(cube.peers, cube.schedule(257), 257, seed)


def test_wrong_parts_are_refused_and_early_ones_wait():
    sched = ring(3, 9)
    a = AllReduce(1, np.ones(9), sched)
    (want,) = a.wants()
    with pytest.raises(AllReduceError):
        a.arrived(want.step, 2, want.range, np.ones(3))          # not from that peer
    with pytest.raises(AllReduceError):
        a.arrived(want.step, want.src, want.range, np.ones(2))   # wrong size
    with pytest.raises(AllReduceError):
        a.arrived(99, want.src, want.range, np.ones(3))
    later = next(t for t in sched if t.dst == 1 and t.step == 1)
    assert not a.arrived(1, later.src, later.range, np.ones(3))  # not open yet: kept by caller
    assert a.current == 0 and a.served(1, later.range) is None
