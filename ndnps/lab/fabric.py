"""Data-centre fabrics in a scenario: `[topology] kind = "fat-tree"` (`k`, 4 by default, even,
up to 16; local runs), `kind = "leaf-spine"` (`spines` 2, `leaves` 4, `hosts_per_leaf` 4 by
default: every leaf joined to every spine, the two-tier Clos of Alizadeh and Edsall's "On the
Data Path Performance of Leaf-Spine Datacenter Fabrics"; local runs) and `kind = "bcube"` (`n`, `k`: BCube(n, k), the network of BCube synchronisation; local, or
`--netns`: every switch and host a namespace, every link a veth).

Every switch of ndnps.placement's network is a forwarder (a k = 4 fat-tree: 20; BCube(n, k):
k·n^(k−1)), joined to its neighbours by UDP faces on 127.0.0.1; the apps take the hosts in
order (every job's PS, then its workers: the first job's PS on the first host, its workers on
the next ones; when every host trains, the PS beside the first worker). A fat-tree's or
leaf-spine's host is an app beside its edge switch (its leaf). A BCube host is multi-homed
(one link per level) and relays for others, as BCube's servers do, so each has a forwarder of
its own (named after the host: p0, p1…) with k uplinks, and its app connects to it; the
workers (or peers) take the last hosts, a PS the first (beside the first worker when all n^k
hosts train); a ring's peers go round the hosts in a Gray code (`gray_ring`). Every
forwarder routes each app's prefix — and, with `[ina]`, each aggregator's node name — to its
next hop on the network's shortest path, chosen among equal ones by the stable hash
ndnps.placement's LP assumes, so the loads the placement planned are the run's: one search
per destination (`Network.next_hops`), so a k = 16 fat-tree's 320 forwarders route 1,025 apps
in about a second.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from .process import free_port
from .values import ScenarioError
from .nodes import AppNode, ForwarderNode, Plan, join
from .nodes import apps as app_nodes

if TYPE_CHECKING:
    from ndnps.placement.network import Network

    from .config import Scenario

KINDS = ("fat-tree", "leaf-spine", "bcube")
# the fabrics whose hosts are apps beside one switch (their ToR), and which run locally only
SWITCHED = ("fat-tree", "leaf-spine")


def _generated(sc: "Scenario", bw: float) -> "Network":
    from ndnps.placement.network import bcube, fat_tree, leaf_spine
    if sc.topology == "leaf-spine":
        return leaf_spine(sc.spines, sc.leaves, sc.hosts_per_leaf, bw)
    return bcube(sc.n, sc.k, bw) if sc.topology == "bcube" else fat_tree(sc.k, bw)


def hosts(sc: "Scenario") -> int:
    """How many apps the scenario's fabric holds."""
    if sc.topology == "leaf-spine":
        return sc.leaves * sc.hosts_per_leaf
    return sc.n ** sc.k if sc.topology == "bcube" else sc.k ** 3 // 4


def forwarders(sc: "Scenario") -> list[str]:
    """The fabric's forwarders: its switches, and in a BCube every host's own."""
    net = _generated(sc, 1000.0)
    return net.switches + (net.hosts if sc.topology == "bcube" else [])


def network(sc: "Scenario", bw: float) -> "Network":
    """A fat-tree or leaf-spine with its hosts named after the apps on them (unused hosts
    left out; when every host trains, the PS beside the first worker: on its edge switch, by a
    link of its own), or a BCube as generated (its hosts are forwarders: the apps sit on
    them)."""
    from ndnps.placement.network import Link, Network
    net = _generated(sc, bw)
    if sc.topology == "bcube":
        return net
    apps = app_nodes(sc, lambda i: "", "")
    crowded = len(apps) > len(net.hosts)            # fabric.check allows one PS too many
    named = dict(zip(net.hosts, [a.name for a in apps if not (crowded and a.role == "ps")]))
    switches = set(net.switches)
    links = [Link(named.get(link.a, link.a), named.get(link.b, link.b), link.bw)
             for link in net.links
             if (link.a in named or link.a in switches) and (link.b in named or link.b in switches)]
    hosts = [named[h] for h in net.hosts if h in named]
    if crowded:
        ps = next(a.name for a in apps if a.role == "ps")
        links.append(Link(ps, net.edge_of(net.hosts[0]), bw))
        hosts.insert(0, ps)
    return Network(hosts, list(net.switches), links, net.name)


def plan(sc: "Scenario", port: Callable[[], int] = free_port) -> Plan:
    """The forwarders, their faces and routes, and where each app connects; `port()` gives
    each forwarder its UDP port on 127.0.0.1 (a run in virtual time, which binds none, may
    pass one that makes them up)."""
    net = network(sc, 1000.0)
    link = sc.links.as_table()
    app_link = link if sc.links.app_faces else {}
    names = forwarders(sc)
    nodes = {s: ForwarderNode(s, udp=port(), app_link=dict(app_link)) for s in names}
    for a in names:
        for b in net.neighbours(a):
            if b in nodes and a < b:
                join(nodes[a], nodes[b], f"udp4://127.0.0.1:{nodes[b].udp}",
                      f"udp4://127.0.0.1:{nodes[a].udp}", link, sc.links.reliability)
    if sc.topology == "bcube":
        placed = bcube_apps(sc, net)
    else:
        placed = [AppNode(a.name, a.role, net.edge_of(a.name))
                  for a in app_nodes(sc, lambda i: "", "")]
    _route_apps(sc, nodes, net, placed)
    return Plan(nodes, placed)


def bcube_apps(sc: "Scenario", net: "Network") -> list[AppNode]:
    """A BCube's apps: the workers (or peers) on its last hosts, in order, one each; a PS on
    the first host — alone when there is a host to spare, else beside the first worker (a PS
    colocated with a worker, as ps-lite and BytePS deploy it), so that n^k workers train."""
    apps = app_nodes(sc, lambda i: "", "")
    workers = [a for a in apps if a.role != "ps"]
    first = len(net.hosts) - len(workers)
    hosts = net.hosts[first:]
    if sc.training.peers.collective == "ring" and not first:
        hosts = [net.hosts[h] for h in gray_ring(sc.n, sc.k)]
    return [AppNode(a.name, a.role, net.hosts[0]) for a in apps if a.role == "ps"] + \
        [AppNode(a.name, a.role, hosts[i]) for i, a in enumerate(workers)]


def gray_ring(n: int, k: int) -> list[int]:
    """BCube(n, k)'s hosts in a modular n-ary Gray code: each next to the one before and the
    first to the last differ in one digit, one switch apart. A ring all-reduce's peers placed
    in this order exchange over one switch each (a topology-aware ring, as NCCL orders its
    rings) instead of relaying through other hosts."""
    def digit(i: int, j: int) -> int:
        return (i // n ** j - i // n ** (j + 1)) % n
    return [sum(digit(i, j) * n ** j for j in range(k)) for i in range(n ** k)]


def _route_apps(sc: "Scenario", nodes: dict[str, ForwarderNode], net: "Network",
                apps: list[AppNode]) -> None:
    """Routes to every app, and to a PS-less job's aggregator by its name."""
    for app in apps:
        route(nodes, net, app.name, app.forwarder)
    t = sc.training
    if t.peers.collective == "ina" and t.aggregation.aggregate_at in nodes:
        route(nodes, net, t.aggregation.aggregate_at, t.aggregation.aggregate_at)


def plan_netns(sc: "Scenario") -> Plan:
    """A BCube in network namespaces (`--netns`): every forwarder — each switch, each host —
    its own namespace, each link a veth (faces and addresses once they exist:
    topology.assign_addresses); routes and apps as locally."""
    net = network(sc, 1000.0)
    nodes = {s: ForwarderNode(s, host=s) for s in forwarders(sc)}
    apps = bcube_apps(sc, net)
    _route_apps(sc, nodes, net, apps)
    return Plan(nodes, apps, [(link.a, link.b) for link in net.links])


def route(nodes: dict[str, ForwarderNode], net: "Network", name: str, at: str) -> None:
    """Every forwarder but `at` routes /<name> to its next hop toward `at` (an app's edge
    switch, or an aggregator): the first hop of net.path(f, at)."""
    prefix, hops = f"/{name}", net.next_hops(at, nodes)
    for f, node in nodes.items():
        if f != at:
            node.routes.append((prefix, hops[f]))


def check(sc: "Scenario") -> None:
    """What the fabric cannot hold: more apps than hosts; a fat-tree or leaf-spine in
    namespaces."""
    pss = sum(1 for job in sc.all_jobs if not job.peers.collective)
    # one PS may share the first host with a worker (bcube_apps; network)
    apps = len(sc.worker_names) + (0 if pss == 1 else pss)
    if apps > hosts(sc):
        raise ScenarioError(f"topology.workers: this {sc.topology} has {hosts(sc)} hosts, the "
                            f"run needs {apps}")
    if sc.netns and sc.topology in SWITCHED:
        raise ScenarioError(f"topology.kind: a {sc.topology} runs locally (its forwarders on "
                            "127.0.0.1), not with --netns")
