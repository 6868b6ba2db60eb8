"""A data-centre fabric in a scenario: `[topology] kind = "fat-tree"`, `k = 4` (local runs).

Every switch of ndnps.placement's k-ary fat-tree is a forwarder (k = 4: 20), joined to its
neighbours by UDP faces on 127.0.0.1; the apps take the hosts in order (every job's PS, then
its workers: the first job's PS on h1, its workers on h2…), each connected to its host's edge
switch. Every forwarder routes each app's prefix — and, with `[ina]`, each aggregator's node
name — to its next hop on the network's shortest path, chosen among equal ones by the stable
hash ndnps.placement's LP assumes, so the loads the placement planned are the run's.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .process import free_port
from .topology import AppNode, ForwarderNode, Plan, _apps, _join

if TYPE_CHECKING:
    from ndnps.placement.network import Network

    from .spec import Scenario

KINDS = ("fat-tree",)


def hosts(k: int) -> int:
    """How many apps a k-ary fat-tree holds."""
    return k ** 3 // 4


def network(sc: "Scenario", bw: float) -> "Network":
    """The fat-tree with its hosts named after the apps on them (unused hosts left out)."""
    from ndnps.placement.network import Link, Network, fat_tree
    net = fat_tree(sc.fat_tree_k, bw)
    apps = [a.name for a in _apps(sc, lambda i: "", "")]
    named = dict(zip(net.hosts, apps))
    switches = set(net.switches)
    links = [Link(named.get(link.a, link.a), named.get(link.b, link.b), link.bw)
             for link in net.links
             if (link.a in named or link.a in switches) and (link.b in named or link.b in switches)]
    return Network([named[h] for h in net.hosts if h in named], list(net.switches), links,
                   net.name)


def plan(sc: "Scenario") -> Plan:
    """The forwarders, their faces and routes, and where each app connects."""
    net = network(sc, 1000.0)
    link = sc.links.as_table()
    app_link = link if sc.links.app_faces else {}
    nodes = {s: ForwarderNode(s, udp=free_port(), app_link=dict(app_link)) for s in net.switches}
    switches = set(net.switches)
    for a in net.switches:
        for b in net.neighbours(a):
            if b in switches and a < b:
                _join(nodes[a], nodes[b], f"udp4://127.0.0.1:{nodes[b].udp}",
                      f"udp4://127.0.0.1:{nodes[a].udp}", link, sc.links.reliability)
    apps = [AppNode(a.name, a.role, net.edge_of(a.name)) for a in _apps(sc, lambda i: "", "")]
    for app in apps:
        route(nodes, net, app.name, app.forwarder)
    return Plan(nodes, apps)


def route(nodes: dict[str, ForwarderNode], net: "Network", name: str, at: str) -> None:
    """Every forwarder but `at` routes /<name> to its next hop toward `at` (an app's edge
    switch, or an aggregator)."""
    for f, node in nodes.items():
        if f != at:
            node.routes.append((f"/{name}", net.path(f, at)[0][1]))
