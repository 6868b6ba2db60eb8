"""Where every process of a scenario runs and how the forwarders are joined.

Local mode: the apps connect to their forwarder's unix socket; forwarders (one for `star`, a
root and leaves for `tree`) are joined by UDP faces on 127.0.0.1. Link conditions go on every
link: the apps' faces (`[app_links]`, loss both ways) and the forwarder-to-forwarder faces.
`[links] reliability = true` turns NDNLPv2 link reliability on at both ends of every
forwarder-to-forwarder face (the forwarders' `[[faces]] reliability`; the apps ask for it on
their own faces, see the runner).

Netns mode (`--netns`): every host — each router forwarder, the PS and each worker — is its own
network namespace and runs its own forwarder, as Mini-NDN runs NFD on every node; the apps use
their host's forwarder and hosts are joined by veth pairs carrying UDP faces, the veths' MTU
`[links] mtu` and the faces' datagrams as long as it carries (`[udp] mtu` in each forwarder's
configuration).

A Mini-NDN topology file (`file = "x.conf"`): every node a forwarder, the apps on their nodes,
each link with its own conditions, in either mode (ndnps.lab.minindn).

Bottleneck (`kind = "bottleneck"`, always in namespaces): two hosts, the testbed of
docs/congestion.md — the PS host runs the PS's forwarder and the PS, the workers host one forwarder
for every worker and the workers — joined by one veth carrying one UDP face each way, its two ends
limited by the kernel's tbf qdisc (the runner sets it up, `[bottleneck]`).
"""
from __future__ import annotations

from typing import Callable

from . import fabric, minindn
from .config import Scenario
from .nodes import NDN_PORT, AppNode, Face, ForwarderNode, Plan, forwarder_strategy, join
from .nodes import apps as app_nodes
from .process import free_port
from .values import BOTTLENECK_PS_HOST, BOTTLENECK_WORKERS_HOST, udp_face_mtu

__all__ = ["AppNode", "Face", "ForwarderNode", "Plan", "apply_link_overrides",
           "assign_addresses", "forwarder_strategy", "plan_bottleneck", "plan_hosts",
           "plan_local", "plan_netns", "route_aggregators", "router_names"]


def plan_local(sc: Scenario, port: Callable[[], int] = free_port) -> Plan:
    """Every job's PS on the star's forwarder or the tree's root; workers on the star's
    forwarder or spread over the leaves (the i-th worker of the run on leaf i mod leaves).
    `port()`: each forwarder's UDP port on 127.0.0.1 (a star's needs none; a run in virtual
    time, which binds none, may make them up)."""
    if sc.topology in fabric.KINDS:
        return fabric.plan(sc, port)
    if sc.topology == "minindn":
        return minindn.plan(sc, port)
    link = sc.links.as_table()
    app_link = link if sc.links.app_faces else {}
    if sc.topology == "star":
        fwd = ForwarderNode("fwd", udp=0, app_link=dict(app_link))
        return Plan({"fwd": fwd}, app_nodes(sc, lambda i: "fwd", "fwd"))
    root = ForwarderNode("root", udp=port(), app_link=dict(app_link))
    nodes = {"root": root}
    leaves = []
    for i in range(sc.leaves):
        leaf = ForwarderNode(f"leaf{i + 1}", udp=port(), app_link=dict(app_link))
        nodes[leaf.name] = leaf
        leaves.append(leaf)
        join(root, leaf, f"udp4://127.0.0.1:{leaf.udp}", f"udp4://127.0.0.1:{root.udp}", link,
              sc.links.reliability)
        leaf.routes += [(f"/{job.who.ps}", "root") for job in sc.all_jobs]
    apps = app_nodes(sc, lambda i: leaves[i % len(leaves)].name, "root")
    root.routes += [(f"/{app.name}", app.forwarder) for app in apps if app.role != "ps"]
    for app in apps:                    # a peer reaches the other leaves' through the root
        if app.role == "peer":
            for leaf in leaves:
                if leaf.name != app.forwarder:
                    leaf.routes.append((f"/{app.name}", "root"))
    _route_peers_aggregator(sc, nodes)
    return Plan(nodes, apps)


def _route_peers_aggregator(sc: Scenario, nodes: dict[str, ForwarderNode]) -> None:
    """A tree's routers reach a PS-less job's aggregator by its name (the peers' *aggregate*
    Interests carry it as their ForwardingHint): a leaf through the root, the root down to
    the leaf that aggregates."""
    for job in sc.all_jobs:
        at = job.aggregation.aggregate_at
        if job.peers.collective != "ina" or sc.topology != "tree" or at not in nodes:
            continue
        for name, node in nodes.items():
            if name == at or name.startswith("h-"):
                continue
            node.routes.append((f"/{at}", at if name == "root" else "root"))


def apply_link_overrides(plan: Plan, sc: Scenario) -> None:
    """[[link]] entries replace [links] on one direction of a forwarder-to-forwarder link."""
    for (src, dst), links in sc.link_overrides.items():
        for face in plan.forwarders[src].faces:
            if face.name == dst:
                face.link = links.as_table()


def plan_netns(sc: Scenario) -> Plan:
    """Routers as in local mode plus one forwarder per app host; every link is a veth pair.
    Addresses are filled in by the runner once the veths exist (`assign_addresses`)."""
    routers = ["fwd"] if sc.topology == "star" else ["root"] + [f"leaf{i + 1}"
                                                                 for i in range(sc.leaves)]
    nodes = {r: ForwarderNode(r, host=r) for r in routers}
    links: list[tuple[str, str]] = []
    routes: dict[str, list[tuple[str, str]]] = {r: [] for r in routers}
    if sc.topology == "tree":
        for leaf in routers[1:]:
            links.append(("root", leaf))
            routes[leaf] += [(f"/{job.who.ps}", "root") for job in sc.all_jobs]
    app_hosts = app_nodes(sc, lambda i: "fwd" if sc.topology == "star"
                          else routers[1 + i % sc.leaves], routers[0])
    apps = []
    for app in app_hosts:
        router, hf = app.forwarder, f"h-{app.name}"
        if sc.topology == "tree" and app.role != "ps":
            routes["root"].append((f"/{app.name}", router))
            if app.role == "peer":      # the other leaves' peers reach it through the root
                for leaf in routers[1:]:
                    if leaf != router:
                        routes[leaf].append((f"/{app.name}", "root"))
        nodes[hf] = ForwarderNode(hf, host=hf)
        links.append((hf, router))
        routes[router].append((f"/{app.name}", hf))
        job = sc.job_of(app.name)
        if app.role == "peer":          # every other peer, and the aggregator by its name
            routes[hf] = [(f"/{w}", router) for w in job.who.workers if w != app.name]
            if job.aggregation.aggregate_at:
                routes[hf].append((f"/{job.aggregation.aggregate_at}", router))
        else:
            routes[hf] = [(f"/{job.who.ps}", router)] if app.role == "worker" else \
                [(f"/{w}", router) for w in job.who.workers]
        apps.append(AppNode(app.name, app.role, hf))
    for name, rs in routes.items():
        nodes[name].routes = rs
    _route_peers_aggregator(sc, nodes)
    return Plan(nodes, apps, links)


def plan_bottleneck(sc: Scenario) -> Plan:
    """The PS host and the workers host, one link between them; routes as a tree's root and
    leaf have them (the PS host's forwarder reaches each /<worker> over the link, the
    workers host's each /<ps>: every job's PS runs on the PS host). Addresses:
    `assign_addresses`, once the veth exists."""
    a, b = BOTTLENECK_PS_HOST, BOTTLENECK_WORKERS_HOST
    nodes = {a: ForwarderNode(a, host=a, routes=[(f"/{w}", b) for w in sc.worker_names]),
             b: ForwarderNode(b, host=b, routes=[(f"/{job.who.ps}", a) for job in sc.all_jobs])}
    return Plan(nodes, app_nodes(sc, lambda i: b, a), [(a, b)])


def route_aggregators(plan: Plan, sc: Scenario, nodes: list[str]) -> None:
    """Routes to aggregator forwarders by their node names (an `*aggregate*` Interest's
    ForwardingHint): the edge reaches each through the routers between them."""
    if sc.topology in fabric.SWITCHED:
        net = fabric.network(sc, 1000.0)
        for node in nodes:
            fabric.route(plan.forwarders, net, node, node)
        return
    if sc.topology == "minindn":            # every forwarder routes every node's name already
        return
    for node in nodes:
        prefix = f"/{node}"
        if sc.topology == "bottleneck":
            plan.forwarders[BOTTLENECK_PS_HOST].routes.append((prefix, node))
        elif not sc.netns:                              # a local tree: a leaf, from the root
            plan.forwarders["root"].routes.append((prefix, node))
        else:                                           # from the PS's host, by its router
            first = "fwd" if sc.topology == "star" else "root"
            plan.forwarders[f"h-{sc.training.who.ps}"].routes.append((prefix, first))
            if node != first:
                plan.forwarders[first].routes.append((prefix, node))


def plan_hosts(sc: Scenario) -> Plan:
    """The netns plan of the scenario's topology; every forwarder's UDP faces send datagrams
    up to what the veths' MTU (links.mtu) carries unfragmented."""
    if sc.topology == "bcube":
        plan = fabric.plan_netns(sc)
    elif sc.topology == "minindn":
        plan = minindn.plan(sc)
    else:
        plan = plan_bottleneck(sc) if sc.topology == "bottleneck" else plan_netns(sc)
    for node in plan.forwarders.values():
        node.udp_mtu = udp_face_mtu(sc.links.mtu)
    return plan


def assign_addresses(plan: Plan, addrs: list[tuple[str, str]], link: dict[str, float],
                     reliability: bool = False) -> None:
    """Faces over the veths: `addrs[i]` are the addresses of host_links[i]'s two ends."""
    for (a, b), (addr_a, addr_b) in zip(plan.host_links, addrs):
        join(plan.forwarders[a], plan.forwarders[b], f"udp4://{addr_b}:{NDN_PORT}",
              f"udp4://{addr_a}:{NDN_PORT}", link, reliability)


def router_names(sc: Scenario) -> list[str]:
    """The topology's forwarders that apps do not name (a netns run adds one per app host,
    except on the bottleneck, whose two hosts are these, and a topology file's nodes)."""
    if sc.topology == "minindn":
        return sc.network.switches + sc.network.relays
    if sc.topology == "star":
        return ["fwd"]
    if sc.topology == "bottleneck":
        return [BOTTLENECK_PS_HOST, BOTTLENECK_WORKERS_HOST]
    if sc.topology in fabric.KINDS:
        return fabric.forwarders(sc)
    return ["root"] + [f"leaf{i + 1}" for i in range(sc.leaves)]
