"""In-network aggregation at a few forwarders (docs/aggregation.md), four parts, ratios side by side:

    python -m bench.ina [--parts 1,2,3,4] [--workers 4,8,16] [--rates 100,1000]
                        [--mtus 1500] [--systems persistent,ina,unicast,tcp]
                        [--versions 15] [--k 5] [--capacity 400] [--quick] [--keep DIR]
                        [--no-save]

1. PS ingress per version ÷ model (the `ina` tree scenario, local, the bottleneck's 1M-parameter
   MLP so that the workers' header segments are noise), N = 4, 8, 16: without aggregation,
   with it (target <= 1.05), and with a pool of 8 slots (fewer than the sums in flight): the
   measured ingress against what the counters predict — a sum per aggregated segment, N
   gradient segments per segment that fell back (target within 10 %).
2. The placement (`ndnps.placement`, pure computation): on fat-tree k = 4 (PS on h1, the 15
   other hosts workers, links 100 Mbit/s), γ for k = 0..K by greedy, random placement (mean of
   20), the PS's edge alone, every candidate aggregating (the upper bound) and exhaustive
   search wherever C(19, k) <= 5000; greedy ÷ exhaustive (target >= 0.9); solve time per k.
3. The bandwidth-limited iteration (needs root: network namespaces): the `bottleneck` scenario
   (tbf on the link between the PS host and the workers host), the aggregator on the workers'
   side ([ina] k = 1: every worker summed there, at every rate — checked, a miss otherwise),
   N = 4, 8, 16 at 100 and 1000 Mbit/s (--mtus: at each link MTU, links.mtu), alternating
   ndnps persistent without aggregation, with it, unicast NDN, and the TCP PS
   (bench.bottleneck's runs). Targets at N = 16: at 100 Mbit/s with ÷ without <= 0.25, with ÷
   TCP <= 0.12; at 1 Gbit/s with ÷ TCP <= 0.5. And what one aggregating forwarder sums per
   second of its CPU (`aggregator_mbps`: N gradients a version over the workers host's
   forwarder's CPU seconds a version; the median over the runs is `capacity_mbps`, what
   [ina] capacity stands for on this machine).
4. 5 % loss on every link of the `ina` tree (link reliability on, as lossy scenarios have it),
   with aggregation: completes, accuracy, iteration ÷ the lossless run's.
"""
from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ndnps.placement.greedy import baselines, greedy
from ndnps.placement.lp import Problem
from ndnps.placement.network import fat_tree

from . import bottleneck
from .common import bench_parser, emit, fmt, load_results, log, median, rnd, save, stamp
from .scenario_runs import RunError, run_scenario

TARGETS = {"greedy_over_exhaustive": 0.9, "ingress": 1.05, "predicted": 0.1}
# part 3's targets at N = 16, by rate: with ÷ without, with ÷ TCP
BANDWIDTH_TARGETS = {100.0: {"with_over_without": 0.25, "with_over_tcp": 0.12},
                     1000.0: {"with_over_tcp": 0.5}}
# the bottleneck's 1M-parameter model on the local ina tree (part 1)
BIG_MODEL = ["training.dataset=\"synthetic\"", "training.n_features=1024",
             "training.n_samples=20000", "training.n_classes=10", "training.hidden=[768, 256]",
             "training.batch=128", "training.epochs=100"]


def ingress(workers: list[int], versions: int, keep: Path) -> dict:
    """Part 1: the PS's ingress per version over the model, without, with, and with a pool
    too small; the small pool's against the counters' prediction."""
    plain = keep / "plain.toml"
    doc = bottleneck_free_ina()
    plain.write_text(doc[:doc.index("[ina]")] + doc[doc.index("[training]"):])
    out: dict[str, Any] = {}
    for n in workers:
        sets = [f"topology.workers={n}", f"training.max_versions={versions}",
                f"training.eval_every={versions}", *BIG_MODEL]
        point: dict[str, Any] = {}
        for label, scenario, extra in (("without", str(plain), []), ("with", "ina", []),
                                       ("small_pool", "ina", ["ina.slots=8"])):
            log(f"ingress N = {n}: {label}")
            try:
                s = run_scenario(scenario, sets + extra, keep / f"ingress-{n}-{label}").summary
            except RunError as e:
                point[label] = {"failed": str(e).splitlines()[0]}
                continue
            i = s.get("ina") or {}
            f = {"ps_in_over_model": rnd(s.get("ps_bytes_in_per_version_over_model"), 4),
                 "iteration_s": rnd(s.get("iteration_seconds")),
                 "accuracy": s.get("final_accuracy"),
                 "segments_aggregated": i.get("segments_aggregated"),
                 "segments_fallback": i.get("segments_fallback"),
                 "slot_collisions": i.get("slot_collisions")}
            agg, fb = i.get("segments_aggregated") or 0, i.get("segments_fallback") or 0
            if agg + fb:
                # a sum per aggregated segment, N segments per one that fell back, over the
                # segments; the header segments and Data overhead come with both
                f["predicted_over_model"] = rnd((agg + n * fb) / (agg + fb), 4)
            point[label] = f
        w, sp = point.get("with", {}), point.get("small_pool", {})
        misses = []
        if (w.get("ps_in_over_model") or 99) > TARGETS["ingress"]:
            misses.append(f"N={n}: with aggregation {w.get('ps_in_over_model')} > 1.05")
        if sp.get("predicted_over_model") and sp.get("ps_in_over_model"):
            # the overhead of Data on the model is in both: compare over the with-run's
            off = sp["ps_in_over_model"] / (sp["predicted_over_model"]
                                            * (w.get("ps_in_over_model") or 1)) - 1
            point["small_pool_off_prediction"] = rnd(off, 4)
            if abs(off) > TARGETS["predicted"]:
                misses.append(f"N={n}: small pool {off:+.1%} off the prediction")
        point["misses"] = misses
        out[f"N{n}"] = point
        emit({"bench": "ina", "part": 1, "N": n,
              **{k: v.get("ps_in_over_model") for k, v in point.items() if isinstance(v, dict)},
              "small_pool_off_prediction": point.get("small_pool_off_prediction")})
    return out


def bottleneck_free_ina() -> str:
    from ndnps.lab.spec import SCENARIO_DIR
    return (SCENARIO_DIR / "ina.toml").read_text()


SYSTEMS = ["persistent", "ina", "unicast", "tcp"]      # part 3's, alternated


def bandwidth(workers: list[int], rates: list[float], versions: int, rounds: int,
              keep: Path, mtus: list[int] | None = None,
              systems: list[str] | None = None) -> dict:
    """Part 3: bench.bottleneck's runs with the ina system beside the others."""
    systems = systems or SYSTEMS
    out: dict[str, Any] = {}
    capacity: list[float] = []
    for mtu in mtus or [1500]:
        for rate in rates:
            for n in workers:
                key = bottleneck.point_key(rate, n, mtu)
                points = bottleneck.alternate(
                    systems, rounds, key,
                    lambda system, i: bottleneck.run_one(system, n, rate, versions,
                                                         keep / f"{key}-{system}-{i}", mtu),
                    lambda f: f"iteration {f.get('iteration_s')} s, over wire "
                              f"{f.get('over_wire')}, ingress {f.get('ps_in_over_model')}, "
                              f"accuracy {f.get('accuracy')}, summed at {f.get('ina_root')}")
                capacity += [f["aggregator_mbps"] for f in points.get("ina", [])
                             if f.get("aggregator_mbps")]
                c = bottleneck.compare(points)
                it = {s: (c.get(s) or {}).get("iteration_s") for s in SYSTEMS}
                if it["ina"] and it["persistent"]:
                    c["with_over_without"] = rnd(it["ina"] / it["persistent"])
                if it["ina"] and it["tcp"]:
                    c["with_over_tcp"] = rnd(it["ina"] / it["tcp"])
                c["wire_allows"] = {"with_over_without": rnd(2 / (n + 1)),
                                    "with_over_tcp": rnd(1 / n)}
                c["misses"] = [m for m in bottleneck.verdicts(rate, n, c) if m.startswith("ina")]
                if n == 16:
                    for figure, bound in BANDWIDTH_TARGETS.get(rate, {}).items():
                        if (c.get(figure) or 99) > bound:
                            c["misses"].append(f"{key}: {figure} {c.get(figure)} > {bound}")
                out[key] = c
                emit({"bench": "ina", "part": 3, "point": key,
                      **{f"{s}_s": it[s] for s in systems},
                      "with_over_without": c.get("with_over_without"),
                      "with_over_tcp": c.get("with_over_tcp"),
                      "aggregator_mbps": (c.get("ina") or {}).get("aggregator_mbps"),
                      "misses": c["misses"]})
    if capacity:
        out["capacity_mbps"] = {"median": median(capacity), "min": min(capacity),
                                "max": max(capacity), "runs": len(capacity), "misses": []}
    return out


def loss(versions: int, keep: Path) -> dict:
    """Part 4: the ina tree at 5 % loss on every link against the lossless run."""
    out: dict[str, Any] = {}
    sets = [f"training.max_versions={versions}", f"training.eval_every={versions}"]
    for label, extra in (("lossless", []), ("loss5", ["links.loss=0.05"])):
        log(f"loss: {label}")
        try:
            s = run_scenario("ina", sets + extra, keep / f"loss-{label}").summary
        except RunError as e:
            out[label] = {"failed": str(e).splitlines()[0]}
            continue
        i = s.get("ina") or {}
        out[label] = {"iteration_s": rnd(s.get("iteration_seconds")),
                      "accuracy": s.get("final_accuracy"), "versions": s.get("versions"),
                      "segments_aggregated": i.get("segments_aggregated"),
                      "segments_fallback": i.get("segments_fallback"),
                      "retransmissions": s.get("retransmissions")}
    a, b = out.get("lossless", {}), out.get("loss5", {})
    if a.get("iteration_s") and b.get("iteration_s"):
        out["loss_over_lossless"] = rnd(b["iteration_s"] / a["iteration_s"])
    out["misses"] = [f"{k}: failed" for k in ("lossless", "loss5") if "failed" in out.get(k, {})]
    emit({"bench": "ina", "part": 4, "loss_over_lossless": out.get("loss_over_lossless"),
          "accuracy": {k: out[k].get("accuracy") for k in ("lossless", "loss5") if k in out}})
    return out


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
    """bench --table: a row per part measured."""
    out = []
    for n, point in (sec.get("ingress") or {}).items():
        out.append((f"PS ingress ÷ model {n}: without, with, small pool (off prediction)",
                    f"{fmt((point.get('without') or {}).get('ps_in_over_model'), '.2f')}, "
                    f"{fmt((point.get('with') or {}).get('ps_in_over_model'), '.3f')}, "
                    f"{fmt((point.get('small_pool') or {}).get('ps_in_over_model'), '.2f')} "
                    f"({fmt(point.get('small_pool_off_prediction'), '+.3f')})",
                    "<= 1.05; within 10 %", "; ".join(point.get("misses", [])) or "met"))
    p = sec.get("placement") or {}
    if p:
        gammas = ", ".join(fmt(v.get("greedy"), ".1f") for v in p["by_k"].values())
        out.append(("placement fat-tree:4: greedy γ k = 0..; greedy ÷ exhaustive (worst)",
                    f"{gammas}; {fmt(p.get('worst_greedy_over_exhaustive'), '.3f')}", ">= 0.9",
                    "; ".join(p.get("misses", [])) or "met"))
    for key, c in sorted((sec.get("bandwidth") or {}).items()):
        if key == "capacity_mbps":
            out.append(("one aggregating forwarder sums, Mbit/s of gradients per CPU second "
                        "(median, min-max)", f"{fmt(c.get('median'), '.0f')} "
                        f"({fmt(c.get('min'), '.0f')}-{fmt(c.get('max'), '.0f')})", "report",
                        "-"))
            continue
        out.append((f"{key} with ÷ without, with ÷ TCP",
                    f"{fmt(c.get('with_over_without'), '.2f')}, "
                    f"{fmt(c.get('with_over_tcp'), '.2f')}",
                    "<= 0.25, <= 0.12 (N=16)" if key.startswith("100M")
                    else "with ÷ TCP <= 0.5 (N=16)", "; ".join(c.get("misses", [])) or "met"))
    lo = sec.get("loss") or {}
    if lo:
        out.append(("5 % loss with aggregation: × lossless, accuracy",
                    f"{fmt(lo.get('loss_over_lossless'), '.2f')}, "
                    f"{fmt((lo.get('loss5') or {}).get('accuracy'), '.3f')}", "completes",
                    "; ".join(lo.get("misses", [])) or "met"))
    return out


def main(argv: list[str] | None = None) -> int:
    p = bench_parser("bench.ina", __doc__, "k up to 3; N = 4, 8 at 100 Mbit/s, 8 versions",
                     rounds=1)
    p.add_argument("--parts", default="1,2,3,4")
    p.add_argument("--workers", default="4,8,16")
    p.add_argument("--rates", default="100,1000")
    p.add_argument("--mtus", default="1500", help="part 3: the link MTUs (links.mtu)")
    p.add_argument("--systems", default=",".join(SYSTEMS),
                   help="part 3: the systems alternated (ina and its comparisons)")
    p.add_argument("--versions", type=int, default=15)
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--capacity", type=float, default=400.0)
    args = p.parse_args(argv)
    parts = {int(x) for x in args.parts.split(",")}
    workers = [int(x) for x in args.workers.split(",")]
    rates = [float(x) for x in args.rates.split(",")]
    k_max = args.k
    if args.quick:
        k_max, workers, rates, args.versions = 3, [4, 8], [100.0], 8
    keep = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-ina-"))
    results: dict[str, Any] = {"stamp": stamp(), "versions": args.versions}
    try:
        if 2 in parts:
            results["placement"] = placement(k_max, args.capacity)
            emit({"bench": "ina", "part": 2, "worst_greedy_over_exhaustive":
                  results["placement"]["worst_greedy_over_exhaustive"],
                  "gamma_by_k": {k: v["greedy"]
                                 for k, v in results["placement"]["by_k"].items()}})
        if 1 in parts:
            results["ingress"] = ingress(workers, args.versions, keep)
        if 4 in parts:
            results["loss"] = loss(max(args.versions, 20), keep)
        if 3 in parts:
            systems = args.systems.split(",")
            if set(systems) - set(SYSTEMS) or "ina" not in systems:
                p.error(f"--systems: ina and any of {', '.join(SYSTEMS)}")
            results["bandwidth"] = bandwidth(workers, rates, args.versions, args.rounds, keep,
                                             [int(x) for x in args.mtus.split(",")], systems)
    finally:
        if not args.keep:
            shutil.rmtree(keep, ignore_errors=True)
    if not args.no_save:
        # merged into what results.json holds: parts not run keep their figures, and part 3's
        # points of other rates, N or MTUs theirs (one run per MTU)
        old = load_results().get("ina") or {}
        if isinstance(old.get("bandwidth"), dict) and "bandwidth" in results:
            results["bandwidth"] = {**old["bandwidth"], **results["bandwidth"]}
        save("ina", None, {**old, **results})
    emit({"bench": "ina", "misses": [m for part in ("ingress", "bandwidth") for pt in
                                     (results.get(part) or {}).values()
                                     for m in (pt.get("misses") or [])]
          + (results.get("loss") or {}).get("misses", [])
          + (results.get("placement") or {}).get("misses", [])})
    return 0


if __name__ == "__main__":
    sys.exit(main())
