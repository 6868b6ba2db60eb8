"""The simulator against the real runs: each case run for real (processes, sockets, namespaces)
and then simulated (`run.mode = "sim"`) with the same scenario, the same sets and the real
run's compute profile, and compared — the median iteration (target: within 10 % where the
real run is link-bound), the bytes of every link direction both runs name (within 1 %), and
the final parameters (the same where the run is synchronous). Bytes are compared twice: all of
them, and those of the training's exchanges alone (`TRAINING_CLASSES`: the start-up's content
fetch and registrations differ by the real run's retransmissions under CPU load). docs/simulation.md keeps the
table and says where and why they differ.

Every run's compute is the profiled device time (`training.device_time = "profiled"`): the
real run profiles the model on this machine, the simulated one is given that profile
(`training.layer_seconds` from the real run's scenario.toml), so both charge the same compute.
"""
from __future__ import annotations

import json
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from bench.common import bench_parser, emit, log, rnd, save, stamp
from bench.ina import BIG_MODEL
from bench.scenario_runs import RunError, ScenarioRun, run_scenario
from ndnps.lab.traces import TRAINING_CLASSES, link_bytes, node_of, trace_stems

ITERATION_WITHIN = 0.10
BYTES_WITHIN = 0.01
# links carrying less than this share of a run's bytes are not compared (management, a
# registration): their few packets are no measure of the model
MINOR_LINK = 0.01

PROFILED = ['training.device_time="profiled"']
# PS-less all-reduce moves every byte through several Python forwarders: on two cores a
# 100 Mbit/s BCube or ring is bound by their CPU (BCube(3, 2) 14 x its wire time), so these
# cases run at rates where the links are the limit; a 1M-parameter model ring, a 0.26M one BCube
NETNS_10 = ["netns.enabled=true", "links.rate_mbps=10"]
NETNS_2 = ["netns.enabled=true", "links.rate_mbps=2"]
SMALL_MODEL = [*BIG_MODEL, "training.hidden=[256]"]
# as bench.collectives: a part asked again before the suppression interval is over crosses
# the producer's link twice
SUPPRESSION = ["training.retx_suppression_ms=250", "training.retx_suppression_max_ms=500"]

# case -> (scenario, sets, whether the real run is link-bound: its iteration is compared)
CASES: dict[str, tuple[str, list[str], bool]] = {
    "bottleneck-4": ("bottleneck", ["topology.workers=4"], True),
    "bottleneck-8": ("bottleneck", ["topology.workers=8"], True),
    "bottleneck-16": ("bottleneck", ["topology.workers=16"], True),
    "ina-bottleneck-8": ("bottleneck", ["topology.workers=8", "ina.k=1"], True),
    "ina-fat-tree": ("ina-fat-tree", [], False),
    "ring": ("ring", ["topology.workers=4", *NETNS_10, *BIG_MODEL, *SUPPRESSION,
                      "training.max_versions=10", "training.eval_every=10"], True),
    "bcube": ("bcube", [*NETNS_2, *SMALL_MODEL, *SUPPRESSION, "training.worker_timeout=60",
                        "training.max_versions=10", "training.eval_every=10"], True),
    "multi-job": ("multi-job", [], True),
}
QUICK = ["bottleneck-4", "ina-fat-tree"]


def model_of(out: Path) -> dict[str, Any] | None:
    """The final parameters a run saved (the PS's model.npz; a pipeline's or several jobs'
    first), None without one."""
    import numpy as np
    paths = sorted(out.glob("model*.npz"))
    if not paths:
        return None
    with np.load(paths[0]) as f:
        return {k: f[k] for k in f.files}


def compare_models(a: dict | None, b: dict | None) -> dict[str, Any]:
    import numpy as np
    if a is None or b is None:
        return {"identical": None, "max_abs_diff": None}
    if a.keys() != b.keys():
        return {"identical": False, "max_abs_diff": None}
    numeric = [k for k in a if np.issubdtype(a[k].dtype, np.number)]
    diff = max((float(np.max(np.abs(a[k] - b[k]))) for k in numeric if a[k].size),
               default=0.0)
    same_rest = all(np.array_equal(a[k], b[k]) for k in a if k not in numeric)
    return {"identical": diff == 0.0 and same_rest, "max_abs_diff": diff}


def compare_links(real: dict[str, int], sim: dict[str, int],
                  forwarders: set[str] | None = None) -> dict[str, Any]:
    """Each link direction both runs name, with more than MINOR_LINK of the bytes (between
    two of `forwarders` if given): sim ÷ real; the worst one's deviation."""
    total = sum(real.values()) or 1
    ratios = {k: sim[k] / real[k] for k in real
              if k in sim and real[k] > MINOR_LINK * total
              and (forwarders is None or set(k.split("->")) <= forwarders)}
    worst = max(ratios, key=lambda k: abs(ratios[k] - 1), default=None)
    return {"links_compared": len(ratios), "links_real_only": sorted(set(real) - set(sim)),
            "worst_link": worst, "worst_ratio": rnd(ratios[worst], 4) if worst else None,
            "ratios": {k: rnd(v, 4) for k, v in sorted(ratios.items())}}


def run_case(case: str, versions: int, keep: Path) -> dict[str, Any]:
    scenario, sets, link_bound = CASES[case]
    sets = [*PROFILED, f"training.max_versions={versions}", f"training.eval_every={versions}",
            *sets]                      # (a case's own sets last: they win)
    real = run_scenario(scenario, sets, keep / f"{case}-real")
    doc = tomllib.loads((real.dir / "scenario.toml").read_text())
    # [[jobs]] inherit [training]'s profile (the same model's); the first job's
    layers = (doc.get("training") or doc["jobs"][0]).get("layer_seconds") or []
    sim_sets = [*sets, 'run.mode="sim"'] + ([f"training.layer_seconds={layers}"] if layers else [])
    sim = run_scenario(scenario, sim_sets, keep / f"{case}-sim")
    return figures(case, link_bound, real, sim)


def figures(case: str, link_bound: bool, real: ScenarioRun, sim: ScenarioRun) -> dict[str, Any]:
    r, s = real.summary, sim.summary
    it_real, it_sim = r.get("iteration_seconds"), s.get("iteration_seconds")
    over = it_sim / it_real if it_real and it_sim else None
    links = compare_links(r.get("link_bytes") or {}, s.get("link_bytes") or {})
    # the network's links (forwarder to forwarder): an app's face is a unix socket, and the
    # real run labels it by the first prefix the app registered, the simulated one by its name
    forwarders = {node_of(stem) for stem in trace_stems(real.dir, "rates")}
    training = compare_links(link_bytes(real.dir, TRAINING_CLASSES),
                             link_bytes(sim.dir, TRAINING_CLASSES), forwarders)
    models = compare_models(model_of(real.dir), model_of(sim.dir))
    simulated = s.get("simulated") or {}
    out = {"iteration_real_s": rnd(it_real, 4), "iteration_sim_s": rnd(it_sim, 4),
           "sim_over_real": rnd(over, 3), "link_bound": link_bound,
           "accuracy_real": r.get("final_accuracy"), "accuracy_sim": s.get("final_accuracy"),
           "versions": (r.get("versions"), s.get("versions")), **links,
           "training_worst_link": training["worst_link"],
           "training_worst_ratio": training["worst_ratio"],
           "parameters": models, "sim_wall_s": simulated.get("wall_seconds"),
           "sim_events": simulated.get("events"),
           "sim_events_per_s": simulated.get("events_per_second"),
           "real_wall_s": r.get("wall_seconds")}
    out["iteration_met"] = (abs(over - 1) <= ITERATION_WITHIN) if (over and link_bound) else None
    worst = training["worst_ratio"]
    out["bytes_met"] = abs(worst - 1) <= BYTES_WITHIN if worst is not None else None
    return out


def rows(sec: dict) -> list[tuple[str, str, str, str]]:
    out = []
    for case, f in (sec.get("cases") or {}).items():
        it = f.get("sim_over_real")
        out.append((f"{case}: iteration sim ÷ real", str(it),
                    f"within {ITERATION_WITHIN:.0%}" if f.get("link_bound") else "(CPU-bound)",
                    {True: "met", False: "missed", None: "-"}[f.get("iteration_met")]))
        out.append((f"{case}: worst network link's training bytes sim ÷ real",
                    str(f.get("training_worst_ratio")),
                    f"within {BYTES_WITHIN:.0%}",
                    {True: "met", False: "missed", None: "-"}[f.get("bytes_met")]))
    return out


def main(argv: list[str] | None = None) -> int:
    p = bench_parser("python -m bench agreement", __doc__, "two cases, 8 versions")
    p.add_argument("--cases", default=",".join(CASES), help=f"of {', '.join(CASES)}")
    p.add_argument("--versions", type=int, default=20)
    p.add_argument("--analyse", metavar="DIR", type=Path,
                   help="no runs: the figures of the runs kept in DIR (--keep) made again")
    args = p.parse_args(argv)
    cases = QUICK if args.quick else args.cases.split(",")
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        log(f"agreement: --cases: unknown {unknown[0]!r} (known: {', '.join(CASES)})")
        return 2
    versions = 8 if args.quick else args.versions
    keep = args.keep or Path(tempfile.mkdtemp(prefix="bench-agreement-"))
    results: dict[str, Any] = {"stamp": stamp(), "versions": versions, "cases": {}}
    for case in cases:
        try:
            if args.analyse:
                if not (args.analyse / f"{case}-sim" / "summary.json").exists():
                    continue
                f = figures(case, CASES[case][2], ScenarioRun(args.analyse / f"{case}-real"),
                            ScenarioRun(args.analyse / f"{case}-sim"))
            else:
                f = run_case(case, versions, keep)
            results["cases"][case] = f
        except RunError as e:
            log(f"agreement: {case}: {e}")
            results["cases"][case] = {"error": str(e)[:2000]}
            continue
        emit({"bench": "agreement", "case": case, **{k: v for k, v in f.items()
                                                     if k != "ratios"}})
    if not args.no_save:
        save("agreement", None, results)
    print(json.dumps({"bench": "agreement", "cases": {
        c: {k: f.get(k) for k in ("sim_over_real", "worst_ratio", "iteration_met", "bytes_met")}
        for c, f in results["cases"].items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
