"""Several jobs sharing one aggregating forwarder in a scenario (docs/sharing.md): the `[share]`
table (ndnps.protocol.sharing: the controller reads the same), what it does to each job, the
controller's process, and the run's invariants.

    [share]
    policy = "time-division"   # a share controller decides each round (docs/sharing.md);
                               # "always-wait": a FIFO lock (a round waits for the aggregators);
                               # "spatial": each job 1/J of the slots, no controller (ATP-style);
                               # "never": no in-network aggregation (PS sums; peers: ring)
    score = "time-saved"       # time-division's CalcScore: | "shortest-round"
    at = "root"                # the aggregating forwarder (default: a star's fwd, a tree's root)
    slots = 64                 # its pool: made to fit one job's round
    slot_timeout = 2.0         # s a slot waits for its contributors
    agree_timeout = 1.0        # the controller: s for all of a job's nodes to ask a round
                               # (`timeout`, the controller's older name for it, is read too)
    backoff = 0.05             # ... s after an abort, doubling
    tries = 4                  # ... aborts of a round before it goes the ordinary way
    hold_limit = 30.0          # ... a holder that never says done is released after this
    name = "ctl"               # the controller's node name

Every job of the scenario (a PS's, or peers' with collective = "ina") aggregates at `at`; the
runner configures it there for each job — the same slots for all (time-division, always-wait:
`first = 0`), or disjoint ranges (spatial) — and starts the controller (`python -m
ndnps.apps.controller`, node `name`, beside `at`) for the policies that have one. [[jobs]] may
say `start = <s>`: that job's apps wait so long after the run's start.
"""
from __future__ import annotations

import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ndnps.protocol.config import ConfigError
from ndnps.protocol.sharing import ShareConfig, read_share

from .feature import Command, Feature, Helper, Launcher
from .figures import TIME_AXIS, legend, save
from .ina import configure
from .metrics import read_metrics
from .series import ps_series
from .tomltext import to_toml
from .values import ScenarioError

if TYPE_CHECKING:
    from ndnps.protocol.config import TrainingSpec

    from .config import Scenario
    from .nodes import Plan

def default_at(sc: "Scenario") -> str:
    return "fwd" if sc.topology == "star" else "root"


def parse(table: Any, sc: "Scenario") -> ShareConfig:
    """[share], checked against the scenario's topology (errors name the key); the jobs are
    checked and changed by `apply`."""
    try:
        s = read_share(table)
    except ConfigError as e:
        raise ScenarioError(str(e)) from None
    if sc.topology not in ("star", "tree") or sc.netns:
        raise ScenarioError("share: on a local star or tree (not built for --netns, fabrics or "
                            "the bottleneck)")
    if "at" not in table:
        s = replace(s, at=default_at(sc))
    routers = ["fwd"] if sc.topology == "star" else ["root", *(f"leaf{i + 1}"
                                                               for i in range(sc.leaves))]
    if s.at not in routers:
        raise ScenarioError(f"share.at: {s.at!r} is not one of the forwarders "
                            f"({', '.join(routers)})")
    if sc.topology == "tree" and s.at != "root":
        raise ScenarioError("share.at: on a tree, the root (every job's traffic meets there)")
    if s.policy == "spatial" and s.slots < len(sc.all_jobs):
        raise ScenarioError(f"share.slots: {s.slots} cannot be split among "
                            f"{len(sc.all_jobs)} jobs")
    return s


def defaults(table: Any, sc: "Scenario") -> dict[str, Any]:
    """What [share] gives every job's table before it is read (an "ina" job needs its
    aggregator named to be valid at all)."""
    at = table.get("at", default_at(sc)) if isinstance(table, dict) else default_at(sc)
    return {"aggregate_at": at}


def apply(s: ShareConfig, sc: "Scenario") -> None:
    """Each job as the policy runs it."""
    for i, job in enumerate(list(sc.all_jobs)):
        where = f"jobs[{i}]" if sc.jobs else "training"
        collective = job.peers.collective
        if collective not in ("", "ina") and not (s.policy == "never"
                                                  and collective == "ring"):
            raise ScenarioError(f"{where}.collective: {collective!r} uses no aggregator "
                                "([share] is for a PS's job or collective = \"ina\")")
        if job.update.mode != "sync" or not job.who.key:
            raise ScenarioError(f"{where}: sharing aggregators needs mode = \"sync\" and a key")
        changes: dict[str, Any]
        if s.policy == "never":
            changes = {"aggregate_at": "", "aggregate_via": []}
            if job.peers.collective == "ina":
                changes["collective"] = "ring"
        else:
            changes = {"aggregate_at": s.at, "aggregate_via": [],
                       "share_controller": s.name if s.controlled else ""}
        try:
            sc.replace_job(job, job.with_values(**changes))
        except ConfigError as e:
            raise ScenarioError(str(e.renamed("training.", f"{where}."))) from None


def ranges(s: ShareConfig, jobs: list["TrainingSpec"]) -> dict[str, tuple[int, int]]:
    """Each job's (first, slots) at the aggregator."""
    if s.policy != "spatial":
        return {job.who.ps: (0, s.slots) for job in jobs}
    each = s.slots // len(jobs)
    return {job.who.ps: (i * each, each) for i, job in enumerate(jobs)}


def controller_config(s: ShareConfig, jobs: list["TrainingSpec"]) -> dict[str, Any]:
    """ndnps.apps.controller's configuration (written as TOML by the runner): the same [share]."""
    return {"share": s.as_table(), "jobs": [job.as_table() for job in jobs]}


def routes(s: ShareConfig, sc: "Scenario", forwarders: dict[str, Any]) -> None:
    """A tree's leaves reach the controller (beside the root) through the root."""
    if s.controlled and sc.topology == "tree":
        for name, node in forwarders.items():
            if name != s.at:
                node.routes.append((f"/{s.name}", s.at))


# ---- the run's figures and invariants ----------------------------------------------------------

def _p99(xs: list[float]) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.99 * (len(xs) - 1))))]


def _records(run_dir: Path, app: str) -> list[dict]:
    path = run_dir / "metrics" / f"{app}.jsonl"
    return read_metrics(path) if path.exists() else []


def share_summary(s: ShareConfig, sc: "Scenario", run_dir: Path,
                  wall_seconds: float) -> dict[str, Any]:
    """summary.json's `share`: per job its rounds by decision (an "unreachable" one: the
    controller did not answer), its nodes' asks answered RETRY, round waits, completion time;
    `decision_mismatches` (nodes of one job that chose differently for a round: must be 0),
    `ina_overlap_violations` (a job's slot claimed while another job's was live in the same
    slots, from the aggregator's own records: must be 0 under time-division), the aggregator's
    busy fraction and the controller's aborts."""
    jobs: dict[str, Any] = {}
    mismatches: list[dict] = []
    for job in sc.all_jobs:
        nodes = job.nodes
        chosen: dict[int, dict[str, str]] = {}
        waits: list[float] = []
        retries = 0
        for node in nodes:
            for r in _records(run_dir, node):
                if "share_round" in r:
                    chosen.setdefault(int(r["share_round"]), {})[node] = r["share"]
                    retries += int(r.get("share_retries", 0))
                    if node == nodes[0]:
                        waits.append(float(r.get("share_wait", 0.0)))
        for rnd, by_node in sorted(chosen.items()):
            uses = {n: v == "aggregate" for n, v in by_node.items()}
            if len(set(uses.values())) > 1:
                mismatches.append({"job": job.who.ps, "round": rnd, "nodes": by_node})
        recs = _records(run_dir, job.recorder)
        versions = [r for r in recs if "version" in r and "event" not in r]
        start = next((r for r in recs if r.get("event") == "start"), None)
        counts: dict[str, int] = {}
        for by_node in chosen.values():
            v = by_node.get(nodes[0])
            if v is not None:
                counts[v] = counts.get(v, 0) + 1
        jobs[job.who.ps] = {
            "rounds": counts, "rounds_asked": len(chosen), "ask_retries": retries,
            "round_wait_mean": statistics.mean(waits) if waits else None,
            "round_wait_p99": _p99(waits),
            "started_at": start.get("t") if start else None,
            "completion_seconds": (versions[-1]["t"] - start["t"]) if versions and start
            else None,
            "final_accuracy": versions[-1].get("accuracy") if versions else None,
            "versions": versions[-1]["version"] if versions else 0}
    out: dict[str, Any] = {**s.as_table(), "jobs": jobs, "decision_mismatches": len(mismatches),
                           "mismatched_rounds": mismatches[:20]}
    if s.policy != "never":
        try:
            status = json.loads((run_dir / "traces" / f"{s.at}-status.json").read_text())
            agg = status.get("aggregation") or {}
        except (OSError, ValueError):
            agg = {}
        pool = agg.get("pool", {})
        out["ina_overlap_violations"] = agg.get("counters", {}).get("overlaps")
        out["overlap_log"] = agg.get("overlap_log", [])[:10]
        busy = pool.get("busy_seconds")
        out["aggregator_busy_fraction"] = busy / wall_seconds if busy is not None and \
            wall_seconds > 0 else None
        out["aggregator_counters"] = agg.get("counters", {})
    if s.controlled:
        end: dict[str, Any] = next((r for r in reversed(_records(run_dir, s.name))
                                    if r.get("event") == "end"), {})
        cj = end.get("jobs", {})
        out["controller"] = {"busy_seconds": end.get("busy_seconds"),
                             "unanswered": end.get("unanswered"),
                             "aborts": sum(j.get("aborts", 0) for j in cj.values()),
                             "gave_up": sum(j.get("gave_up", 0) for j in cj.values()),
                             "released_late": sum(j.get("released_late", 0)
                                                  for j in cj.values()),
                             "jobs": cj}
    done = [j["completion_seconds"] for j in jobs.values() if j["completion_seconds"]]
    out["mean_completion_seconds"] = statistics.mean(done) if done else None
    return out


def plot(runs: dict[str, Any], sc: "Scenario", path: Path) -> Path:
    """Each job's rounds in time, as the share controller decided them."""
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 3.6))
    styles = {"aggregate": ("tab:green", "aggregators"), "ordinary": ("tab:grey", "ordinary way"),
              "unreachable": ("tab:red", "controller unreachable")}
    shown: set[str] = set()
    for i, (ps, run) in enumerate(runs.items()):
        for how, (colour, label) in styles.items():
            ts = [r["t"] for r in run.versions if r.get("share") == how]
            if ts:
                ax.plot(ts, [i] * len(ts), "|", ms=12, color=colour,
                        label=None if how in shown else label)
                shown.add(how)
    ax.set_yticks(range(len(runs)), list(runs))
    ax.set_ylim(-0.7, len(runs) - 0.3)
    ax.set_xlabel(TIME_AXIS)
    ax.set_title(f"{sc.name}: each round's decision ({sc.share.policy})")
    legend(ax, [h for h in ax.get_lines() if not str(h.get_label()).startswith("_")])
    fig.tight_layout()
    return save(fig, path)


class Sharing(Feature):
    """[share]: every job aggregates at one forwarder, round by round as its policy decides."""
    name = "share"
    tables = ("share",)

    def active(self, sc: "Scenario") -> bool:
        return sc.share is not None

    def job_defaults(self, doc: dict[str, Any], sc: "Scenario") -> dict[str, Any]:
        # every job aggregates at [share]'s forwarder
        return defaults(doc["share"], sc) if "share" in doc else {}

    def parse(self, doc: dict[str, Any], sc: "Scenario") -> None:
        if "share" not in doc:
            return
        if "ina" in doc:
            raise ScenarioError("ina: not with [share] (it names the one aggregator the jobs "
                                "share)")
        sc.share = parse(doc["share"], sc)
        apply(sc.share, sc)

    def routes(self, sc: "Scenario", plan: "Plan") -> None:
        routes(sc.share, sc, plan.forwarders)

    def aggregators(self, sc: "Scenario") -> list[str] | None:
        return [] if sc.share.policy == "never" else [sc.share.at]

    def configure(self, sc: "Scenario", name: str, send: Command) -> bool:
        s = sc.share                    # every job, in its range of the one pool
        for job in sc.all_jobs:
            first, slots = ranges(s, sc.all_jobs)[job.who.ps]
            configure(send, job, name, slots, s.slot_timeout, first)
        return True

    def helpers(self, runner: Launcher) -> list[Helper]:
        """The controller (ndnps.apps.controller) beside the aggregating forwarder."""
        s = runner.sc.share
        if not s.controlled:
            return []
        conf = runner.run_dir / "config" / "share.toml"
        conf.write_text(to_toml(controller_config(s, runner.sc.all_jobs)))
        argv = [sys.executable, "-m", "ndnps.apps.controller", "--config", str(conf), "--metrics",
                str(runner.run_dir / "metrics" / f"{s.name}.jsonl"), *runner.link_flags()]
        proc = runner.spawn(s.name, argv,
                            {"NDN_CLIENT_TRANSPORT": f"unix://{runner.sockets[s.at]}"})
        runner.wait_ready(proc, "ready")
        return [controller(proc, s.name)]

    def summarize(self, run_dir: Path, sc: "Scenario", summary: dict[str, Any],
                  wall_seconds: float) -> None:
        summary["share"] = share_summary(sc.share, sc, run_dir, wall_seconds)

    def plot(self, run_dir: Path, sc: "Scenario", plots: Path) -> list[Path]:
        runs = {job.who.ps: ps_series(run_dir, job.recorder) for job in sc.all_jobs}
        return [plot(runs, sc, plots / "share.png")]


def controller(proc: Any, name: str) -> Helper:
    """The controller's process as the runner watches it: its loss leaves rounds to the
    ordinary way."""
    return Helper(proc, "controller", name,
                  "none: rounds go the ordinary way (the nodes find it unreachable)")
