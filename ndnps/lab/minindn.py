"""A Mini-NDN topology file as a scenario's topology: `[topology] file = "x.conf"` (kind
"minindn"), so that a topology Mini-NDN users already have runs here unchanged.

As in Mini-NDN, every node of the file runs a forwarder and the apps run on nodes: every job's
PS on `ps_node`, the i-th worker of the run on `worker_nodes[i mod len]`, each using its node's
forwarder over its unix socket (no link between them: an app and its NFD). An entry of the
file's `[switches]` (a Mininet layer-2 switch there) runs a forwarder that only forwards: the
same links, one NDN hop more. Locally the forwarders are processes joined by UDP faces on
127.0.0.1; with `--netns` every node is a network namespace and every link a veth pair, as
Mininet makes them.

Each link's conditions are its own: the file's bw, delay, loss (percent) and jitter, or
[links]' where its line gives none. Delay, jitter and loss are emulated by the forwarders'
faces at both ends (each on what it sends, so both directions) — where the kernel has no netem,
as here, the other topologies' links fall back to the same; the rate by the faces too locally,
and with --netns by the kernel's tbf on both ends of the veth, as [links] rate_mbps is.

Routes: every forwarder routes each app's name and each node's name (an aggregator's
ForwardingHint; NLSR advertises each router's) to its next hop on the least-delay path, as
Mini-NDN's NLSR does — `Network.next_hop` on the network `[ina]`'s placement plans with, so the
paths the LP loaded are the ones the run takes.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ndnps.placement.network import TopologyError, read_minindn

from .netns import NetnsUnavailable
from .process import free_port
from .values import ScenarioError
from .nodes import NDN_PORT, AppNode, ForwarderNode, Plan
from .nodes import join as join_faces
from .nodes import apps as app_nodes

if TYPE_CHECKING:
    from ndnps.placement.network import Link, Network

    from .netns import Netns
    from .config import Scenario

# an app's unix socket to its node's forwarder, as the LP sees it (Mbit/s): not a limit
LOCAL_MBPS = 1e6


def apps(sc: "Scenario") -> list[AppNode]:
    """Every job's PS on the PS's node, the workers round the worker nodes."""
    nodes = sc.worker_nodes
    return app_nodes(sc, lambda i: nodes[i % len(nodes)], sc.ps_node)


def network(sc: "Scenario", bw: float) -> "Network":
    """The file's network with each app a host beside its node (a local link: unlimited, no
    cost), a link without bw= at `bw` Mbit/s."""
    from ndnps.placement.network import Link, Network
    net = sc.network
    links = [link if link.bw is not None else replace(link, bw=bw) for link in net.links]
    placed = apps(sc)
    links += [Link(a.name, a.forwarder, LOCAL_MBPS, cost=0.0) for a in placed]
    return Network([a.name for a in placed], list(net.switches), links, net.name,
                   relays=list(net.relays), fib=True)


def conditions(sc: "Scenario", link: "Link") -> dict[str, float]:
    """A link's emulation as the forwarders' faces take it: the file's values, [links]'
    where the file gives none."""
    d = sc.links
    table = {"loss": d.loss if link.loss is None else link.loss / 100,
             "delay_ms": d.delay_ms if link.delay_ms is None else link.delay_ms,
             "jitter_ms": d.jitter_ms if link.jitter_ms is None else link.jitter_ms,
             "rate_mbps": d.rate_mbps if link.bw is None else link.bw}
    return {k: v for k, v in table.items() if v}


def plan(sc: "Scenario", port: Callable[[], int] = free_port) -> Plan:
    """A forwarder per node (and per [switches] entry), the apps on theirs, the routes; the
    faces locally now (each forwarder on UDP port `port()` of 127.0.0.1), with --netns once
    the veths exist (`join`)."""
    net = network(sc, 1.0)                  # routes only: capacities do not matter
    placed = apps(sc)
    names = sc.network.switches + sc.network.relays
    nodes = {n: ForwarderNode(n, host=n, udp=NDN_PORT) if sc.netns else
             ForwarderNode(n, udp=port()) for n in names}
    host_links = []
    for link in sc.network.links:
        if sc.netns:
            host_links.append((link.a, link.b))
        else:
            a, b = nodes[link.a], nodes[link.b]
            join_faces(a, b, f"udp4://127.0.0.1:{b.udp}", f"udp4://127.0.0.1:{a.udp}",
                  conditions(sc, link), sc.links.reliability)
    at = {**{n: n for n in sc.network.switches}, **{a.name: a.forwarder for a in placed}}
    for name, node_of in at.items():
        hops = net.next_hops(name, nodes)
        for f, node in nodes.items():
            if f != node_of:            # (an app's own node: the app registers its prefix)
                node.routes.append((f"/{name}", hops[f]))
    return Plan(nodes, placed, host_links)


def join(plan: Plan, sc: "Scenario", netns: "Netns") -> list[str]:
    """With --netns, once the veths exist (`netns.links`, in `plan.host_links`' order): the
    faces over them, each with its link's delay, jitter and loss, and its rate by tbf on both
    ends ([links] queue_bytes, burst and by default queue as [bottleneck]'s). Notes for the
    run's summary."""
    by_ends = {frozenset((link.a, link.b)): link for link in sc.network.links}
    burst = sc.bottleneck.burst_bytes
    queue = int(sc.links.queue_bytes) or sc.bottleneck.queue_bytes
    limited = 0
    for veth in netns.links:
        table = conditions(sc, by_ends[frozenset((veth.a, veth.b))])
        rate = table.pop("rate_mbps", 0.0)
        if rate:
            for host, dev in ((veth.a, veth.dev_a), (veth.b, veth.dev_b)):
                try:
                    netns.tbf(host, dev, rate, burst, queue)
                except RuntimeError as e:
                    raise NetnsUnavailable(f"cannot limit link {veth.a}:{veth.b} at {host}: "
                                           f"{e}") from None
            limited += 1
        join_faces(plan.forwarders[veth.a], plan.forwarders[veth.b],
              f"udp4://{veth.addr_b}:{NDN_PORT}", f"udp4://{veth.addr_a}:{NDN_PORT}", table,
              sc.links.reliability)
    return [f"{limited} of {len(netns.links)} links limited by tbf at their rate"] \
        if limited else []


def limited(sc: "Scenario") -> bool:
    """Whether a link of the scenario's file has a rate (with --netns: tbf needed)."""
    return sc.topology == "minindn" and any(
        conditions(sc, link).get("rate_mbps") for link in sc.network.links)


def read_file(topo: dict[str, Any], sc: "Scenario", base: Path | None) -> None:
    """[topology] file (kind "minindn"): the Mini-NDN file read (every error names its line
    and key), and the nodes the PS and the workers run on."""
    if sc.topology != "minindn":
        raise ScenarioError(f"topology.kind: a topology file is kind = \"minindn\" (or leave "
                            f"kind out), got {sc.topology!r}")
    file = topo.get("file")
    if not isinstance(file, str) or not file:
        raise ScenarioError(f"topology.file: expected the path of a Mini-NDN topology file, "
                            f"got {file!r}")
    path = Path(file).expanduser()
    if not path.is_absolute():
        path = (base or Path.cwd()) / path
    if not path.is_file():
        raise ScenarioError(f"topology.file: {path}: no such file")
    try:
        net = read_minindn(path)
    except TopologyError as e:
        raise ScenarioError(f"topology.file: {e}") from None
    sc.network = net
    sc.raw["topology"]["file"] = str(path.resolve())      # the run's copy finds it anywhere

    def node(value: Any, key: str) -> str:
        if not isinstance(value, str):
            raise ScenarioError(f"{key}: expected a node's name, got {value!r}")
        try:
            name = net.node(value)
        except TopologyError as e:
            raise ScenarioError(f"{key}: {e} (nodes: {', '.join(net.switches)})") from None
        if name not in net.switches:
            raise ScenarioError(f"{key}: {name!r} is one of the file's [switches], which "
                                "forward only; apps run on [nodes]")
        return name

    sc.ps_node = node(topo.get("ps_node", net.switches[0]), "topology.ps_node")
    others = [n for n in net.switches if n != sc.ps_node] or [sc.ps_node]
    names = topo.get("worker_nodes", others)
    if not isinstance(names, list) or not names:
        raise ScenarioError(f"topology.worker_nodes: expected a list of nodes, got {names!r}")
    sc.worker_nodes = [node(n, f"topology.worker_nodes[{i}]") for i, n in enumerate(names)]
    if len(set(sc.worker_nodes)) != len(sc.worker_nodes):
        raise ScenarioError(f"topology.worker_nodes: a node named twice in {names}")
    for i, n in enumerate(sc.worker_nodes):
        try:
            net.path(n, sc.ps_node)
        except TopologyError:
            raise ScenarioError(f"topology.worker_nodes[{i}]: no path from {n!r} to the PS's "
                                f"node {sc.ps_node!r}") from None


def check_apps(sc: "Scenario", doc: dict[str, Any]) -> None:
    """What a topology file's scenario cannot do: the apps' names must not be nodes' (both
    are routed by name), PS-less training is not built on it, the links are the file's."""
    nodes = set(sc.network.nodes)
    for job in sc.all_jobs:
        for key, app in [("ps", job.who.ps)] + [("workers", w) for w in job.who.workers]:
            if app in nodes:
                raise ScenarioError(f"training.{key}: {app!r} is also a node of topology.file "
                                    "(the routes to the app and to the node would clash): "
                                    "name the app otherwise")
        if job.peers.collective:
            raise ScenarioError("training.collective: PS-less training on a topology file is "
                                "not built (a PS and its workers are)")
    if doc.get("links", {}).get("app_faces") is True:
        raise ScenarioError("links.app_faces: on a topology file every app uses its node's "
                            "forwarder over its local socket, as in Mini-NDN: no link to "
                            "emulate there")
    sc.links.app_faces = False
