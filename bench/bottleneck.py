"""Training over a real bottleneck (docs/congestion.md): the `bottleneck` scenario — the PS and its
forwarder in one network namespace, the workers and theirs in another, one veth between them
limited by the kernel's tbf qdisc both ways — at N workers and R Mbit/s, alternating ndnps
with the persistent push, ndnps with unicast copies, and the plain TCP PS over the same wire.

    python -m bench.bottleneck [--workers 4,8,16] [--rates 100,1000] [--versions 15]
                               [--systems persistent,unicast,tcp] [--rounds 1] [--mtu 1500]
                               [--quick]
                               [--jobs K] [--keep DIR] [--no-save]

Needs root (network namespaces). Each run trains the 1M-parameter MLP (M = 3.95 MB) for
`--versions` versions; the iteration is the median seconds between versions at the PS after
the warm-up. Figures per (rate, N), side by side from one run of this script:
- `over_wire`: each system's iteration ÷ its own wire limit — ndnps persistent (N+1)·M/R (one
  multicast push, N gradients), unicast and TCP 2N·M/R (N copies, N gradients);
- `persistent_over_tcp`: ndnps persistent ÷ TCP PS (the wire allows (N+1)/2N: 0.53 at N = 16);
- `qdisc_drops`: the kernel queue's drops ÷ packets it sent, both directions;
- `repair`: segments the PS sent again for probes and recoveries ÷ segments it pushed (every
  repaired segment crossed the bottleneck a second time; the workers' forwarder answers the
  rest from its cache);
- accuracy: every run's final accuracy against the TCP PS's at the same versions (the same
  sync SGD, same shards and batches: equal up to float32 summation order), and workers dropped;
- `cpu_ms`: CPU milliseconds per iteration by role, each host's forwarder apart (where the
  time goes at 1 Gbit/s);
- `--mtu 9000`: the link's MTU (`links.mtu`; jumbo frames carry every segment unfragmented).
Targets at 100 Mbit/s: persistent over_wire <= 1.10, qdisc drops <= 1 %, repair <= 2 %,
persistent_over_tcp <= 0.58 at N = 16; at 1 Gbit/s persistent_over_tcp <= 1.2 at N = 16; every
run completes with no worker dropped.

`--jobs K` (K >= 2) measures sharing instead: K jobs at once (each its own PS and N workers,
`[[jobs]]`), every PS on the PS host and every worker on the workers host, so all of them
cross the one link. Per system: each job's rate over the time all K were in their steady
versions — in the bytes its versions must move (ndnps (N+1)·M, TCP 2N·M per version) — over
an equal share (target: within 20 %, 0.8-1.2), Jain's index over those rates, the link's
use (their sum ÷ R), qdisc drops, accuracies. (summary.json's `sharing`, ndnps.lab.report.)
"""
from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable

from .common import bench_parser, emit, fmt, log, median, rnd, save, stamp
from .scenario_runs import CpuSampler, RunError, ScenarioRun, cpu_per_iteration, run_scenario

SCENARIO = "bottleneck"
SYSTEMS = {
    "persistent": [],
    "unicast": ['training.push_mode="unicast"'],
    "tcp": ['run.system="tcp"'],
    # persistent push, and the gradients summed on the workers' side of the link (in-network aggregation)
    "ina": ["ina.k=1"],
}
TARGETS = {"over_wire": 1.10, "qdisc_drops": 0.01, "repair": 0.02, "persistent_over_tcp": 0.58,
           "persistent_over_tcp_1g": 1.2, "accuracy_gap": 0.02, "off_equal_share": 0.2}


class HostCpuSampler(CpuSampler):
    """CpuSampler with each host's forwarder apart ("forwarder@ps-host",
    "forwarder@workers-host": its configuration file is named after it), so the aggregating
    forwarder's CPU is its own."""

    @staticmethod
    def role(cmdline: str) -> str | None:
        role = CpuSampler.role(cmdline)
        if role == "forwarder":
            for host in (PS_HOST, WORKERS_HOST):
                if f"/config/{host}.toml" in cmdline:
                    return f"forwarder@{host}"
        return role


PS_HOST, WORKERS_HOST = "ps-host", "workers-host"


def run_one(system: str, n: int, rate: float, versions: int, out: Path,
            mtu: int = 1500) -> dict:
    sets = [f"topology.workers={n}", f"bottleneck.rate_mbps={rate}",
            f"training.max_versions={versions}", f"training.eval_every={versions}",
            *([f"links.mtu={mtu}"] if mtu != 1500 else []), *SYSTEMS[system]]
    with HostCpuSampler(str(out)) as sampler:
        run = run_scenario(SCENARIO, sets, out, timeout=1800)
    return figures(run, system, sampler)


def figures(run: ScenarioRun, system: str, sampler: CpuSampler) -> dict:
    s = run.summary
    b = s.get("bottleneck") or {}
    iteration = run.iteration_median()
    limits = b.get("wire_limit_seconds") or {}
    limit = limits.get("ndnps" if system == "persistent" else "tcp")
    if system == "ina" and s.get("model_bytes") and b.get("rate_mbps"):
        # one push and one sum cross the link: 2·M/R
        limit = 2 * s["model_bytes"] * 8 / (b["rate_mbps"] * 1e6)
    ina = s.get("ina") or {}
    cpu = cpu_per_iteration(run, sampler)
    ps_end = s.get("ps_end") or {}
    pushed = int(ps_end.get("segments_pushed", 0) or 0)
    repaired = int(ps_end.get("probes_answered", 0) or 0)
    return {
        "iteration_s": rnd(iteration), "wire_limit_s": rnd(limit),
        "over_wire": rnd(iteration / limit) if iteration and limit else None,
        "accuracy": s.get("final_accuracy"), "versions": s.get("versions"),
        "workers_dropped": ps_end.get("workers_dropped"),
        "qdisc_drops": rnd(b.get("qdisc_drops_over_sent"), 5),
        "qdisc_drop_packets": b.get("qdisc_drops"), "qdisc_sent_packets": b.get("qdisc_sent_packets"),
        "repair": rnd(repaired / pushed, 5) if pushed else None,
        "segments_pushed": pushed, "segments_repaired": repaired,
        "push_rate_mbps": rnd(run.ps_median("push_rate_mbps"), 1),
        "cpu_ms": cpu,
        "segments_aggregated": ina.get("segments_aggregated"),
        "segments_fallback": ina.get("segments_fallback"),
        "ps_in_over_model": rnd(s.get("ps_bytes_in_per_version_over_model")),
        "mtu": b.get("mtu"),
        "wall_s": rnd(run.wall, 1), "notes": run.notes,
        **(summed_where(s, cpu) if system == "ina" else {}),
    }


def summed_where(s: dict, cpu: dict | None) -> dict:
    """An `ina` run: where its gradients were summed (the plan's root, and whether every worker
    was summed on the workers' side of the link), and what the workers host's forwarder summed
    per second of its CPU — gradient bits in (N gradients a version) over its CPU seconds a
    version, the push it fans out to the workers included: what one aggregating forwarder of
    ours sums on this machine (at most: the fan-out costs it too)."""
    ina = s.get("ina") or {}
    workers = s.get("workers") or 0
    ours = (ina.get("aggregators") or {}).get(WORKERS_HOST) or []
    out = {"ina_root": ina.get("root"), "ina_idle": ina.get("idle") or {},
           "summed_on_workers_side": bool(workers) and len(ours) == workers,
           "workers_host_answered": ((ina.get("forwarders") or {}).get(WORKERS_HOST) or {})
           .get("answered")}
    fwd_ms = (cpu or {}).get(f"forwarder@{WORKERS_HOST}")
    if fwd_ms and s.get("model_bytes") and workers:
        out["aggregator_mbps"] = rnd(workers * s["model_bytes"] * 8 / 1e6 / (fwd_ms / 1000), 1)
    return out


def run_shared(system: str, jobs: int, n: int, rate: float, versions: int, out: Path) -> dict:
    """K jobs of N workers each over the one link at once."""
    sets = [f"jobs=[{', '.join([f'{{workers={n}}}'] * jobs)}]", f"bottleneck.rate_mbps={rate}",
            f"training.max_versions={versions}", f"training.eval_every={versions}",
            *SYSTEMS[system]]
    s = run_scenario(SCENARIO, sets, out, timeout=1800).summary
    sharing, b = s.get("sharing") or {}, s.get("bottleneck") or {}
    per_job = sharing.get("jobs") or {}
    total = sum(j["wire_mbps"] for j in per_job.values())
    share_range = sharing.get("share_range")
    fair = share_range is not None and all(abs(x - 1) <= TARGETS["off_equal_share"]
                                           for x in share_range)
    return {
        "jain_index": rnd(sharing.get("jain_index"), 4),
        "over_equal_share": {ps: rnd(j["over_equal_share"]) for ps, j in per_job.items()},
        "share_range": [rnd(x) for x in share_range] if share_range else None,
        "wire_mbps": {ps: rnd(j["wire_mbps"], 1) for ps, j in per_job.items()},
        "link_use": rnd(total / rate) if per_job else None,
        "overlap_s": sharing.get("overlap_seconds"),
        "iteration_s": {j["ps"]: rnd(j["iteration_seconds"]) for j in s.get("jobs", [])},
        "accuracy": {j["ps"]: j["final_accuracy"] for j in s.get("jobs", [])},
        "workers_dropped": sum(j.get("workers_lost", 0) for j in s.get("jobs", [])),
        "qdisc_drops": rnd(b.get("qdisc_drops_over_sent"), 5),
        "misses": [] if fair else [f"{system}: shares {share_range} of an equal share"],
    }


def alternate(systems: list[str], rounds: int, label: str,
              run: Callable[[str, int], dict], summary: Callable[[dict], str]) -> dict[str, list[dict]]:
    """One point's runs: every system once per round, alternated (the host's noise falls on
    all alike); a failed run is kept as {"failed": first line of the error}."""
    points: dict[str, list[dict]] = {s: [] for s in systems}
    for rnd_i in range(rounds):
        for system in systems:
            log(f"bottleneck {label} {system} round {rnd_i + 1}")
            try:
                f = run(system, rnd_i)
            except RunError as e:
                log(str(e))
                f = {"failed": str(e).splitlines()[0]}
            points[system].append(f)
            log(f"  {system}: {summary(f)}")
    return points


def main_shared(jobs: int, rates: list[float], workers: list[int], systems: list[str],
                rounds: int, versions: int, keep: Path) -> dict:
    """--jobs K: the sharing point(s)."""
    results: dict = {"stamp": stamp(), "versions": versions, "jobs": jobs, "shared": {}}
    for rate in rates:
        for n in workers:
            key = f"{rate:g}M-{jobs}x{n}"
            point = alternate(
                systems, rounds, f"shared {key}",
                lambda system, i: run_shared(system, jobs, n, rate, versions,
                                             keep / f"shared-{key}-{system}-{i}"),
                lambda f: f"Jain {f.get('jain_index')}, shares {f.get('over_equal_share')}, "
                          f"link use {f.get('link_use')}, drops {f.get('qdisc_drops')}")
            for system, runs in point.items():
                for f in runs:
                    if "failed" in f:
                        f["misses"] = [f"{system}: failed"]
            results["shared"][key] = point
            emit({"bench": "bottleneck", "shared": key,
                  **{s: {k: r[-1].get(k) for k in ("jain_index", "share_range",
                                                    "link_use", "misses")}
                     for s, r in point.items()}})
    return results


def compare(points: dict[str, list[dict]]) -> dict:
    """One (rate, N): each system's medians over its rounds, and the ratios."""
    out: dict = {}
    for system, runs in points.items():
        out[system] = {k: median(r.get(k) for r in runs) if k in (
            "iteration_s", "over_wire", "qdisc_drops", "repair", "accuracy", "push_rate_mbps",
            "aggregator_mbps")
            else runs[-1].get(k) for k in runs[-1]}
        out[system]["rounds"] = len(runs)
    p, t = out.get("persistent", {}), out.get("tcp", {})
    if p.get("iteration_s") and t.get("iteration_s"):
        out["persistent_over_tcp"] = rnd(p["iteration_s"] / t["iteration_s"])
    if t.get("accuracy") is not None:
        out["accuracy_gap"] = rnd(max(abs((r.get("accuracy") or 0) - t["accuracy"])
                                      for r in out.values() if isinstance(r, dict)
                                      and "accuracy" in r))
    return out


def verdicts(rate: float, n: int, c: dict) -> list[str]:
    """The targets this (rate, N) misses (100 Mbit/s; at 1 Gbit/s the ratio to TCP at N = 16)."""
    misses = []
    for system, f in c.items():
        if not isinstance(f, dict):
            continue
        if f.get("workers_dropped"):
            misses.append(f"{system}: {f['workers_dropped']} workers dropped")
        if system == "ina" and "summed_on_workers_side" in f and not f["summed_on_workers_side"]:
            misses.append(f"ina: summed at {f.get('ina_root')}, not on the workers' side "
                          f"(idle: {f.get('ina_idle')})")
    if rate != 100:
        ratio = c.get("persistent_over_tcp")
        if n == 16 and ratio is not None and ratio > TARGETS["persistent_over_tcp_1g"]:
            misses.append(f"persistent/tcp {ratio} > {TARGETS['persistent_over_tcp_1g']}")
        return misses
    p = c.get("persistent", {})
    for key in ("over_wire", "qdisc_drops", "repair"):
        if p.get(key) is not None and p[key] > TARGETS[key]:
            misses.append(f"persistent {key} {p[key]} > {TARGETS[key]}")
    if n == 16 and (c.get("persistent_over_tcp") or 0) > TARGETS["persistent_over_tcp"]:
        misses.append(f"persistent/tcp {c['persistent_over_tcp']} > "
                      f"{TARGETS['persistent_over_tcp']}")
    if (c.get("accuracy_gap") or 0) > TARGETS["accuracy_gap"]:
        misses.append(f"accuracy gap {c['accuracy_gap']}")
    return misses


def point_key(rate: float, n: int, mtu: int = 1500) -> str:
    """A point's key in results.json: "1000M-N16", "1000M-N16-mtu9000"."""
    return f"{rate:g}M-N{n}" + (f"-mtu{mtu}" if mtu != 1500 else "")


def rows(sec: dict) -> list[tuple[str, str, str, str]]:
    """bench --table: one row per (rate, N) measured."""
    out = []
    for key, c in sorted((sec.get("points") or {}).items()):
        p = c.get("persistent", {})
        out.append((f"{key} persistent/wire, /tcp",
                    f"{fmt(p.get('over_wire'), '.2f')}, {fmt(c.get('persistent_over_tcp'), '.2f')}",
                    "<= 1.10, <= 0.58 (N=16)" if key.startswith("100M") else
                    "<= 1.2 × TCP (N=16)" if key.endswith("N16") else "report",
                    "; ".join(c.get("misses", [])) or "met"))
    return out


def main(argv: list[str] | None = None) -> int:
    p = bench_parser("bench.bottleneck", __doc__, "N = 4, 8 at 100 Mbit/s, 8 versions", rounds=1)
    p.add_argument("--workers", default="4,8,16")
    p.add_argument("--rates", default="100,1000")
    p.add_argument("--versions", type=int, default=15)
    p.add_argument("--systems", default="persistent,unicast,tcp")
    p.add_argument("--jobs", type=int, default=1,
                   help="K >= 2: K jobs at once over the link (sharing), instead")
    p.add_argument("--mtu", type=int, default=1500, help="the link's MTU (links.mtu)")
    args = p.parse_args(argv)
    workers = [int(x) for x in args.workers.split(",")]
    rates = [float(x) for x in args.rates.split(",")]
    systems = args.systems.split(",")
    if args.quick:
        workers, rates, args.versions = [4, 8], [100.0], 8
    bad = [s for s in systems if s not in SYSTEMS]
    if bad:
        p.error(f"--systems: unknown {', '.join(bad)} (known: {', '.join(SYSTEMS)})")
    keep = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-bottleneck-"))
    if args.jobs > 1:
        try:
            shared = main_shared(args.jobs, rates, workers, systems, args.rounds,
                                 args.versions, keep)
        finally:
            if not args.keep:
                shutil.rmtree(keep, ignore_errors=True)
        if not args.no_save:
            save("bottleneck_shared", None, shared)
        return 0
    results: dict = {"stamp": stamp(), "versions": args.versions, "points": {}}
    try:
        for rate in rates:
            for n in workers:
                key = point_key(rate, n, args.mtu)
                points = alternate(
                    systems, args.rounds, key,
                    lambda system, i: run_one(system, n, rate, args.versions,
                                              keep / f"{key}-{system}-{i}", args.mtu),
                    lambda f: f"iteration {f.get('iteration_s')} s, over wire "
                              f"{f.get('over_wire')}, drops {f.get('qdisc_drops')}, repair "
                              f"{f.get('repair')}, accuracy {f.get('accuracy')}")
                c = compare(points)
                c["misses"] = verdicts(rate, n, c)
                results["points"][key] = c
                emit({"bench": "bottleneck", "point": key,
                      **{k: v for k, v in c.items() if not isinstance(v, dict)}})
    finally:
        if not args.keep:
            shutil.rmtree(keep, ignore_errors=True)
    if not args.no_save:
        save("bottleneck", None, results)
    emit({"bench": "bottleneck", "points": {k: {"persistent_over_wire": c.get("persistent", {})
                                                .get("over_wire"),
                                                "persistent_over_tcp": c.get("persistent_over_tcp"),
                                                "misses": c["misses"]}
                                            for k, c in results["points"].items()}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
