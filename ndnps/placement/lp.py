"""The linear program of the placement: for a set S of aggregating forwarders,
the largest aggregation throughput γ — the rate at which every worker can send its gradient —
and the gradient routing that reaches it. Solved by HiGHS (`scipy.optimize.linprog`).

The variables and constraints are the placement method's; the program below is our formulation
of them (docs/placement.md):

  maximise γ over
    x[w,s] ≥ 0   worker w → aggregator s ∈ S          (aggregated at s)
    y[w]   ≥ 0   worker w → the PS's edge forwarder e   (aggregated at e, which always
                                                          aggregates, as the PS's ToR)
    z[w]   ≥ 0   worker w → the PS                     (not aggregated)
    u[s]   ≥ 0   aggregator s → the PS                 (its partial sums, not aggregated again)
    v[s]   ≥ 0   aggregator s → e                      (its partial sums, aggregated at e)
    t      ≥ 0   e → the PS                            (e's sums)
  subject to
    Σ_s x[w,s] + y[w] + z[w] = γ           every worker's whole gradient goes somewhere
    Σ_w x[w,s] ≤ c                          each aggregator's processing capacity
    u[s] + v[s] ≥ x[w,s]   for every w      a sum carries each segment once: an aggregator's
    t ≥ y[w], t ≥ v[s]                       output is as fast as its fastest input
    Σ (every rate whose shortest path crosses link e) ≤ C_e, each direction of each link.

Rates are in the links' unit (Mbit/s). The plan gives each worker the destination that carries
most of its gradient: an aggregator, or "edge" (y and z: toward the PS, through its edge).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix, vstack

from .network import Network, TopologyError


@dataclass
class Problem:
    """What the LP is about: the network, the training's PS and workers, the aggregators'
    processing capacity (Mbit/s of gradient input each) and the edge's (inf: unlimited), and
    whether a gradient may reach the PS unsummed (z; False: every worker's gradient is summed
    at an aggregator or at the edge, as a scenario's data plane does)."""
    network: Network
    ps: str
    workers: list[str]
    capacity: float = 400.0
    edge_capacity: float = math.inf
    unsummed: bool = True

    def __post_init__(self) -> None:
        for name in [self.ps, *self.workers]:
            if name not in self.network.nodes:
                raise TopologyError(f"{name!r}: no such node in {self.network.name or 'the network'}")
        if self.ps in self.workers:
            raise TopologyError(f"{self.ps!r}: the PS cannot also be a worker")
        if not self.workers:
            raise TopologyError("no workers")
        if not self.capacity > 0:
            raise TopologyError(f"capacity must be > 0, got {self.capacity}")
        for name in [self.ps, *self.workers]:
            self.network.edge_of(name)            # an app's node: a host or a forwarder
        self.edge = self.network.edge_of(self.ps)

    def candidates(self) -> list[str]:
        """Forwarders that may aggregate: the switches but the PS's edge (which always does) —
        a worker's own node too when it is a forwarder (a Mini-NDN node), whose sum then
        holds its worker's gradient and those routed through it."""
        return [n for n in self.network.switches if n not in (self.ps, self.edge)]


@dataclass
class Solution:
    gamma: float
    aggregators: list[str]
    plan: dict[str, str]                       # worker -> aggregator | "edge"
    rates: dict[str, dict[str, float]] = field(default_factory=dict)   # worker -> {dest: rate}
    seconds: float = 0.0                       # solver wall time


class _Vars:
    """Column indices of the LP's variables."""

    def __init__(self, workers: list[str], aggs: list[str]) -> None:
        self.n = 0
        self.gamma = self._take()
        self.x = {(w, s): self._take() for w in workers for s in aggs}
        self.y = {w: self._take() for w in workers}
        self.z = {w: self._take() for w in workers}
        self.u = {s: self._take() for s in aggs}
        self.v = {s: self._take() for s in aggs}
        self.t = self._take()

    def _take(self) -> int:
        self.n += 1
        return self.n - 1


def solve(problem: Problem, aggregators: list[str], tidy: bool = True) -> Solution:
    """γ and the plan with `aggregators` (a subset of the candidates) aggregating. `tidy`:
    of the plans with the best γ, the one that loads the links least (a second LP; searches
    that compare γ alone skip it and tidy their answer)."""
    started = time.perf_counter()
    net, ps, edge, workers = problem.network, problem.ps, problem.edge, problem.workers
    aggs = [s for s in aggregators if s != edge]
    allowed = set(problem.candidates())
    bad = [s for s in aggs if s not in allowed]
    if bad:
        raise TopologyError(f"{bad[0]!r}: not a candidate aggregator (the forwarders but the "
                            "PS's edge are; hosts and relays are not)")
    var = _Vars(workers, aggs)
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    ub: list[float] = []

    def le(terms: list[tuple[int, float]], bound: float) -> None:
        r = len(ub)
        for c, v in terms:
            rows.append(r)
            cols.append(c)
            vals.append(v)
        ub.append(bound)

    for s in aggs:                                                  # processing
        le([(var.x[w, s], 1.0) for w in workers], problem.capacity)
        for w in workers:                                           # outputs
            le([(var.x[w, s], 1.0), (var.u[s], -1.0), (var.v[s], -1.0)], 0.0)
        le([(var.v[s], 1.0), (var.t, -1.0)], 0.0)
    for w in workers:
        le([(var.y[w], 1.0), (var.t, -1.0)], 0.0)
        if not problem.unsummed:
            le([(var.z[w], 1.0)], 0.0)
    if math.isfinite(problem.edge_capacity):
        le([(var.y[w], 1.0) for w in workers] + [(var.v[s], 1.0) for s in aggs],
           problem.edge_capacity)
    load: dict[tuple[str, str], list[tuple[int, float]]] = {e: [] for e in net.directed_links()}

    def route(col: int, src: str, dst: str) -> None:
        for e in net.path(src, dst):
            load[e].append((col, 1.0))

    for (w, s), col in var.x.items():
        route(col, w, s)
    for w in workers:
        route(var.y[w], w, edge)
        route(var.z[w], w, ps)
    for s in aggs:
        route(var.u[s], s, ps)
        route(var.v[s], s, edge)
    route(var.t, edge, ps)
    for e, terms in load.items():
        if terms:
            le(terms, net.capacity(*e))
    a_ub = coo_matrix((vals, (rows, cols)), shape=(len(ub), var.n)).tocsr()
    eq_rows, eq_cols, eq_vals = [], [], []
    for row, w in enumerate(workers):                                # Σ = γ
        for c in [var.y[w], var.z[w], *(var.x[w, s] for s in aggs)]:
            eq_rows.append(row)
            eq_cols.append(c)
            eq_vals.append(1.0)
        eq_rows.append(row)
        eq_cols.append(var.gamma)
        eq_vals.append(-1.0)
    a_eq = coo_matrix((eq_vals, (eq_rows, eq_cols)), shape=(len(workers), var.n)).tocsr()
    cost = np.zeros(var.n)
    cost[var.gamma] = -1.0                                           # maximise γ
    res = linprog(cost, A_ub=a_ub, b_ub=np.array(ub), A_eq=a_eq, b_eq=np.zeros(len(workers)),
                  bounds=(0, None), method="highs")
    if res.status != 0:
        raise RuntimeError(f"the LP did not solve: {res.message}")
    # γ has many optimal plans (a chosen aggregator that cannot raise γ is free to idle): of
    # those, the one that loads the links least — aggregating wherever it saves a hop
    best = float(res.x[var.gamma])
    if not tidy:
        return _solution(problem.workers, var, aggs, res.x, best, started)
    hops = np.zeros(var.n)
    for terms in load.values():
        for col, _ in terms:
            hops[col] += 1.0
    floor = coo_matrix(([-1.0], ([0], [var.gamma])), shape=(1, var.n))
    second = linprog(hops, A_ub=vstack([a_ub, floor]).tocsr(),
                   b_ub=np.append(ub, -best * (1 - 1e-7)), A_eq=a_eq,
                   b_eq=np.zeros(len(workers)), bounds=(0, None), method="highs")
    return _solution(problem.workers, var, aggs, second.x if second.status == 0 else res.x,
                     best, started)


def _solution(workers: list[str], var: "_Vars", aggs: list[str], x: np.ndarray, gamma: float,
              started: float) -> Solution:
    """γ and each worker's rates and destination from the LP's values `x`."""
    rates: dict[str, dict[str, float]] = {}
    plan: dict[str, str] = {}
    for w in workers:
        r = {s: float(x[var.x[w, s]]) for s in aggs}
        r["edge"], r["ps"] = float(x[var.y[w]]), float(x[var.z[w]])
        rates[w] = {k: v for k, v in r.items() if v > 1e-9}
        # the destination that carries most of w's gradient: an aggregator, or "edge" for what
        # goes toward the PS (through its edge, which aggregates whatever reaches it); ties go
        # to an aggregator, so a chosen forwarder is used
        toward = {**{s: r[s] for s in aggs}, "edge": r["edge"] + r["ps"]}
        plan[w] = max(toward, key=lambda k: (round(toward[k], 9), k != "edge"))
    return Solution(gamma, list(aggs), plan, rates, time.perf_counter() - started)
