"""python -m ndnps.placement --topology fat-tree:4 | leaf-spine:S,L,H | FILE --k K
                            [--capacity C] [--ps NODE] [--workers A,B,...] [--baselines] [--json]

Places k aggregating forwarders by the greedy + LP method and prints the chosen forwarders, the
aggregation throughput γ (Mbit/s: the rate every worker can send its gradient at), the gradient
routing plan (each worker's aggregator, or "edge": the PS's edge forwarder, which always
aggregates) and γ for k = 0..K. Generated topologies put the PS on the first host and workers on
all the others unless --ps / --workers say otherwise. A Mini-NDN file's nodes are forwarders, as
in Mini-NDN: the PS and the workers run on the nodes named (default: the PS on the first of
[nodes], workers on the others), each using its node's forwarder, and every node but the PS's
(its edge, which always aggregates) is a candidate — the workers' nodes too.
--baselines adds random placement (mean of 20), the edge alone, every candidate, and exhaustive
search where C(candidates, k) <= 5000. Exit 0; 2 on a bad topology or argument (every bad flag
named, in one line); 1, quietly, when the reader of its output is gone (`| head -1`).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

from .greedy import baselines, greedy
from .lp import Problem
from .network import Network, TopologyError, parse_topology


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ndnps.placement", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--topology", required=True,
                   help="fat-tree:K, leaf-spine:S,L,H or a Mini-NDN topology file")
    p.add_argument("--k", type=int, required=True, help="aggregating forwarders to place")
    p.add_argument("--capacity", type=float, default=400.0,
                   help="each aggregator's processing capacity, Mbit/s of gradient input "
                        "(default 400; links are 100 Mbit/s unless the file says)")
    p.add_argument("--ps", help="the PS's node (default: the first host, or a Mini-NDN "
                                "file's first node)")
    p.add_argument("--workers", help="comma-separated worker nodes (default: every other host "
                                     "or node)")
    p.add_argument("--baselines", action="store_true", help="random, edge only, all, exhaustive")
    p.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    return p


def _node(net: Network, name: str, flag: str, bad: list[str]) -> str:
    """The node `name` an app runs on, or its reason appended to `bad` (naming `flag`)."""
    try:
        node = net.node(name)
        net.edge_of(node)                       # a host or a forwarder, not a relay
        return node
    except TopologyError as e:
        bad.append(f"{flag}: {e}")
        return name


def _apps(net: Network, args: argparse.Namespace, bad: list[str]) -> tuple[str, list[str]]:
    """The PS's node and the workers' (--ps, --workers or the defaults)."""
    places = net.hosts or net.switches          # where apps run: hosts, or forwarder nodes
    ps = _node(net, args.ps, "--ps", bad) if args.ps else places[0]
    workers = [_node(net, w, "--workers", bad) for w in args.workers.split(",") if w.strip()] \
        if args.workers else [h for h in places if h != ps]
    if ps in workers:
        bad.append(f"--workers: {ps!r} is the PS's node")
    if not workers:
        bad.append("--workers: no worker node")
    return ps, workers


def run(args: argparse.Namespace) -> dict:
    """The placement; TopologyError naming every bad flag, in one message."""
    bad: list[str] = []
    if args.k < 0:
        bad.append(f"--k: must be >= 0, got {args.k}")
    if not 0 < args.capacity < math.inf:        # nan too
        bad.append(f"--capacity: must be a finite number > 0, got {args.capacity:g}")
    try:
        net = parse_topology(args.topology)
    except TopologyError as e:
        raise TopologyError("; ".join([f"--topology: {e}", *bad])) from None
    ps, workers = _apps(net, args, bad)
    if bad:
        raise TopologyError("; ".join(bad))
    problem = Problem(net, ps, workers, capacity=args.capacity)
    placement = greedy(problem, args.k)
    best = placement.best
    out = {"topology": net.name, "ps": ps, "edge": problem.edge, "workers": workers,
           "capacity": args.capacity, "k": args.k,
           # fewer candidates than k asked: greedy places them all (`placed` < `k`)
           "candidates": len(problem.candidates()), "placed": len(best.aggregators),
           "placement": best.aggregators,
           "gamma": best.gamma, "gamma_by_k": placement.gamma_by_k, "plan": best.plan,
           "rates": best.rates,
           "solve_seconds_by_k": {k: s.seconds for k, s in placement.by_k.items()}}
    if args.baselines:
        out["baselines"] = baselines(problem, args.k)
    return out


def _k(out: dict) -> str:
    """k as asked, and what was done when there were fewer candidates."""
    if out["placed"] == out["k"]:
        return f"k = {out['k']}"
    return (f"k = {out['k']} asked, {out['candidates']} candidate forwarders: placing all "
            f"{out['placed']}")


def table(out: dict) -> str:
    lines = [f"topology {out['topology']}: PS {out['ps']} (edge {out['edge']}), "
             f"{len(out['workers'])} workers, aggregator capacity {out['capacity']:g} Mbit/s",
             f"placement ({_k(out)}): {', '.join(out['placement']) or '(none)'}",
             f"gamma: {out['gamma']:.2f} Mbit/s per worker", "", "k   gamma (Mbit/s)"]
    lines += [f"{k:<3} {g:.2f}" for k, g in out["gamma_by_k"].items()]
    lines += ["", "worker  sends its gradient to"]
    lines += [f"{w:<7} {dest}" for w, dest in out["plan"].items()]
    if "baselines" in out:
        lines += ["", "baseline     gamma (Mbit/s)"]
        lines += [f"{name:<12} {'-' if g is None else f'{g:.2f}'}"
                  for name, g in out["baselines"].items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        out = run(args)
    except TopologyError as e:
        print(f"placement: {e}", file=sys.stderr)
        return 2
    try:
        print(json.dumps(out) if args.json else table(out))
        sys.stdout.flush()          # a reader gone (`| head -1`) shows here, not at exit
    except BrokenPipeError:
        # stop quietly, as Unix tools do (Python's docs, signal module, "Note on SIGPIPE"):
        # stdout pointed at devnull so the flush at exit does not fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
