"""In-network aggregation in a scenario (docs/aggregation.md): the `[ina]` table, the scenario's
topology as a placement network, and where the aggregators go.

    [ina]
    k = 2                  # aggregators besides the PS's edge forwarder (which always sums)
    capacity = 400         # Mbit/s of gradients each may sum (the LP's c)
    slots = 1024           # each aggregator's slot pool
    timeout = 2.0          # s a slot waits for its contributors
    placement = "greedy"   # "greedy" | "random" | "edge-only" | ["leaf1", ...]
    link_mbps = 1000       # links' capacity for the LP where [links] gives no rate

The PS's edge is the forwarder the PS's app uses (a star's `fwd`, a tree's `root`, the PS's own
host forwarder in namespaces, the bottleneck's PS host, a topology file's PS node); the
candidates are the topology's other routers (a tree's leaves, the bottleneck's workers host, a
topology file's other nodes, the workers' own included). In namespaces the router the LP takes
for the PS's edge (`fwd`, `root`) sums the workers the plan sends "to the edge", and the PS's
host forwarder sums its partial sums with the chosen aggregators'. The placement is solved once, before
the run (ndnps.placement: the LP per candidate set, greedy over k); the runner configures the
edge and the chosen forwarders (management `aggregators/add`, with the training's key) and hands
the plan to the PS through the training's `aggregate_at` / `aggregate_via`.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import fabric, minindn, topology
from ndnps.ndn.aggregation import MAX_MEMBERS

from .feature import Command, Feature
from .series import ps_series
from .values import BOTTLENECK_PS_HOST, BOTTLENECK_WORKERS_HOST, ScenarioError, known_keys, number

if TYPE_CHECKING:
    from ndnps.placement.lp import Solution
    from ndnps.placement.network import Network
    from ndnps.protocol.config import TrainingSpec

    from .config import Scenario
    from .nodes import Plan

PLACEMENTS = ("greedy", "random", "edge-only")
KEYS = {"k", "capacity", "slots", "timeout", "placement", "link_mbps"}


@dataclass
class Ina:
    k: int = 2
    capacity: float = 400.0
    slots: int = 1024
    timeout: float = 2.0
    placement: str | list[str] = "greedy"
    link_mbps: float = 1000.0
    # where the aggregators went: placed before the run (`place`), not read from the table
    plan: "InaPlan | None" = field(default=None, compare=False, repr=False)


@dataclass
class InaPlan:
    """What the placement decided: the edge, each chosen aggregator's workers, γ; `direct`:
    the edge has no worker of its own and one aggregator sums them all, so the PS asks that
    aggregator (`root`) directly — the edge would only pass its one sum on, as an exact
    partial sum of segments half as long; `idle`: each aggregator the placement chose and
    then gave no worker, with the reason."""
    edge: str
    aggregators: dict[str, list[str]] = field(default_factory=dict)
    gamma: float = 0.0
    gamma_by_k: dict[int, float] = field(default_factory=dict)
    placement: list[str] = field(default_factory=list)
    direct: bool = False
    idle: dict[str, str] = field(default_factory=dict)

    @property
    def root(self) -> str:
        """The node the PS asks for every sum (the training's aggregate_at)."""
        return next(iter(self.aggregators)) if self.direct else self.edge

    def aggregate_via(self) -> list[str]:
        """The training's aggregate_via entries (the root's sub-groups)."""
        if self.direct:
            return []
        return [f"{node}:{'+'.join(ws)}" for node, ws in self.aggregators.items()]

    def configured(self) -> list[str]:
        """The forwarders that sum: the root, then the sub-groups' aggregators."""
        return [self.root, *(n for n in self.aggregators if n != self.root)]

    def notes(self) -> list[str]:
        """What the run's output says of the plan."""
        out = [f"in-network aggregation: the placement chose {node} and gave it no worker: "
               f"{why}" for node, why in self.idle.items()]
        if self.direct:
            out.append(f"in-network aggregation: every worker is summed at {self.root} and the "
                       f"PS's edge {self.edge} has none of its own: the PS asks {self.root} "
                       "directly")
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"edge": self.edge, "root": self.root, "placement": self.placement,
                "gamma": round(self.gamma, 3),
                "gamma_by_k": {str(k): round(g, 3) for k, g in self.gamma_by_k.items()},
                "aggregators": self.aggregators, "idle": self.idle}


def parse(table: Any, sc: "Scenario") -> Ina:
    """[ina], checked against the scenario (errors name the key)."""
    known_keys(table, "ina", KEYS)
    ina = Ina()
    ina.k = number(table.get("k", ina.k), "ina.k", 0, 64, True)
    ina.capacity = number(table.get("capacity", ina.capacity), "ina.capacity", 1e-3)
    ina.slots = number(table.get("slots", ina.slots), "ina.slots", 1, 1 << 20, True)
    ina.timeout = number(table.get("timeout", ina.timeout), "ina.timeout", 0.01, 60.0)
    ina.link_mbps = number(table.get("link_mbps", ina.link_mbps), "ina.link_mbps", 1e-3)
    placement = table.get("placement", ina.placement)
    routers = candidates(sc)
    if isinstance(placement, list):
        if len(set(placement)) != len(placement):
            raise ScenarioError(f"ina.placement: a forwarder named twice in {placement}")
        for name in placement:
            if name not in routers:
                raise ScenarioError(f"ina.placement: {name!r} is not a forwarder that may "
                                    f"aggregate (candidates: {', '.join(routers) or 'none'})")
    elif placement not in PLACEMENTS:
        raise ScenarioError(f"ina.placement: must be one of {', '.join(PLACEMENTS)} or a list "
                            f"of forwarders, got {placement!r}")
    ina.placement = placement
    if sc.system != "ndnps":
        raise ScenarioError("ina: in-network aggregation is ndnps's (run.system = \"ndnps\")")
    if sc.topology == "bcube":
        raise ScenarioError("ina: not on a bcube topology (its hosts relay: the PS's edge is "
                            "its own forwarder; not built)")
    if len(sc.all_jobs) > 1:
        raise ScenarioError("ina: one job only (several jobs share one aggregator with [share])")
    job = sc.training
    if job.update.mode != "sync":
        raise ScenarioError("ina: needs training.mode = \"sync\"")
    if len(job.who.workers) > MAX_MEMBERS:
        # a plan naming more workers would not fit the one Interest that carries it
        raise ScenarioError(f"topology.workers: in-network aggregation sums at most "
                            f"{MAX_MEMBERS} workers under one plan, got {len(job.who.workers)}")
    if not job.who.key:
        raise ScenarioError("ina: needs training.key (aggregators check each contribution's "
                            "HMAC)")
    if job.aggregation.aggregate_at or job.aggregation.aggregate_via:
        raise ScenarioError("training.aggregate_at: set by [ina] (leave it out)")
    return ina


def configure(send: str | Command, job: "TrainingSpec", node: str, slots: int = 1024,
              timeout: float = 2.0, first: int = 0) -> None:
    """Make a forwarder aggregate `job` as node `node`, in slots [first, first + slots) of its
    pool: the management command aggregators/add with the training's key, sent by `send` (or
    over the socket `send` names, unix://...). ValueError when refused."""
    from ndnps.forwarder.status import command
    from ndn.encoding import Component, Name

    from ndnps.ndn.aggregation import AggregatorConfig
    from ndnps.ndn.tlv import name_from_str
    from ndnps.protocol import names
    who = job.who
    config = AggregatorConfig(name_from_str(f"/{who.ps}/{who.train}"), node, who.key.encode(),
                              b"".join(bytes(c) for c in names.key(who.ps, who.train)), slots,
                              timeout, first=first)
    name = Name.from_str("/localhost/nfd/aggregators/add") + [Component.from_bytes(config.encode())]
    code, text = command(send, name) if isinstance(send, str) else send(name)
    if code != 200:
        raise ValueError(f"aggregators/add refused at {node}: {code} {text}")


def edge(sc: "Scenario") -> str:
    """The forwarder the PS's app uses (topology.plan_local / plan_hosts)."""
    if sc.topology == "bottleneck":
        return BOTTLENECK_PS_HOST
    if sc.topology in fabric.SWITCHED:
        return fabric.network(sc, 1000.0).edge_of(sc.training.who.ps)
    if sc.topology == "minindn":                # the PS's node, locally and in namespaces
        return sc.ps_node
    if sc.netns:
        return f"h-{sc.training.who.ps}"
    return "fwd" if sc.topology == "star" else "root"


def candidates(sc: "Scenario") -> list[str]:
    """The forwarders that may aggregate besides the edge."""
    if sc.topology == "bottleneck":
        return [BOTTLENECK_WORKERS_HOST]
    if sc.topology == "tree":
        return [f"leaf{i + 1}" for i in range(sc.leaves)]
    if sc.topology in fabric.SWITCHED:
        net = fabric.network(sc, 1000.0)
        return [s for s in net.switches if s != net.edge_of(sc.training.who.ps)]
    if sc.topology == "minindn":
        return [n for n in sc.network.switches if n != sc.ps_node]
    return []


def network(sc: "Scenario", ina: Ina) -> "Network":
    """The scenario's topology as ndnps.placement sees it: its routers as switches, its apps
    as hosts beside the router they use (in namespaces, past their own host forwarder: the
    app's host is the app), links at [links]' rate (the bottleneck's at its rate)."""
    from ndnps.placement.network import Link, Network
    bw = sc.links.rate_mbps or ina.link_mbps
    job = sc.training
    links: list[Link] = []
    if sc.topology in fabric.SWITCHED:
        return fabric.network(sc, bw)
    if sc.topology == "minindn":                # a link without bw= at [links]' rate, or ours
        return minindn.network(sc, bw)
    if sc.topology == "bottleneck":
        a, b = BOTTLENECK_PS_HOST, BOTTLENECK_WORKERS_HOST
        switches = [a, b]
        links.append(Link(a, b, sc.bottleneck.rate_mbps))
        links.append(Link(job.who.ps, a, ina.link_mbps))
        links += [Link(w, b, ina.link_mbps) for w in job.who.workers]
    elif sc.topology == "star":
        switches = ["fwd"]
        links += [Link(h, "fwd", bw) for h in [job.who.ps, *job.who.workers]]
    else:
        leaves = [f"leaf{i + 1}" for i in range(sc.leaves)]
        switches = ["root", *leaves]
        links += [Link("root", leaf, bw) for leaf in leaves]
        links.append(Link(job.who.ps, "root", bw))
        links += [Link(w, leaves[i % len(leaves)], bw) for i, w in enumerate(job.who.workers)]
    return Network([job.who.ps, *job.who.workers], switches, links, sc.name)


def place(sc: "Scenario", ina: Ina) -> InaPlan:
    """The aggregators and their workers, by [ina]'s placement. The LP sees the scenario's
    data plane: the PS's edge is one of our forwarders, whose capacity is the others' (it is
    not a switch of unbounded speed), and every gradient is summed somewhere (nothing reaches
    the PS unsummed)."""
    from ndnps.placement.greedy import greedy
    from ndnps.placement.lp import Problem, solve
    job = sc.training
    cands = candidates(sc)
    by_k: dict[int, float] = {}
    if not cands or ina.k == 0 or ina.placement == "edge-only":
        chosen: list[str] = []
    elif ina.placement == "random":
        chosen = sorted(random.Random(job.model.seed).sample(cands, min(ina.k, len(cands))))
    elif isinstance(ina.placement, list):
        chosen = list(ina.placement)
    else:
        chosen = []                                 # greedy, below
    # the edge in namespaces is the PS's host forwarder; the LP's is the router it joins
    problem = Problem(network(sc, ina), job.who.ps, list(job.who.workers), ina.capacity,
                      edge_capacity=ina.capacity, unsummed=False)
    if ina.placement == "greedy" and cands and ina.k:
        found = greedy(problem, ina.k)
        sol = found.best
        by_k = found.gamma_by_k
    else:
        sol = solve(problem, chosen)
    groups: dict[str, list[str]] = {}
    # in namespaces the PS's own host forwarder is the edge it asks; the router the LP takes
    # for its edge (a star's fwd, a tree's root) sums what the LP sends "to the edge"
    router_edge = sc.netns and sc.topology not in ("bottleneck", "minindn")
    edge_workers = 0
    for w in job.who.workers:
        node = sol.plan.get(w, "edge")
        if node == "edge" or node == problem.edge:
            edge_workers += 1
            if not router_edge:
                continue
            node = problem.edge
        groups.setdefault(node, []).append(w)
    idle = {s: _idle_reason(s, sol, ina) for s in sol.aggregators if s not in groups}
    direct = len(groups) == 1 and (router_edge or not edge_workers)
    return InaPlan(edge(sc), groups, sol.gamma, by_k or {len(sol.aggregators): sol.gamma},
                   list(sol.aggregators), direct, idle)


def _idle_reason(node: str, sol: "Solution", ina: Ina) -> str:
    """Why the LP's plan gives a chosen aggregator no worker: the plan cannot split a worker's
    gradient, so each goes where the larger share of it does, never here."""
    shares = [r.get(node, 0.0) for r in sol.rates.values()]
    full = sum(shares) >= ina.capacity * (1 - 1e-6)
    return (f"the LP sends it at most {max(shares, default=0.0):.3g} Mbit/s of a worker's "
            f"γ = {sol.gamma:.3g}, never a worker's larger share, and a gradient is not split "
            "(each worker goes where most of it does); "
            + (f"it takes all it may, ina.capacity = {ina.capacity:g} Mbit/s" if full else
               "more would not raise γ"))


def ina_counts(run_dir: Path, end: dict, forwarders: list[str]) -> dict[str, Any]:
    """In-network aggregation's counters: the PS's (segments the network summed, segments
    it summed itself) and the aggregating forwarders' (from their final status)."""
    slots = rejected = answered = fallbacks = 0
    by_forwarder = {}
    for name in forwarders:
        path = run_dir / "traces" / f"{name}-status.json"
        try:
            agg = json.loads(path.read_text()).get("aggregation") or {}
        except (OSError, ValueError):
            continue
        c = agg.get("counters", {})
        by_forwarder[name] = c
        slots += c.get("collisions", 0)
        rejected += c.get("rejected", 0)
        answered += c.get("answered", 0)
        fallbacks += c.get("fallbacks", 0)
    return {"segments_aggregated": end.get("segments_aggregated"),
            "segments_fallback": end.get("segments_fallback"),
            "slot_collisions": slots, "contributions_rejected": rejected,
            "sums_answered": answered, "subgroup_fallbacks": fallbacks,
            "forwarders": by_forwarder}


class InNetwork(Feature):
    """[ina]: aggregators placed before the run; also a training's own aggregate_at (a
    PS-less job's aggregator, or one given by hand), configured with [ina]'s defaults."""
    name = "ina"
    tables = ("ina",)

    def active(self, sc: "Scenario") -> bool:
        return sc.ina is not None or bool(sc.training.aggregation.aggregate_at)

    def parse(self, doc: dict[str, Any], sc: "Scenario") -> None:
        if "ina" in doc:
            sc.ina = parse(doc["ina"], sc)

    def prepare(self, sc: "Scenario", run_dir: Path) -> list[str]:
        if sc.ina is None:
            return []
        # where the aggregators go, and the plan the PS sends them
        plan = sc.ina.plan = place(sc, sc.ina)
        sc.replace_job(sc.training, sc.training.with_values(
            aggregate_at=plan.root, aggregate_via=plan.aggregate_via()))
        return plan.notes()

    def routes(self, sc: "Scenario", plan: "Plan") -> None:
        if sc.ina is not None and sc.ina.plan is not None:
            topology.route_aggregators(plan, sc, list(sc.ina.plan.aggregators))

    def aggregators(self, sc: "Scenario") -> list[str] | None:
        if sc.ina is not None and sc.ina.plan is not None:
            return sc.ina.plan.configured()
        at = sc.training.aggregation.aggregate_at
        return [at] if at else []

    def configure(self, sc: "Scenario", name: str, send: Command) -> bool:
        table = sc.ina or Ina()
        configure(send, sc.training, name, table.slots, table.timeout)
        return True

    def summarize(self, run_dir: Path, sc: "Scenario", summary: dict[str, Any],
                  wall_seconds: float) -> None:
        if sc.ina is None or sc.ina.plan is None:
            return
        configured = self.aggregators(sc) or []
        summary["ina"] = {**sc.ina.plan.as_dict(), "aggregators_configured": configured,
                          **ina_counts(run_dir, ps_series(run_dir, sc.training.recorder).end,
                                       configured)}
