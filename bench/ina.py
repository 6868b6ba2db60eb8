"""In-network aggregation at a few forwarders (issue 24).

    python -m bench.ina [--k 5] [--capacity 400] [--quick] [--no-save]

Built so far — part 2, the placement (`ndnps.placement`, pure computation): on fat-tree k = 4
(PS on h1, the 15 other hosts workers, links 100 Mbit/s), γ for k = 0..K by greedy, random
placement (mean of 20), the PS's edge alone, every candidate aggregating (the upper bound) and
exhaustive search wherever C(19, k) <= 5000; greedy ÷ exhaustive (target >= 0.9) and solve time
per k. Parts 1 (PS ingress per version), 3 (the bandwidth-limited iteration) and 4 (loss) need
the `*aggregate*` data plane, which is not built yet: they are absent, not estimated.
"""
from __future__ import annotations

import sys
import time
from typing import Any

from ndnps.placement.greedy import baselines, greedy
from ndnps.placement.lp import Problem
from ndnps.placement.network import fat_tree

from .common import bench_parser, emit, fmt, log, rnd, save, stamp

TARGETS = {"greedy_over_exhaustive": 0.9}


def placement(k_max: int, capacity: float) -> dict:
    net = fat_tree(4)
    problem = Problem(net, net.hosts[0], net.hosts[1:], capacity=capacity)
    started = time.perf_counter()
    found = greedy(problem, k_max)
    greedy_s = time.perf_counter() - started
    by_k: dict[int, dict[str, Any]] = {}
    for k in range(k_max + 1):
        t0 = time.perf_counter()
        b = baselines(problem, k)
        g = found.gamma_by_k.get(k)
        by_k[k] = {"greedy": rnd(g), **{name: rnd(v) for name, v in b.items()},
                   "greedy_over_exhaustive": rnd(g / b["exhaustive"])
                   if g is not None and b["exhaustive"] else None,
                   "greedy_solve_s": rnd(found.by_k[k].seconds, 4) if k in found.by_k else None,
                   "baselines_s": rnd(time.perf_counter() - t0, 2),
                   "placement": found.by_k[k].aggregators if k in found.by_k else None}
        log(f"k = {k}: greedy {by_k[k]['greedy']}, exhaustive {by_k[k]['exhaustive']}, random "
            f"{by_k[k]['random']}, all {by_k[k]['all']} (Mbit/s)")
    worst: float | None = min((v["greedy_over_exhaustive"] for v in by_k.values()
                 if v["greedy_over_exhaustive"] is not None), default=None)
    return {"topology": "fat-tree:4", "capacity": capacity, "by_k": by_k,
            "greedy_seconds": rnd(greedy_s, 3), "worst_greedy_over_exhaustive": worst,
            "misses": [] if worst is None or worst >= TARGETS["greedy_over_exhaustive"]
            else [f"greedy / exhaustive {worst} < 0.9"]}


def rows(sec: dict) -> list[tuple[str, str, str, str]]:
    """bench --table: the placement's row."""
    p = sec.get("placement") or {}
    if not p:
        return []
    gammas = ", ".join(fmt(v.get("greedy"), ".1f") for v in p["by_k"].values())
    return [("placement fat-tree:4: greedy γ k = 0..; greedy ÷ exhaustive (worst)",
             f"{gammas}; {fmt(p.get('worst_greedy_over_exhaustive'), '.3f')}", ">= 0.9",
             "; ".join(p.get("misses", [])) or "met")]


def main(argv: list[str] | None = None) -> int:
    p = bench_parser("bench.ina", __doc__, "k up to 3")
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--capacity", type=float, default=400.0)
    args = p.parse_args(argv)
    k_max = 3 if args.quick else args.k
    results = {"stamp": stamp(), "placement": placement(k_max, args.capacity)}
    if not args.no_save:
        save("ina", None, results)
    emit({"bench": "ina", "worst_greedy_over_exhaustive":
          results["placement"]["worst_greedy_over_exhaustive"],
          "gamma_by_k": {k: v["greedy"] for k, v in results["placement"]["by_k"].items()}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
