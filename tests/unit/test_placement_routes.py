"""The fabrics' routes at scale (ndnps.placement.network.Network.next_hops, ndnps.lab.fabric):
one search per destination chooses exactly the next hops a walk per pair did, among equal-cost
ones by the same stable hash the LP's paths assume."""
from __future__ import annotations

import heapq
import zlib

import pytest

from ndnps.placement.network import Network, bcube, fat_tree, leaf_spine


def reference_first_hops(net: Network, dst: str) -> dict[str, str]:
    """Every node's first hop toward `dst` as Network.path chose it before next_hops:
    Dijkstra over every node by (cost, hops), then, for each source, the neighbours one step
    nearer, in name order, picked by the hash of the (src, dst) pair."""
    dist = {dst: (0, 0)}
    todo = [(0, 0, dst)]
    while todo:
        cost, hops, n = heapq.heappop(todo)
        if (cost, hops) > dist[n]:
            continue
        for m in net.neighbours(n):
            d = (cost + net._cost[(m, n)], hops + 1)
            if m not in dist or d < dist[m]:
                dist[m] = d
                heapq.heappush(todo, (*d, m))
    out = {}
    for src, (cost, hops) in dist.items():
        if src != dst:
            nexts = [m for m in net.neighbours(src)
                     if dist.get(m) == (cost - net._cost[(src, m)], hops - 1)]
            out[src] = nexts[zlib.crc32(f"{src}>{dst}".encode()) % len(nexts)]
    return out


def weighted() -> Network:
    """A network with unequal link costs, ties in cost broken by hops, hosts on one link, and
    routes per node (`fib`, as a Mini-NDN file's)."""
    from ndnps.placement.network import Link
    links = [Link("a", "b", cost=2), Link("b", "d", cost=2), Link("a", "c", cost=1),
             Link("c", "e", cost=1), Link("e", "d", cost=2), Link("a", "d", cost=4),
             Link("c", "d", cost=3), Link("h1", "a"), Link("h2", "d"), Link("h3", "d")]
    return Network(["h1", "h2", "h3"], ["a", "b", "c", "d", "e"], links, fib=True)


@pytest.mark.parametrize("net", [fat_tree(4), fat_tree(8), bcube(3, 2), leaf_spine(3, 4, 2),
                                 weighted()], ids=lambda net: net.name or "weighted")
def test_next_hops_are_the_paths_first_hops(net):
    nodes = net.nodes
    for dst in nodes:
        hops = net.next_hops(dst)
        assert hops == reference_first_hops(net, dst), dst
        assert set(hops) == set(nodes) - {dst}
        for src in nodes[::7]:
            if src != dst:
                assert net.next_hop(src, dst) == hops[src]
                if not net.fib:
                    assert net.path(src, dst)[0] == (src, hops[src])


def test_paths_walk_the_same_hash_all_the_way():
    net, fresh = fat_tree(4), fat_tree(4)
    for src in net.hosts:
        for dst in net.hosts:
            path = net.path(src, dst)
            spread = zlib.crc32(f"{src}>{dst}".encode())
            for a, b in path:                      # each hop: the pair's hash, not the node's
                equal = fresh._equal_nexts(dst)[a]
                assert b == equal[spread % len(equal)]
            assert [a for a, _ in path[1:]] == [b for _, b in path[:-1]]


def test_next_hops_of_some_nodes_and_unreachable_ones():
    from ndnps.placement.network import Link, TopologyError
    net = Network(["h1", "h2"], ["s1", "s2", "s3"],
                  [Link("h1", "s1"), Link("s1", "s2"), Link("h2", "s2")])
    assert net.next_hops("h2", ["s1", "h1"]) == {"s1": "s2", "h1": "s1"}
    with pytest.raises(TopologyError, match="no path from 's3' to 'h2'"):
        net.next_hops("h2", ["s3"])
