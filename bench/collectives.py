"""PS-less training (docs/collectives.md) against the PS, one run, figures side by side:

    python -m bench collectives [--shapes 2x2,2x3,3x2] [--systems ps,ps-ina,ring,ina,bcube]
                                [--rate 20] [--versions 12] [--quick] [--keep DIR] [--no-save]
                                [--analyse DIR]

Every system trains the same ~1M-parameter MLP (bench.ina's synthetic model) on the same
BCube(n, k) fabric in network namespaces — n^k hosts, each its own forwarder with an uplink to
its switch at every level, every link limited to `--rate` Mbit/s by tbf — with n^k gradients a
version. The rate is 20 Mbit/s by default: at 100 Mbit/s this 2-core machine, not the links,
sets the pace (BCube(2, 2), one run: PS 1.43 s a version, ring 1.80, ina 1.55, bcube 1.45,
all within 25 %, where at 20 Mbit/s they range 2.6–7.8 s), and every system would measure the
same CPU. The systems:

* ps: the PS (persistent push) on the first host beside the first of n^k workers;
* ps-ina: the same, its host's forwarder summing the gradients (training.aggregate_at = p0);
* ring, ina, bcube: n^k peers, ring all-reduce, in-network all-reduce at p0, BCube's
  level-by-level method (ndnps.apps.peer).

Per system and shape: iteration (median s between versions), compute (median s a gradient),
sync = iteration − compute, the peers' sync_seconds (last gradient computed → last peer
holding the new parameters), bytes per peer face per version by level beside the analytic
value, the busiest link's bytes per version, accuracy. Targets: ring's and bcube's bytes per
peer face within 5 % of the analytic value; bcube's sync ≤ 0.6 × the PS's and ≤ ring's at 9
peers (3x2). Each figure is reported by the number of peers (4, 8, 9).
"""
from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from .common import bench_parser, emit, fmt, jsonl_records, log, median, ratio, rnd, save, stamp
from .scenario_runs import RunError, run_scenario
from .ina import BIG_MODEL

SYSTEMS = ("ps", "ps-ina", "ring", "ina", "bcube")
SETS = {"ps": ['training.collective=""'],
        "ps-ina": ['training.collective=""', 'training.aggregate_at="p0"'],
        "ring": ['training.collective="ring"'], "ina": ['training.collective="ina"'],
        "bcube": ['training.collective="bcube"']}
BYTES_WITHIN = 0.05
# The forwarders' retransmission suppression (initial, max ms) for every system: an Interest
# another peer sends for a part already asked for is forwarded once the interval is over (NFD's
# best-route), and the part then crosses the producer's link twice. At 20 Mbit/s and these
# queues a round trip is up to ~0.4 s: BCube(3, 2) sent 8-10 % above the analytic bytes at 1/2,
# 10/250 ms (NFD's defaults) and with a 128 KiB queue, 2.6 % at 250/500 (bench/HISTORY.md)
SUPPRESSION_MS = (250, 500)
SYNC_OVER_PS = 0.6


def run_one(system: str, n: int, k: int, rate: float, versions: int, out: Path) -> dict:
    sets = [f"topology.n={n}", f"topology.k={k}", f"topology.workers={n ** k}",
            f"links.rate_mbps={rate:g}", *BIG_MODEL, f"training.max_versions={versions}",
            f"training.eval_every={versions}", "training.worker_timeout=60",
            f"training.retx_suppression_ms={SUPPRESSION_MS[0]}",
            f"training.retx_suppression_max_ms={SUPPRESSION_MS[1]}",
            "netns.enabled=true", *SETS[system]]
    run_scenario("bcube", sets, out)
    return figures(system, out)


def figures(system: str, out: Path) -> dict:
    """A run directory's figures; its summary.json made again from what the run left
    (`--analyse`: the summaries of kept runs by the code as it is now)."""
    from ndnps.lab import report, spec
    from ndnps.lab.peers import busiest_link
    from ndnps.lab.traces import link_bytes
    sc = spec.load(str(out / "scenario.toml"))
    s = report.summarize(out, sc, 0.0)
    s["link_bytes"] = link_bytes(out)
    recorder = "ps" if system.startswith("ps") else "w1"
    recs = [r for r in jsonl_records(out / "metrics" / f"{recorder}.jsonl")
            if "version" in r and "event" not in r][2:]          # start-up apart
    compute = median(r.get("compute") for r in recs)
    it = s.get("iteration_seconds")
    f: dict[str, Any] = {
        "iteration_s": rnd(it), "compute_s": rnd(compute),
        "sync_s": rnd(it - compute) if it is not None and compute is not None else None,
        "peers_sync_s": rnd(s.get("sync_seconds")),
        "accuracy": s.get("final_accuracy"),
        # the busiest direction of a link between forwarders, per version (every system alike)
        "max_link_bytes_per_version": rnd(busiest_link(
            s.get("link_bytes") or {}, [*sc.training.who.workers, sc.training.who.ps])
            / max(1, s.get("versions") or 1), 0),
        "retransmissions": s.get("retransmissions"),
    }
    if s.get("collective"):
        f["bytes_per_peer_face"] = {k: rnd(v, 0) for k, v in
                                    (s.get("bytes_per_peer_face_per_version") or {}).items()}
        f["analytic"] = {k: rnd(v, 0) for k, v in
                         (s.get("analytic_bytes_per_peer_face_per_version") or {}).items()}
        f["bytes_over_analytic"] = {k: rnd(v) for k, v in
                                    (s.get("bytes_over_analytic") or {}).items()}
        f["parameters_identical"] = s.get("parameters_identical")
    else:
        f["ps_in_over_model"] = rnd(s.get("ps_bytes_in_per_version_over_model"))
        f["ps_out_over_model"] = rnd(s.get("ps_bytes_out_per_version_over_model"))
    return f


def shape_point(n: int, k: int, systems: list[str], rate: float, versions: int,
                keep: Path, analyse: bool = False) -> dict:
    point: dict[str, Any] = {"peers": n ** k}
    for system in systems:
        log(f"BCube({n}, {k}) {system}")
        out = keep / f"{n}x{k}-{system}"
        try:
            point[system] = f = figures(system, out) if analyse else \
                run_one(system, n, k, rate, versions, out)
        except (RunError, OSError, ValueError) as e:
            point[system] = {"failed": str(e).splitlines()[0]}
            continue
        log(f"  iteration {f['iteration_s']} s, sync {f['sync_s']} s, "
            f"bytes/analytic {f.get('bytes_over_analytic')}, accuracy {f['accuracy']}")
    sync = {s: (point.get(s) or {}).get("sync_s") for s in systems}
    misses = []
    for s in ("ring", "bcube"):
        for level, r in ((point.get(s) or {}).get("bytes_over_analytic") or {}).items():
            if abs(r - 1) > BYTES_WITHIN:
                misses.append(f"{s} level {level}: bytes ÷ analytic {r}")
    point["bcube_over_ps"] = ratio(sync.get("bcube"), sync.get("ps"))
    point["bcube_over_ring"] = ratio(sync.get("bcube"), sync.get("ring"))
    if (n, k) == (3, 2):
        if (point.get("bcube_over_ps") or 99) > SYNC_OVER_PS:
            misses.append(f"9 peers: bcube sync ÷ PS {point.get('bcube_over_ps')} > "
                          f"{SYNC_OVER_PS}")
        if (point.get("bcube_over_ring") or 99) > 1.0:
            misses.append(f"9 peers: bcube sync ÷ ring {point.get('bcube_over_ring')} > 1")
    point["misses"] = misses
    return point


def growth(points: dict[str, dict], systems: list[str]) -> dict[str, dict[int, Any]]:
    """Each system's sync and busiest link by the number of peers."""
    out: dict[str, dict[int, Any]] = {}
    for p in points.values():
        for s in systems:
            f = p.get(s) or {}
            out.setdefault(s, {})[p["peers"]] = {
                "sync_s": f.get("sync_s"),
                "max_link_mb_per_version": rnd((f.get("max_link_bytes_per_version") or 0) / 1e6,
                                               3)}
    return out


def rows(sec: dict) -> list[tuple[str, str, str, str]]:
    out = []
    for shape, p in sorted((sec.get("shapes") or {}).items()):
        syncs = ", ".join(f"{s} {fmt((p.get(s) or {}).get('sync_s'), '.3f')}"
                          for s in SYSTEMS if s in p)
        out.append((f"BCube {shape} ({p.get('peers')} peers) sync s", syncs,
                    "bcube <= 0.6 PS, <= ring (9 peers)" if shape == "3x2" else "-",
                    "; ".join(m for m in p.get("misses", []) if "sync" in m) or "met"))
        ratios = ", ".join(f"{s} {(p.get(s) or {}).get('bytes_over_analytic')}"
                           for s in ("ring", "bcube") if s in p)
        out.append((f"BCube {shape} bytes per peer face ÷ analytic", ratios, "within 5 %",
                    "; ".join(m for m in p.get("misses", []) if "bytes" in m) or "met"))
    return out


def main(argv: list[str] | None = None) -> int:
    p = bench_parser("bench.collectives", __doc__, "BCube(2, 2) only, 6 versions")
    p.add_argument("--shapes", default="2x2,2x3,3x2")
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--rate", type=float, default=20.0)
    p.add_argument("--versions", type=int, default=12)
    p.add_argument("--analyse", metavar="DIR",
                   help="no runs: the figures of the runs kept in DIR (--keep) made again")
    args = p.parse_args(argv)
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    systems = [s for s in args.systems.split(",")]
    for s in systems:
        if s not in SYSTEMS:
            p.error(f"--systems: unknown {s!r} (known: {', '.join(SYSTEMS)})")
    if args.quick:
        shapes, args.versions = [(2, 2)], 6
    keep = Path(args.analyse or args.keep or tempfile.mkdtemp(prefix="bench-coll-"))
    results: dict[str, Any] = {"stamp": stamp(), "versions": args.versions,
                               "rate_mbps": args.rate, "shapes": {}}
    try:
        for n, k in shapes:
            point = results["shapes"][f"{n}x{k}"] = shape_point(
                n, k, systems, args.rate, args.versions, keep, bool(args.analyse))
            emit({"bench": "collectives", "shape": f"{n}x{k}",
                  **{f"{s}_sync_s": (point.get(s) or {}).get("sync_s") for s in systems},
                  "bcube_over_ps": point.get("bcube_over_ps"),
                  "bcube_over_ring": point.get("bcube_over_ring"), "misses": point["misses"]})
        results["growth"] = growth(results["shapes"], systems)
    finally:
        if not (args.keep or args.analyse):
            shutil.rmtree(keep, ignore_errors=True)
    if not args.no_save:
        save("collectives", None, results)
    emit({"bench": "collectives", "growth": results.get("growth"),
          "misses": [m for pt in results["shapes"].values() for m in pt.get("misses", [])]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
