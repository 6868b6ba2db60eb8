"""Link bytes on the tree topology against the minimum for a multicast tree.

    python -m bench.tree [--versions 10] [--quick] [--keep DIR]

The `tree` scenario (3 forwarders: a root with the PS, two leaves joined to it by UDP, 8
workers spread over the leaves) with the ~100k-parameter MLP of bench/sweep.py, run with the
persistent PIT and, side by side, with the unicast baseline. From each forwarder's per-face
rate trace: the bytes of pushed parameters each link carried downstream (OutData of class
`distribute` for pushes; `probe` for Data answering probes, counted apart; `params` for the
unicast baseline's per-worker copies), against the minimum a multicast tree needs: every
segment of every version once per link, i.e. the bytes of the PS's own pushes (InData of class
`distribute` on the PS's face at the root; unicast: the PS's `params` Data ÷ N, one copy).

ratio = link bytes / minimum, per link (root->leafK, leafK->wJ). Target 1.00 on every link
with the persistent PIT; unicast carries N/leaves copies on root->leaf. Also the bytes of all
classes per link and direction (gradients and Interests too), for context.
Writes bench/results.json key "tree"; the last line printed is one JSON object.
"""
from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from bench.common import bench_parser, emit, fmt, interleave, log, rnd, save, stamp
from bench.scenario_runs import model_sets, run_scenario
from bench.sweep import MODEL, model_label

TARGET = (0.99, 1.01)


def link_figures(run) -> dict:
    """Per downstream link: parameter bytes carried vs the multicast minimum."""
    classes = {node: run.face_classes(node) for node in run.nodes()}
    pushed = sum(b for (face, typ, cls), (_, b) in classes["root"].items()
                 if face == "ps" and typ == "InData" and cls == "distribute")
    params = sum(b for (face, typ, cls), (_, b) in classes["root"].items()
                 if face == "ps" and typ == "InData" and cls == "params")
    n = run.n_workers
    unicast = run.summary["push_mode"] == "unicast"
    minimum = params / n if unicast else pushed
    links = {}
    for node, fc in classes.items():
        per: dict[str, dict[str, int]] = {}
        for (face, typ, cls), (_, b) in fc.items():
            if face == "ps" or not typ.startswith("Out") or cls == "mgmt":
                continue
            d = per.setdefault(face, {"distribute": 0, "probe": 0, "params": 0, "all": 0})
            d["all"] += b
            if typ == "OutData" and cls in d:
                d[cls] += b
        for face, d in per.items():
            if node != "root" and face == "root":
                continue                                  # upstream: gradients, Interests
            carried = d["params"] if unicast else d["distribute"]
            links[f"{node}->{face}"] = {
                "bytes": carried, "probe_bytes": d["probe"], "all_classes_bytes": d["all"],
                "ratio": rnd(carried / minimum) if minimum else None,
                "ratio_with_probes": rnd((carried + d["probe"]) / minimum) if minimum else None}
    ratios = [v["ratio"] for v in links.values() if v["ratio"] is not None]
    trunk = [v["ratio"] for k, v in links.items()
             if k.startswith("root->") and v["ratio"] is not None]
    edge = [v["ratio"] for k, v in links.items()
            if not k.startswith("root->") and v["ratio"] is not None]
    return {"push_mode": run.summary["push_mode"], "workers": n, "versions": len(run.ps_versions),
            "minimum_bytes_per_link": round(minimum), "links": dict(sorted(links.items())),
            "ratio_max": max(ratios) if ratios else None,
            "ratio_min": min(ratios) if ratios else None,
            "trunk_ratio_max": max(trunk) if trunk else None,
            "trunk_ratios": trunk, "edge_ratio_range": [min(edge), max(edge)] if edge else None,
            "probes": run.counter("probes"), "retransmissions": run.counter("retransmissions")}


def main(argv: list[str] | None = None) -> int:
    p = bench_parser("python -m bench.tree", __doc__, "6 versions", rounds=1)
    p.add_argument("--versions", type=int, default=10)
    args = p.parse_args(argv)
    versions = 6 if args.quick else args.versions
    base = args.keep or Path(tempfile.mkdtemp(prefix="tree-"))
    log(f"tree: {model_label(MODEL)}; {versions} versions; persistent vs unicast")

    def run(mode: str, tag: str) -> dict:
        sets = [f"training.push_mode=\"{mode}\"", f"training.max_versions={versions}",
                "training.eval_every=100000", "run.timeout=1200",
                *model_sets(MODEL["n_features"], MODEL["hidden"])]
        res = link_figures(run_scenario("tree", sets, base / f"{mode}-{tag}"))
        log(f"  {mode:10s}: link ratio {res['ratio_min']}..{res['ratio_max']} "
            f"(root->leaf max {res['trunk_ratio_max']}), probes {res['probes']}")
        return res

    try:
        runs = interleave(["persistent", "unicast"], args.rounds, run)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    pers, uni = runs["persistent"][-1], runs["unicast"][-1]
    figures = {"model": model_label(MODEL), "versions": versions, "target": list(TARGET),
               "persistent": pers, "unicast": uni,
               "rounds": {m: [r["ratio_max"] for r in rs] for m, rs in runs.items()},
               "meets_target": TARGET[0] <= pers["ratio_min"] and pers["ratio_max"] <= TARGET[1],
               "quick": args.quick, **stamp()}
    if not args.no_save:
        save("tree", None, figures)
    for k, v in pers["links"].items():
        log(f"  {k:14s} persistent {fmt(v['ratio'], '.4f')}")
    log(f"  unicast: root->leaf {uni['trunk_ratios']}, leaf->worker {uni['edge_ratio_range']}")
    emit({"ratio_max": pers["ratio_max"], "ratio_min": pers["ratio_min"],
          "unicast_trunk_ratio_max": uni["trunk_ratio_max"], "ratio": pers["ratio_max"],
          "target": list(TARGET)})
    return 0


def rows(sec: dict) -> list[tuple[str, str, str, str]]:
    p, u = sec.get("persistent"), sec.get("unicast")
    if not p:
        return []
    return [("tree: pushed bytes per link ÷ multicast minimum (every link)",
             f"{fmt(p['ratio_min'], '.4f')} – {fmt(p['ratio_max'], '.4f')}; unicast root→leaf "
             f"{fmt(u and u['trunk_ratio_max'], '.2f')}",
             "1.00", "met" if sec.get("meets_target") else "missed")]


if __name__ == "__main__":
    sys.exit(main())
