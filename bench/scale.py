"""Scale in simulation (`run.mode = "sim"`, docs/simulation.md): figures against N, three parts:

    python -m bench scale [--parts 1,2,3] [--k8 16,64,128] [--k16 256,1024]
                          [--placements ps,greedy,random,edge-only] [--ina-k 3] [--slots 1024]
                          [--bcube-n 3,4,5,6,7,8] [--jobs 2,4,8] [--rate 1000] [--versions 5]
                          [--job-versions 20] [--timeout 1800] [--quick] [--keep DIR]
                          [--no-save]

1. The PS with and without in-network aggregation on fat-trees (k = 8: N = --k8; k = 16:
   N = --k16; the PS beside the first worker when every host trains), every link at --rate
   Mbit/s ([links] rate_mbps: a local fat-tree's faces emulate it, the apps' faces too), the
   digits MLP's shape (64-128-10, 38 KB; a synthetic dataset big enough for N shards) with
   synthetic gradients (`sim.synthetic_gradients`: no model pass, the profiled device time).
   Variants: `ps` (no [ina]), and [ina] with --ina-k aggregators besides the PS's edge placed
   by `greedy` (k = 8 only: at k = 16 it solves ~950 LPs, ~13 minutes), `random`,
   `edge-only`. Per N: PS ingress per version ÷ model bytes, iteration (median s), slot
   collisions and fallbacks (SwitchML's and ATP's fixed slot pools: a collision is two
   segments hashed to one slot, a fallback a segment summed by the PS instead), and the
   simulation's cost: the child's wall seconds, the loop's wall seconds, events, events/s.
2. Ring all-reduce against BCube's level-by-level synchronisation (Guo et al., "BCube", SIGCOMM
   2009; docs/collectives.md) on the same BCube(n, 2) fabric, n = --bcube-n (n² peers, 9 to
   64): the ring's peers in the Gray-code order that puts each next to its neighbour over one
   switch (fabric.gray_ring: the topology-aware ring), so both use the same links and hosts —
   a ring on a star would be another network. Links at --rate, the apps' own faces left
   unlimited (`links.app_faces = false`: a BCube server's peer is on its host, as in the
   namespace runs of bench.collectives). A 154 KB MLP (64-512-10) so that at 64 peers a
   ring's chunk is still ~2.4 KB, not mostly headers. Per n: each system's sync seconds per
   version (the peers' `sync_seconds`) and bytes per peer face ÷ the analytic figure (the
   summary's `bytes_over_analytic`, per level; the worst level).
3. J jobs (--jobs) sharing one aggregator in turns (scenarios/multi-job.toml's tree, share
   controller and policy; docs/sharing.md): job i is the shipped file's job i mod 3 (a PS
   job, an in-network all-reduce job of peers, a smaller PS job), started 0.5 s apart. Per J:
   each job's completion time (first to last version), the sharing efficiency (the job alone
   ÷ shared, mean over jobs, as bench.sharing: each of the three templates run alone once),
   the summary's `sharing` block (Jain's index over the overlap), and the violations
   (`ina_overlap_violations`, `decision_mismatches`: must be 0).

A simulation that fails is recorded with its error and the bench goes on. Plots (PNG) and
scale.json go to --keep (else a temporary directory, named in the output); the run
directories are removed unless --keep.
"""
from __future__ import annotations

import json
import math
import shutil
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any, Mapping

from ndnps.ndn.aggregation import MAX_MEMBERS

from .common import ROOT, bench_parser, emit, fmt, log, mean, ratio, rnd, save, stamp
from .scenario_runs import RunError, run_scenario

SIM = ['run.mode="sim"']
PLACEMENTS = ("ps", "greedy", "random", "edge-only")
GREEDY_MAX_K = 8                    # greedy's LPs beyond: ~13 minutes at k = 16
TEMPLATES = ("big", "peers", "small")               # multi-job.toml's jobs, in file order
JOB_START_GAP = 0.5                                 # s between the jobs' starts (part 3)


# ---- reading a summary -----------------------------------------------------------------------

def sim_cost(summary: dict) -> dict[str, Any]:
    """What the simulation cost: virtual and wall seconds of the loop, events, events/s."""
    s = summary.get("simulated") or {}
    return {"virtual_s": rnd(s.get("virtual_seconds")), "sim_wall_s": rnd(s.get("wall_seconds"), 2),
            "events": s.get("events"), "events_per_s": s.get("events_per_second")}


def ps_figures(summary: dict) -> dict[str, Any]:
    """Part 1's figures of one run's summary.json: PS ingress ÷ model, iteration, the slot
    pools' collisions and fallbacks (None without [ina]), the simulation's cost."""
    ina = summary.get("ina")
    fallbacks = None
    if ina is not None:
        # segments the PS summed itself, and sub-groups an aggregator gave up on
        fallbacks = (ina.get("segments_fallback") or 0) + (ina.get("subgroup_fallbacks") or 0)
    return {"ps_in_over_model": rnd(summary.get("ps_bytes_in_per_version_over_model")),
            "iteration_s": rnd(summary.get("iteration_seconds"), 6),
            "versions": summary.get("versions"),
            "slot_collisions": None if ina is None else ina.get("slot_collisions"),
            "fallbacks": fallbacks,
            "aggregators": None if ina is None else sorted(ina.get("aggregators") or {}),
            **sim_cost(summary)}


def collective_figures(summary: dict) -> dict[str, Any]:
    """Part 2's figures: sync seconds a version, bytes per peer face ÷ analytic by level and
    the worst level's (farthest from 1)."""
    by_level = {k: round(v, 4) for k, v in (summary.get("bytes_over_analytic") or {}).items()
                if v is not None}
    worst = max(by_level.values(), key=lambda r: abs(r - 1), default=None)
    return {"sync_s": rnd(summary.get("sync_seconds"), 6),
            "iteration_s": rnd(summary.get("iteration_seconds"), 6),
            "bytes_over_analytic": by_level, "bytes_over_analytic_worst": worst,
            "parameters_identical": summary.get("parameters_identical"), **sim_cost(summary)}


def share_figures(summary: dict) -> dict[str, Any]:
    """Part 3's figures: each job's completion, the mean, violations, the `sharing` block."""
    share = summary.get("share") or {}
    jobs = {ps: {"completion_s": rnd(j.get("completion_seconds")),
                 "rounds": j.get("rounds"), "versions": j.get("versions")}
            for ps, j in (share.get("jobs") or {}).items()}
    sharing = summary.get("sharing") or {}
    return {"jobs": jobs, "mean_completion_s": rnd(share.get("mean_completion_seconds")),
            "violations": share.get("ina_overlap_violations"),
            "mismatches": share.get("decision_mismatches"),
            "jain_index": rnd(sharing.get("jain_index")),
            "overlap_s": sharing.get("overlap_seconds"),
            "aggregator_busy": rnd(share.get("aggregator_busy_fraction")), **sim_cost(summary)}


def efficiency(shared: Mapping[str, Mapping[str, Any]], alone: Mapping[str, float | None],
               template_of: Mapping[str, str]) -> float | None:
    """The jobs' mean of (completion alone ÷ completion shared): 1 when sharing costs none."""
    effs = [e for ps, j in shared.items()
            if (e := ratio(alone.get(template_of.get(ps, "")), j.get("completion_s")))
            is not None]
    return sum(effs) / len(effs) if effs else None


# ---- running ------------------------------------------------------------------------------------

def simulate(scenario: str, sets: list[str], out: Path, read: Any, timeout: float) -> dict:
    """One simulated run read by `read(summary)`, with the child's wall seconds; a failure is
    recorded (its error, and the simulation's cost if the summary says) and the bench goes
    on."""
    shutil.rmtree(out, ignore_errors=True)          # the runner refuses a used directory
    t0 = time.monotonic()
    try:
        run = run_scenario(scenario, [*SIM, *sets], out, timeout=timeout)
        return {**read(run.summary), "wall_s": rnd(run.wall, 1),
                **({"notes": run.notes} if run.notes else {})}
    except (RunError, OSError, ValueError, KeyError, TypeError) as e:
        failed: dict[str, Any] = {"error": str(e)[-1500:], "wall_s": rnd(time.monotonic() - t0, 1)}
        try:
            failed.update(sim_cost(json.loads((out / "summary.json").read_text())))
        except (OSError, ValueError):
            pass
        log(f"scale: {out.name} failed: {str(e).splitlines()[0] if str(e) else e!r}")
        return failed


def write_doc(doc: dict, path: Path) -> str:
    from ndnps.lab.tomltext import to_toml
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_toml(doc))
    return str(path)


def scenario_doc(name: str) -> dict:
    with open(ROOT / "scenarios" / f"{name}.toml", "rb") as f:
        return tomllib.load(f)


def model_sets(hidden: int, shards: int, batch: int = 32) -> list[str]:
    """A 64-feature, 10-class MLP on a synthetic dataset with a full batch for every one of
    `shards` workers (digits' 1,347 training samples give 128 workers none: the PS refuses)."""
    samples = max(2000, 2 * shards * batch)         # the test split takes 25 %
    return ['training.dataset="synthetic"', "training.n_features=64", "training.n_classes=10",
            f"training.n_samples={samples}", f"training.hidden=[{hidden}]",
            f"training.batch={batch}"]


def part_ps(sizes: list[tuple[int, int]], placements: list[str], args: Any,
            runs: Path) -> dict:
    """Part 1: per fat-tree k and N, each placement's figures."""
    with_ina, without = scenario_doc("ina-fat-tree"), scenario_doc("ina-fat-tree")
    without.pop("ina")
    files = {"ps": write_doc(without, runs / "fat-tree-ps.toml"),
             "ina": write_doc(with_ina, runs / "fat-tree-ina.toml")}
    out: dict[str, Any] = {}
    for k, n in sizes:
        point: dict[str, Any] = {"k": k, "workers": n}
        sets = [f"topology.k={k}", f"topology.workers={n}", f"links.rate_mbps={args.rate:g}",
                "sim.synthetic_gradients=true", *model_sets(128, n),
                f"training.max_versions={args.versions}", f"training.eval_every={args.versions}"]
        for p in placements:
            if p == "greedy" and k > GREEDY_MAX_K:
                point[p] = {"skipped": f"greedy at k = {k} solves ~950 LPs (~13 minutes); "
                                       "random and edge-only stand in"}
                continue
            if p != "ps" and n > MAX_MEMBERS:
                point[p] = {"skipped": f"one aggregation plan sums at most {MAX_MEMBERS} "
                                       "workers (the aggregators' contributor bitmap)"}
                continue
            ina = [] if p == "ps" else [f'ina.placement="{p}"', f"ina.k={args.ina_k}",
                                        f"ina.slots={args.slots}",
                                        f"ina.link_mbps={args.rate:g}"]
            log(f"scale part 1: k = {k}, N = {n}, {p}")
            f = point[p] = simulate(files["ps" if p == "ps" else "ina"], sets + ina,
                                    runs / f"ft{k}-n{n}-{p}", ps_figures, args.timeout)
            log(f"  ingress/model {f.get('ps_in_over_model')}, iteration {f.get('iteration_s')} s,"
                f" wall {f.get('wall_s')} s ({f.get('events_per_s')} events/s)")
        out[f"k{k}-n{n}"] = point
        emit({"bench": "scale", "part": 1, "k": k, "N": n,
              **{p: {key: (point.get(p) or {}).get(key) for key in
                     ("ps_in_over_model", "iteration_s", "slot_collisions", "fallbacks",
                      "wall_s", "events_per_s", "error", "skipped")
                     if (point.get(p) or {}).get(key) is not None}
                 for p in placements}})
    return out


def part_collectives(ns: list[int], args: Any, runs: Path) -> dict:
    """Part 2: ring and BCube's method on BCube(n, 2), per n."""
    out: dict[str, Any] = {}
    for n in ns:
        peers = n * n
        point: dict[str, Any] = {"n": n, "peers": peers}
        sets = [f"topology.n={n}", "topology.k=2", f"topology.workers={peers}",
                f"links.rate_mbps={args.rate:g}", "links.app_faces=false",
                *model_sets(512, peers), f"training.max_versions={args.versions}",
                f"training.eval_every={args.versions}", "training.worker_timeout=60"]
        for system in ("ring", "bcube"):
            log(f"scale part 2: BCube({n}, 2), {system}")
            f = point[system] = simulate("bcube", [*sets, f'training.collective="{system}"'],
                                         runs / f"bcube{n}-{system}", collective_figures,
                                         args.timeout)
            log(f"  sync {f.get('sync_s')} s, bytes/analytic {f.get('bytes_over_analytic')}, "
                f"wall {f.get('wall_s')} s")
        point["bcube_over_ring"] = rnd(ratio(point["bcube"].get("sync_s"),
                                             point["ring"].get("sync_s")))
        out[f"n{n}"] = point
        emit({"bench": "scale", "part": 2, "peers": peers,
              **{f"{s}_{key}": point[s].get(key) for s in ("ring", "bcube")
                 for key in ("sync_s", "bytes_over_analytic_worst", "wall_s", "error")
                 if point[s].get(key) is not None},
              "bcube_over_ring": point["bcube_over_ring"]})
    return out


def jobs_doc(j: int) -> tuple[dict, dict[str, str]]:
    """multi-job.toml with J jobs, job i its job i mod 3 renamed (and its key), started
    i × JOB_START_GAP s in; each job's template by its PS's name."""
    doc = scenario_doc("multi-job")
    base = doc["jobs"]
    jobs, template_of = [], {}
    for i in range(j):
        t = dict(base[i % len(base)])
        name = f"{t['ps']}{i // len(base) + 1}"
        template_of[name] = t["ps"]
        t.update(ps=name, key=f"{t['key']}-{i}", start=i * JOB_START_GAP)
        jobs.append(t)
    doc["jobs"] = jobs
    return doc, template_of


def part_sharing(js: list[int], args: Any, runs: Path) -> dict:
    """Part 3: each template alone once, then J jobs together, per J."""
    sets = [f"training.max_versions={args.job_versions}",
            f"training.eval_every={args.job_versions}"]
    alone: dict[str, float | None] = {}
    base = scenario_doc("multi-job")
    for t in base["jobs"]:
        doc = dict(base)
        doc["jobs"] = [{k: v for k, v in t.items() if k != "start"}]
        log(f"scale part 3: {t['ps']} alone")
        f = simulate(write_doc(doc, runs / f"alone-{t['ps']}.toml"), sets,
                     runs / f"alone-{t['ps']}", share_figures, args.timeout)
        alone[t["ps"]] = (f.get("jobs", {}).get(t["ps"]) or {}).get("completion_s")
    out: dict[str, Any] = {"alone_completion_s": alone}
    for j in js:
        doc, template_of = jobs_doc(j)
        log(f"scale part 3: {j} jobs")
        f = simulate(write_doc(doc, runs / f"jobs{j}.toml"), sets, runs / f"jobs{j}",
                     share_figures, args.timeout)
        if "jobs" in f:
            f["efficiency"] = rnd(efficiency(f["jobs"], alone, template_of))
        out[f"J{j}"] = {"jobs_count": j, **f}
        log(f"  mean completion {f.get('mean_completion_s')} s, efficiency "
            f"{f.get('efficiency')}, violations {f.get('violations')}, wall {f.get('wall_s')} s")
        emit({"bench": "scale", "part": 3, "J": j,
              **{k: f.get(k) for k in ("mean_completion_s", "efficiency", "violations",
                                       "mismatches", "jain_index", "wall_s", "error")
                 if f.get(k) is not None}})
    return out


# ---- plots --------------------------------------------------------------------------------------

def plot(results: dict, where: Path) -> dict[str, str]:
    """A PNG per part run, next to scale.json: its path by part."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    paths: dict[str, str] = {}

    def series(points: dict, x: str, system: str, key: str) -> tuple[list, list]:
        xy = sorted((p[x], p[system][key]) for p in points.values()
                    if isinstance(p.get(system), dict) and p[system].get(key) is not None)
        return [a for a, _ in xy], [b for _, b in xy]

    if results.get("ps"):
        pts = results["ps"]
        fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
        for p in PLACEMENTS:
            for ax, key, label in zip(axes, ("ps_in_over_model", "iteration_s", "wall_s"),
                                      ("PS ingress per version ÷ model", "iteration (s)",
                                       "simulation wall time (s)")):
                xs, ys = series(pts, "workers", p, key)
                if xs:
                    ax.plot(xs, ys, "o-", label=p)
                ax.set(xlabel="workers", ylabel=label, xscale="log", yscale="log")
        axes[0].legend()
        fig.suptitle("fat-tree PS, with and without in-network aggregation (sim)")
        fig.tight_layout()
        paths["ps"] = str(where / "scale-ps.png")
        fig.savefig(paths["ps"], dpi=110)
        plt.close(fig)
    if results.get("collectives"):
        pts = results["collectives"]
        fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
        for s in ("ring", "bcube"):
            for ax, key, label in zip(axes, ("sync_s", "bytes_over_analytic_worst"),
                                      ("sync per version (s)",
                                       "bytes per peer face ÷ analytic (worst level)")):
                xs, ys = series(pts, "peers", s, key)
                if xs:
                    ax.plot(xs, ys, "o-", label=s)
                ax.set(xlabel="peers (BCube(n, 2))", ylabel=label)
        axes[0].legend()
        fig.tight_layout()
        paths["collectives"] = str(where / "scale-collectives.png")
        fig.savefig(paths["collectives"], dpi=110)
        plt.close(fig)
    shared = {k: v for k, v in (results.get("sharing") or {}).items() if k.startswith("J")}
    if shared:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
        for p in sorted(shared.values(), key=lambda p: p["jobs_count"]):
            times = [j["completion_s"] for j in (p.get("jobs") or {}).values()
                     if j.get("completion_s") is not None]
            axes[0].scatter([p["jobs_count"]] * len(times), times, color="C0", s=14)
        xs = sorted(p["jobs_count"] for p in shared.values() if p.get("efficiency") is not None)
        axes[1].plot(xs, [next(p["efficiency"] for p in shared.values() if p["jobs_count"] == x)
                          for x in xs], "o-")
        axes[0].set(xlabel="jobs", ylabel="each job's completion (s)")
        axes[1].set(xlabel="jobs", ylabel="efficiency (alone ÷ shared, mean)")
        fig.tight_layout()
        paths["sharing"] = str(where / "scale-sharing.png")
        fig.savefig(paths["sharing"], dpi=110)
        plt.close(fig)
    return paths


# ---- the bench ----------------------------------------------------------------------------------

def rows(sec: dict) -> list[tuple[str, str, str, str]]:
    out = []
    for key, p in (sec.get("ps") or {}).items():
        figs = ", ".join(f"{v} {fmt((p.get(v) or {}).get('ps_in_over_model'), '.2f')}/"
                         f"{fmt((p.get(v) or {}).get('iteration_s'), '.4f')}"
                         for v in PLACEMENTS if isinstance(p.get(v), dict) and "error" not in p[v]
                         and "skipped" not in p[v])
        failed = [v for v in PLACEMENTS if "error" in (p.get(v) or {})]
        out.append((f"fat-tree {key}: PS in ÷ model / iteration s", figs, "report",
                    f"failed: {', '.join(failed)}" if failed else "-"))
    for key, p in (sec.get("collectives") or {}).items():
        out.append((f"BCube({p['n']}, 2) {p['peers']} peers: sync s ring, bcube",
                    f"{fmt(p['ring'].get('sync_s'), '.4f')}, {fmt(p['bcube'].get('sync_s'), '.4f')}"
                    f" (bytes ÷ analytic {p['ring'].get('bytes_over_analytic_worst')}, "
                    f"{p['bcube'].get('bytes_over_analytic_worst')})", "report", "-"))
    for key, p in (sec.get("sharing") or {}).items():
        if key.startswith("J"):
            out.append((f"{p['jobs_count']} jobs sharing: efficiency, violations",
                        f"{fmt(p.get('efficiency'))}, {p.get('violations')}", "violations 0",
                        "met" if p.get("violations") == 0 and p.get("mismatches") == 0
                        else "missed"))
    return out


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main(argv: list[str] | None = None) -> int:
    p = bench_parser("python -m bench scale", __doc__,
                     "the smallest size of each part (k = 8, N = 16; BCube(3, 2); 2 jobs)")
    p.add_argument("--parts", default="1,2,3")
    p.add_argument("--k8", default="16,64,128", help="workers on fat-tree k = 8 (up to 128)")
    p.add_argument("--k16", default="256,1024", help="workers on fat-tree k = 16 (up to 1024)")
    p.add_argument("--placements", default=",".join(PLACEMENTS),
                   help="ps (no aggregation), greedy (k = 8 only), random, edge-only")
    p.add_argument("--ina-k", type=int, default=3, help="aggregators besides the PS's edge")
    p.add_argument("--slots", type=int, default=1024, help="each aggregator's slot pool")
    p.add_argument("--bcube-n", default="3,4,5,6,7,8", help="BCube(n, 2): n² peers")
    p.add_argument("--jobs", default="2,4,8", help="jobs sharing the aggregator")
    p.add_argument("--rate", type=float, default=1000.0, help="every link, Mbit/s")
    p.add_argument("--versions", type=int, default=5, help="versions a run (parts 1, 2)")
    p.add_argument("--job-versions", type=int, default=20,
                   help="versions each job makes (part 3: the jobs' rounds must overlap)")
    p.add_argument("--timeout", type=float, default=1800.0, help="wall s a simulation may take")
    args = p.parse_args(argv)
    parts = set(ints(args.parts))
    placements = [x for x in args.placements.split(",") if x]
    for x in placements:
        if x not in PLACEMENTS:
            p.error(f"--placements: unknown {x!r} (known: {', '.join(PLACEMENTS)})")
    sizes = [(8, n) for n in ints(args.k8)] + [(16, n) for n in ints(args.k16)]
    ns, js = ints(args.bcube_n), ints(args.jobs)
    if args.quick:
        sizes, ns, js = sizes[:1], ns[:1], js[:1]
    keep = Path(args.keep or tempfile.mkdtemp(prefix="bench-scale-"))
    runs = keep / "runs"
    results: dict[str, Any] = {"stamp": stamp(), "rate_mbps": args.rate,
                               "versions": args.versions, "job_versions": args.job_versions,
                               "ina_k": args.ina_k,
                               "slots": args.slots}
    t0 = time.monotonic()
    try:
        if 1 in parts:
            results["ps"] = part_ps(sizes, placements, args, runs)
        if 2 in parts:
            results["collectives"] = part_collectives(ns, args, runs)
        if 3 in parts:
            results["sharing"] = part_sharing(js, args, runs)
    finally:
        results["wall_s"] = rnd(time.monotonic() - t0, 1)
        try:
            results["plots"] = plot(results, keep)
        except Exception as e:                      # noqa: BLE001 - figures are kept anyway
            log(f"scale: plots failed: {e!r}")
        (keep / "scale.json").write_text(json.dumps(results, indent=2) + "\n")
        if not args.keep:
            shutil.rmtree(runs, ignore_errors=True)
        log(f"scale: figures and plots in {keep}")
    if not args.no_save:
        save("scale", None, results)
    emit({"bench": "scale", "keep": str(keep), "plots": results.get("plots"),
          "wall_s": results["wall_s"]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
