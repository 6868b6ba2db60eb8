"""What a scenario run leaves behind, computed from the apps' metrics (JSON lines) and the
forwarders' traces (TSV): summary.json, plots (PNG) and a Chrome-trace timeline.

One time axis: seconds since the run started. The apps' metrics (`t`, see ndnps.lab.metrics)
and the forwarders' traces (`Time`, ndnps.ndn.clock.run_origin) count from it. Faults — kills and
restarts by [faults], unplanned exits, workers dropped and rejoined, PS resumptions — are
marked on the time plots and are instant events of the timeline."""
from __future__ import annotations

import csv
import json
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .metrics import read_metrics

# The first version records of each PS process carry its start-up: task offers and the
# training content (the whole model, to every worker). As bench/common.py's WARMUP_VERSIONS.
WARMUP_VERSIONS = 2
# Below these a run's per-version figures and medians mean little: summary.json warns.
MIN_STEADY_VERSIONS = 20
MIN_TRAINING_SECONDS = 1.0


@dataclass
class PsRun:
    """The PS's metrics as one series, across restarts."""
    records: list[dict]                  # every line, every PS process
    versions: list[dict]                 # version records, one per version (the later wins)
    warmup: list[dict]                   # the first WARMUP_VERSIONS of each PS process
    end: dict = field(default_factory=dict)
    start: dict = field(default_factory=dict)

    @property
    def steady(self) -> list[dict]:
        warm = {id(r) for r in self.warmup}
        return [r for r in self.versions if id(r) not in warm]


class VersionSeries:
    """The PS's version records as one series, fed line by line (also live, by the runner's
    progress display). A PS that resumes from its checkpoint at version C (its "start" event
    says C) redoes the versions after C: the later record of a version wins — the killed PS's
    records beyond C are dropped — so the series runs forward in version and in time."""

    def __init__(self) -> None:
        self.versions: list[dict] = []
        self.warmup: list[dict] = []     # the first WARMUP_VERSIONS of each PS process
        self._made = 0                   # version records of the current PS process

    def add(self, r: dict) -> None:
        if r.get("event") == "start":
            if isinstance(r.get("version"), int):
                self.versions = [v for v in self.versions if v["version"] <= r["version"]]
            self._made = 0
        elif "version" in r and "event" not in r:
            self.versions.append(r)
            if self._made < WARMUP_VERSIONS:
                self.warmup.append(r)
            self._made += 1


def ps_run(records: list[dict]) -> PsRun:
    series = VersionSeries()
    for r in records:
        series.add(r)
    end: dict = next((r for r in reversed(records) if r.get("event") == "end"), {})
    start: dict = next((r for r in records if r.get("event") == "start"), {})
    return PsRun(records, series.versions, series.warmup, end, start)


def _ps(run_dir: Path, ps: str) -> PsRun:
    path = run_dir / "metrics" / f"{ps}.jsonl"
    return ps_run(read_metrics(path) if path.exists() else [])


def fault_counts(records: list[dict]) -> dict[str, int]:
    """Workers lost and rejoined and short versions, from the PS's events and version records:
    a restarted PS appends to the same metrics, and a killed one never writes its counters.
    A worker lost by a PS that was killed before it came back rejoins when the restarted PS
    assigns it its task again."""
    starts = [r for r in records if r.get("event") == "start"]
    n = len(starts[-1].get("workers", [])) if starts else 0
    lost: set[str] = set()
    dropped = rejoined = 0
    for r in records:
        event, worker = r.get("event"), r.get("worker")
        if event == "dropped":
            dropped += 1
            lost.add(str(worker))
        elif (event == "rejoined" or (event == "task" and r.get("accepted"))) \
                and worker in lost:
            rejoined += 1
            lost.discard(worker)
    return {"workers_lost": dropped, "workers_rejoined": rejoined,
            "short_versions": sum(1 for r in records if "collect_wait" in r
                                  and r.get("gradients", n) < n)}


def _iterations(versions: list[dict]) -> list[tuple[float, float]]:
    """(when the version was made, seconds since the one before) for each version."""
    return [(b["t"], b["t"] - a["t"]) for a, b in zip(versions, versions[1:])]


def training_seconds(run: PsRun) -> float | None:
    """From the first PS's start of training to its last version."""
    if not run.versions:
        return None
    return run.versions[-1]["t"] - run.start.get("t", run.versions[0]["t"])


def run_warnings(run: PsRun) -> list[str]:
    """Why the run's figures may not mean much."""
    out = []
    steady, seconds = len(run.steady), training_seconds(run)
    if steady < MIN_STEADY_VERSIONS:
        out.append(f"only {steady} versions after the first {WARMUP_VERSIONS} of each PS "
                   f"process (start-up): per-version figures need {MIN_STEADY_VERSIONS} or "
                   "more (run longer: training.epochs or max_versions)")
    if seconds is not None and seconds < MIN_TRAINING_SECONDS:
        out.append(f"the training took {seconds:.2f} s (under {MIN_TRAINING_SECONDS:g} s): "
                   "timings are dominated by start-up and scheduling noise")
    return out


def summarize(run_dir: Path, scenario: Any, wall_seconds: float,
              extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """summary.json: the scenario, then the training's figures — the first job's at the top
    level (a one-job run's whole), and with several [[jobs]] each job's under `jobs` and how
    they shared the network under `sharing`."""
    sc = scenario
    runs = {job.ps: _ps(run_dir, job.recorder) for job in sc.all_jobs}
    summary = {
        "scenario": sc.name,
        "system": sc.system,
        "mode": sc.training.mode,
        "push_mode": sc.training.push_mode if sc.system == "ndnps" else None,
        "topology": sc.topology,
        "netns": sc.netns,
        **job_summary(run_dir, sc.training, runs[sc.training.ps]),
        "wall_seconds": round(wall_seconds, 3),
        "links": {"loss": sc.links.loss, "delay_ms": sc.links.delay_ms,
                  "jitter_ms": sc.links.jitter_ms, "rate_mbps": sc.links.rate_mbps,
                  "reliability": sc.links.reliability},
    }
    if sc.jobs:
        summary["jobs"] = [{"ps": job.ps, **job_summary(run_dir, job, runs[job.ps])}
                           for job in sc.jobs]
        sharing = summary["sharing"] = sharing_summary(
            {job.ps: runs[job.ps] for job in sc.jobs},
            {job.ps: wire_bytes_per_version(sc.system, job_bytes(runs[job.ps]), len(job.workers))
             for job in sc.jobs})
        if sc.topology == "bottleneck" and sharing.get("jobs"):
            # the jobs' wire rates together over one direction's rate (a duplex link: up to 2)
            sharing["link_use"] = sum(j["wire_mbps"] for j in sharing["jobs"].values()) \
                / sc.bottleneck.rate_mbps
    if getattr(sc, "pipeline", None) is not None:       # pipeline stages (ndnps.lab.pipeline)
        from .pipeline import summary as pipeline_summary
        block = summary["pipeline"] = pipeline_summary(run_dir, sc)
        for key in ("final_accuracy", "parameters_identical", "digest_mismatches"):
            summary[key] = block.get(key)
        summary["collective"] = "pipeline"
    elif sc.training.collective:           # PS-less: every peer's records (ndnps.lab.peers)
        from .peers import collective_summary
        peers = sc.training.workers
        if sc.topology == "bcube":           # each peer's host forwarder
            from .fabric import bcube_apps, network
            senders = [a.forwarder for a in bcube_apps(sc, network(sc, 1000.0))]
        else:
            senders = [f"h-{p}" for p in peers] if sc.netns else list(peers)
        summary.update(collective_summary(run_dir, sc.training, summary["versions"],
                                          link_bytes(run_dir), senders,
                                          sc.topology == "bcube"))
        summary["collective"] = summary.pop("kind")
    if getattr(sc, "share", None) is not None:      # jobs sharing an aggregator (ndnps.lab.share)
        from .share import summary as share_summary
        summary["share"] = share_summary(sc.share, sc, run_dir, wall_seconds)
    if extra:
        summary.update(extra)
    if sc.ina is not None and isinstance(summary.get("ina"), dict):
        summary["ina"].update(ina_counts(run_dir, runs[sc.training.ps].end,
                                         summary["ina"].get("aggregators_configured", [])))
    return summary


def ina_counts(run_dir: Path, end: dict, forwarders: list[str]) -> dict[str, Any]:
    """In-network aggregation's counters: the PS's (segments the network summed, segments
    it summed itself) and the aggregating forwarders' (from their final status)."""
    slots = rejected = answered = fallbacks = 0
    by_forwarder = {}
    for name in forwarders:
        path = run_dir / "traces" / f"{name}-status.json"
        try:
            agg = json.loads(path.read_text()).get("aggregation") or {}
        except (OSError, ValueError):
            continue
        c = agg.get("counters", {})
        by_forwarder[name] = c
        slots += c.get("collisions", 0)
        rejected += c.get("rejected", 0)
        answered += c.get("answered", 0)
        fallbacks += c.get("fallbacks", 0)
    return {"segments_aggregated": end.get("segments_aggregated"),
            "segments_fallback": end.get("segments_fallback"),
            "slot_collisions": slots, "contributions_rejected": rejected,
            "sums_answered": answered, "subgroup_fallbacks": fallbacks,
            "forwarders": by_forwarder}


def job_bytes(run: PsRun) -> int:
    """The model's bytes (float32 parameters), from the PS's start record."""
    return int(run.start.get("n_params", 0)) * 4


def job_summary(run_dir: Path, job: Any, run: PsRun) -> dict[str, Any]:
    """One job's figures from its PS's and workers' metrics."""
    versions, end, start = run.versions, run.end, run.start
    workers_end: dict[str, dict] = {}
    for w in job.workers:
        path = run_dir / "metrics" / f"{w}.jsonl"
        recs = read_metrics(path) if path.exists() else []      # (a worker that never ran)
        workers_end[w] = next((r for r in reversed(recs) if r.get("event") == "end"), {})
    n_params = start.get("n_params", 0)
    steady_out = [r["bytes_sent"] for r in run.steady if "bytes_sent" in r]
    out_per_version = statistics.mean(steady_out) if steady_out else None
    steady_in = [r["bytes_received"] for r in run.steady if "bytes_received" in r]
    in_per_version = statistics.mean(steady_in) if steady_in else None
    iters = [dt for _, dt in _iterations(versions)]
    seconds = training_seconds(run)
    return {
        "workers": len(job.workers),
        "final_accuracy": end.get("accuracy", versions[-1].get("accuracy") if versions else None),
        "versions": end.get("version", len(versions)),
        "model_params": n_params,
        "model_bytes": n_params * 4,
        # steady state: start-up (each PS process's first versions) apart, as the benchmark
        "ps_bytes_out_per_version": out_per_version,
        "ps_bytes_out_per_version_over_model": (out_per_version / (n_params * 4)
                                                if out_per_version is not None and n_params
                                                else None),
        # what reaches the PS a version: N gradients, or about one with in-network aggregation
        "ps_bytes_in_per_version": in_per_version,
        "ps_bytes_in_per_version_over_model": (in_per_version / (n_params * 4)
                                               if in_per_version is not None and n_params
                                               else None),
        "ps_steady_versions": len(steady_out),
        "ps_startup_bytes_out": sum(r.get("bytes_sent", 0) for r in run.warmup),
        "training_seconds": round(seconds, 3) if seconds is not None else None,
        "iteration_seconds": statistics.median(iters) if iters else None,
        "probes": sum(e.get("probes", 0) for e in workers_end.values()),
        "retransmissions": sum(e.get("retransmissions", 0)
                               for e in [end, *workers_end.values()]),
        # faults (docs/faults.md): what the PS saw; summary["faults"] says what was injected
        **fault_counts(run.records),
        "workers_lost_at_end": end.get("lost", []),
        "collects_redone": end.get("collects_redone", 0),
        "ps_restarts": end.get("restarts", 0),
        "ps_resumed_from": end.get("resumed_from"),
        "reconnects": {name: e.get("reconnects", 0)
                       for name, e in [(job.ps, end), *workers_end.items()]
                       if e.get("reconnects")},
        "warnings": run_warnings(run),
        "ps_end": end,
        "workers_end": workers_end,
    }


# ---- several jobs on one network ---------------------------------------------------------------

def wire_bytes_per_version(system: str, model_bytes: int, workers: int) -> int:
    """The bytes one sync version moves at least over a link every worker sits behind:
    ndnps pushes the model once and collects N gradients, the TCP PS sends N copies."""
    return (workers + 1) * model_bytes if system == "ndnps" else 2 * workers * model_bytes


def jain_index(xs: list[float]) -> float | None:
    """Jain's fairness index (Σx)² / (n·Σx²): 1 when every x is equal, 1/n when one takes
    all."""
    squares = sum(x * x for x in xs)
    return sum(xs) ** 2 / (len(xs) * squares) if xs and squares else None


def _versions_at(versions: list[dict], t: float) -> float:
    """Versions made by time `t`, interpolated between version records (a job's progress as
    a continuous curve: counting whole versions over a short overlap is coarse)."""
    return float(np.interp(t, [r["t"] for r in versions], [r["version"] for r in versions]))


def sharing_summary(runs: dict[str, PsRun], bytes_per_version: dict[str, int]) -> dict[str, Any]:
    """How jobs running at once shared the network: over the time all of them were in their
    steady versions (from the last job's first steady version to the first job's last
    version), each job's rate in versions/s and in the bytes its versions must move
    (`bytes_per_version`), that rate over an equal share (the mean: 1.0 is fair), and Jain's
    index over the byte rates. None of it when the jobs did not overlap."""
    steady = {ps: run.steady for ps, run in runs.items()}
    if any(len(v) < 2 for v in steady.values()):
        return {"overlap_seconds": None, "note": "a job made fewer than 2 steady versions"}
    t0 = max(v[0]["t"] for v in steady.values())
    t1 = min(v[-1]["t"] for v in steady.values())
    if t1 <= t0:
        return {"overlap_seconds": 0.0, "note": "the jobs' steady versions did not overlap"}
    jobs = {}
    for ps, versions in steady.items():
        rate = (_versions_at(versions, t1) - _versions_at(versions, t0)) / (t1 - t0)
        jobs[ps] = {"versions_per_s": rate, "wire_mbps": rate * bytes_per_version[ps] * 8 / 1e6}
    mean = statistics.mean(j["wire_mbps"] for j in jobs.values())
    for j in jobs.values():
        j["over_equal_share"] = j["wire_mbps"] / mean if mean else None
    shares = [j["over_equal_share"] for j in jobs.values() if j["over_equal_share"] is not None]
    return {"overlap": [round(t0, 3), round(t1, 3)], "overlap_seconds": round(t1 - t0, 3),
            "jobs": jobs, "jain_index": jain_index([j["wire_mbps"] for j in jobs.values()]),
            # the least and the most served jobs (fair within 20 %: 0.8 and 1.2 at worst)
            "share_range": [min(shares), max(shares)] if shares else None}


# ---- the bottleneck --------------------------------------------------------------------------

def wire_limits(model_bytes: int, workers: int, rate_bytes_per_s: float) -> dict[str, float]:
    """The least seconds a sync iteration can take on the bottleneck when each system moves
    only the model's bytes (M) at the link's rate (R), pushes and gradients one after the
    other: ndnps pushes the parameters once (multicast along the persistent PIT) and collects
    N gradients, (N+1)·M/R; the TCP PS sends N copies and receives N gradients, 2N·M/R."""
    return {"ndnps": (workers + 1) * model_bytes / rate_bytes_per_s,
            "tcp": 2 * workers * model_bytes / rate_bytes_per_s}


def _drop_ratio(drops: int, sent: int) -> float | None:
    return drops / sent if sent else None


def bottleneck_summary(sc: Any, qdisc: dict[str, dict[str, Any]] | None, model_bytes: int | None,
                       iteration: float | None) -> dict[str, Any]:
    """summary.json's `bottleneck`: the link as configured, each direction's tbf counters
    (`qdisc`, by "sender->receiver" host; None if they could not be read) with drops over
    packets sent (the benchmark's target: at most 1 %), and the wire limits of both systems
    with the measured median iteration over each."""
    b = sc.bottleneck
    out: dict[str, Any] = {"rate_mbps": b.rate_mbps, "queue_bytes": b.queue_bytes,
                           "burst_bytes": b.burst_bytes, "mtu": b.mtu, "qdisc": None}
    if qdisc is not None:
        out["qdisc"] = {d: {**c, "drops_over_sent": _drop_ratio(c["drops"], c["sent_packets"])}
                        for d, c in qdisc.items()}
        sent = sum(int(c["sent_packets"]) for c in qdisc.values())
        drops = sum(int(c["drops"]) for c in qdisc.values())
        out.update(qdisc_sent_packets=sent, qdisc_drops=drops,
                   qdisc_drops_over_sent=_drop_ratio(drops, sent))
    if model_bytes:
        # the first job's (one job: the run's); several jobs are compared in `sharing`
        limits = wire_limits(model_bytes, len(sc.training.workers), b.rate_bytes_per_s)
        out["wire_limit_seconds"] = limits
        out["iteration_over_wire_limit"] = {
            k: (iteration / v if iteration is not None else None) for k, v in limits.items()}
    return out


# ---- faults on the time axis -------------------------------------------------------------------

@dataclass(frozen=True)
class Mark:
    t: float                # seconds since the run started
    kind: str               # a key of MARK_STYLES
    label: str


# kind -> (colour, legend text): colours apart from the plotted series' (loss red, accuracy
# blue, forwarders' tables by process: blue, orange, green, red ...)
MARK_STYLES = {"kill": ("black", "kill"), "restart": ("tab:gray", "restart"),
               "exit": ("magenta", "unplanned exit"), "dropped": ("tab:olive", "worker dropped"),
               "rejoined": ("tab:cyan", "worker rejoined"),
               "resumed": ("tab:purple", "PS resumed")}
SERIES_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:brown", "navy",
                  "darkgreen", "goldenrod")
# the PS's own events: in its lane of the timeline
PS_EVENTS = ("dropped", "rejoined", "resumed")


def read_summary(run_dir: Path) -> dict[str, Any]:
    """summary.json, or {} when there is none (yet) or it cannot be read."""
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError):
        return {}
    return summary if isinstance(summary, dict) else {}


def fault_marks(summary: dict[str, Any], ps_records: list[dict]) -> list[Mark]:
    """Kills and restarts ([faults]: summary `faults`), unplanned exits and their restarts
    (`unplanned_exits`), and from the PS's metrics workers dropped and rejoined and PS
    resumptions; in time order."""
    marks = []

    def restarted(rec: dict, default: str) -> None:
        r = rec.get("restarted")
        if isinstance(r, dict) and isinstance(r.get("t"), (int, float)):
            marks.append(Mark(r["t"], "restart", f"restart {r.get('process', default)}"))

    for f in summary.get("faults") or []:
        if isinstance(f.get("t"), (int, float)) and "skipped" not in f:
            node = f.get(f.get("role", ""), f.get("role", "?"))
            marks.append(Mark(f["t"], "kill", f"kill {node}"))
            restarted(f, str(node))
    for e in summary.get("unplanned_exits") or []:
        if isinstance(e.get("t"), (int, float)):
            who = e.get("who", "?")
            marks.append(Mark(e["t"], "exit", f"{who} exited ({e.get('code')})"))
            restarted(e, str(who))
    for r in ps_records:
        event = r.get("event")
        if event in PS_EVENTS and isinstance(r.get("t"), (int, float)):
            what = f"PS resumed at v{r.get('version')}" if event == "resumed" \
                else f"{r.get('worker')} {event}"
            marks.append(Mark(r["t"], event, what))
    return sorted(marks, key=lambda m: m.t)


# ---- traces -------------------------------------------------------------------------------------

def read_tsv(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def _trace_stems(run_dir: Path, kind: str) -> list[str]:
    """The forwarder processes with a `kind` trace: `<node>`, and `<node>-r<k>` for the k-th
    process of a node restarted since (the runner keeps their traces so)."""
    return sorted(p.name[:-len(f"-{kind}.tsv")]
                  for p in (run_dir / "traces").glob(f"*-{kind}.tsv"))


def _node_of(stem: str) -> str:
    return re.sub(r"-r\d+$", "", stem)


def link_directions(run_dir: Path) -> dict[tuple[str, str], int]:
    """Bytes over the run per (sender, receiver) of every link, both directions, from the
    forwarders' rate traces: what a forwarder sent on a face (Out rows) and, on faces to apps,
    what the app sent it (In rows). A link between two forwarders is counted by its sender
    (Out rows: what went onto the link, before losses), not again by the receiver."""
    forwarders = {_node_of(s) for s in _trace_stems(run_dir, "rates")}
    out: dict[tuple[str, str], int] = defaultdict(int)
    for stem in _trace_stems(run_dir, "rates"):
        labels = _face_labels(run_dir / "traces" / f"{stem}-status.json")
        for row in read_tsv(run_dir / "traces" / f"{stem}-rates.tsv"):
            if row["Class"] == "mgmt":                   # our own monitoring
                continue
            peer = labels.get(row["FaceId"], f"face{row['FaceId']}")
            if row["Type"].startswith("Out"):
                out[(stem, peer)] += int(row["Bytes"])
            elif peer not in forwarders:
                out[(peer, stem)] += int(row["Bytes"])
    return dict(out)


def link_bytes(run_dir: Path) -> dict[str, int]:
    """Bytes over the run per link and direction, labelled sender->receiver."""
    return {f"{a}->{b}": n for (a, b), n in sorted(link_directions(run_dir).items())}


def _face_labels(status_path: Path) -> dict[str, str]:
    """Face id -> the peer forwarder or app behind it (faces gone by the end keep `faceN`)."""
    if not status_path.exists():
        return {}
    return json.loads(status_path.read_text()).get("labels", {})


# ---- plots --------------------------------------------------------------------------------------

def plot_all(run_dir: Path, scenario: Any) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots = run_dir / "plots"
    plots.mkdir(exist_ok=True)
    made = []
    runs = {job.ps: _ps(run_dir, job.recorder) for job in scenario.all_jobs}
    several = len(runs) > 1
    marks = fault_marks(read_summary(run_dir), runs[scenario.training.ps].records)
    time_axis = "time since the run started (s)"

    fig, ax1 = plt.subplots(figsize=(8, 4.5))
    ax2 = ax1.twinx()
    lines = []
    for i, (ps, run) in enumerate(runs.items()):
        # one job: loss red, accuracy blue; several: a colour per job, accuracy dashed
        colours = (SERIES_COLOURS[i % len(SERIES_COLOURS)],) * 2 if several else \
            ("tab:red", "tab:blue")
        job = f" ({ps})" if several else ""
        versions = run.versions
        loss = [r.get("loss", float("nan")) for r in versions]     # (NaN: not plotted)
        lines += ax1.plot([r["t"] for r in versions], loss, color=colours[0],
                          label=f"training loss{job}")
        acc = [(r["t"], r["accuracy"]) for r in versions if r.get("accuracy") is not None]
        lines += ax2.plot([a for a, _ in acc], [b for _, b in acc], color=colours[1],
                          ls="--" if several else "-", label=f"test accuracy{job}")
    ax1.set_xlabel(time_axis)
    ax1.set_ylabel("loss")
    ax2.set_ylabel("test accuracy")
    _legend(ax1, lines + _mark(ax1, marks))
    ax1.set_title(f"{scenario.name}: loss and accuracy")
    fig.tight_layout()
    made.append(_save(fig, plots / "loss_accuracy.png"))

    fig, ax = plt.subplots(figsize=(8, 4.5))
    all_iters = []
    for ps, run in runs.items():
        iters = _iterations(run.versions)
        all_iters += [dt for _, dt in iters]
        # each version's time over the span it took: a PS restart's pause is one long step
        ax.step([t for t, _ in iters], [dt * 1000 for _, dt in iters], where="pre", lw=0.8,
                label=f"{ps}: a version's time since the one before" if several else
                "iteration: a version's time since the one before")
    if all_iters and max(all_iters) > 20 * statistics.median(all_iters):
        ax.set_yscale("symlog", linthresh=max(1e-3, statistics.median(all_iters)) * 1000)
        # (a restart's pause beside ms-long versions)
    ax.set_xlabel(time_axis)
    ax.set_ylabel("iteration time (ms)")
    _legend(ax, [*ax.get_lines(), *_mark(ax, marks)])
    ax.set_title(f"{scenario.name}: iteration time per version")
    fig.tight_layout()
    made.append(_save(fig, plots / "iteration_time.png"))

    made.append(_plot_links(run_dir, scenario, plots / "link_bytes.png"))

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i, stem in enumerate(_trace_stems(run_dir, "tables")):
        rows = read_tsv(run_dir / "traces" / f"{stem}-tables.tsv")
        ts = [float(r["Time"]) for r in rows]
        colour = SERIES_COLOURS[i % len(SERIES_COLOURS)]      # one per forwarder process
        ax.plot(ts, [int(r["Pit"]) for r in rows], color=colour, label=f"{stem} PIT")
        ax.plot(ts, [int(r["PersistentFaces"]) for r in rows], color=colour, ls="--",
                label=f"{stem} persistent faces")
    ax.set_xlabel(time_axis)
    ax.set_ylabel("entries")
    ax.set_title(f"{scenario.name}: ordinary and persistent PIT")
    _legend(ax, [*ax.get_lines(), *_mark(ax, marks)])
    fig.tight_layout()
    made.append(_save(fig, plots / "pit_size.png"))
    if getattr(scenario, "share", None) is not None:
        made.append(_plot_share(runs, scenario, plots / "share.png"))
    return made


def _plot_share(runs: dict[str, PsRun], scenario: Any, path: Path) -> Path:
    """[share]: each job's rounds in time, as the share controller decided them."""
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
    ax.set_xlabel("time since the run started (s)")
    ax.set_title(f"{scenario.name}: each round's decision ({scenario.share.policy})")
    _legend(ax, [h for h in ax.get_lines() if not str(h.get_label()).startswith("_")])
    fig.tight_layout()
    return _save(fig, path)


def _legend(ax, handles: list) -> None:
    """Below the axes, clear of the data and of the marks' labels."""
    ax.legend(handles=handles, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.15),
              ncol=min(4, len(handles)) or 1, frameon=False)


def _mark(ax, marks: list[Mark]) -> list:
    """Vertical lines at the marks (named beside the line while few enough to read); returns
    one legend handle per kind shown."""
    from matplotlib.lines import Line2D
    from matplotlib.transforms import blended_transform_factory
    along = blended_transform_factory(ax.transData, ax.transAxes)
    for m in marks:
        colour = MARK_STYLES[m.kind][0]
        ax.axvline(m.t, color=colour, ls=":", lw=1)
        if len(marks) <= 12:
            ax.text(m.t, 0.98, f" {m.label}", transform=along, rotation=90, va="top",
                    ha="right", fontsize=6, color=colour)
    kinds = dict.fromkeys(m.kind for m in marks)
    return [Line2D([], [], color=MARK_STYLES[k][0], ls=":", label=MARK_STYLES[k][1])
            for k in kinds]


def _plot_links(run_dir: Path, scenario: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    directions = link_directions(run_dir)
    forwarders = {_node_of(s) for s in _trace_stems(run_dir, "rates")}
    colours = {"forwarder → app": "tab:blue", "app → forwarder": "tab:orange",
               "forwarder → forwarder": "tab:green"}

    def kind(a: str, b: str) -> str:
        if _node_of(a) in forwarders and _node_of(b) in forwarders:
            return "forwarder → forwarder"
        return "forwarder → app" if _node_of(a) in forwarders else "app → forwarder"

    # the two directions of a link side by side, links in name order
    keys = sorted(directions, key=lambda ab: (sorted(ab), ab), reverse=True)
    fig, ax = plt.subplots(figsize=(8, max(3, 0.3 * len(keys) + 1.6)))
    ax.barh([f"{a} → {b}" for a, b in keys], [directions[k] / 1e6 for k in keys],
            color=[colours[kind(*k)] for k in keys])
    ax.set_xlabel("MB sent (NDN packets on the face, management excluded)")
    ax.set_title(f"{scenario.name}: bytes per link and direction")
    ax.tick_params(axis="y", labelsize=7)
    _legend(ax, [Patch(color=colours[k], label=k)
                 for k in dict.fromkeys(kind(*k) for k in keys)])
    fig.tight_layout()
    return _save(fig, path)


def _save(fig, path: Path) -> Path:
    fig.savefig(path, dpi=110)
    import matplotlib.pyplot as plt
    plt.close(fig)
    return path


# ---- timeline -----------------------------------------------------------------------------------

PS_SPANS = ("collect_wait", "apply", "push")     # in the order a version does them


def timeline(run_dir: Path, scenario: Any) -> Path:
    """Chrome trace (chrome://tracing, Perfetto) on the run's time axis (µs since the run
    started): a PS lane (collect wait, apply, push of each version), one lane per worker
    (compute, then communication: the gradient's collect and waiting for the next
    parameters), one per forwarder process (counters: packets and MB per second in and out,
    table sizes), and the faults as instant events (kills, restarts, unplanned exits: global;
    the PS's and workers' events: in their lane)."""
    events: list[dict] = []

    def lane(pid: int, name: str) -> None:
        events.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}})
        events.append({"name": "process_sort_index", "ph": "M", "pid": pid,
                       "args": {"sort_index": pid}})

    def span(pid: int, name: str, start: float, end: float, args: dict) -> None:
        events.append({"name": name, "cat": name, "ph": "X", "pid": pid, "tid": 1,
                       "ts": start * 1e6, "dur": max(1.0, (end - start) * 1e6), "args": args})

    def instant(pid: int, name: str, t: float, scope: str, args: dict | None = None) -> None:
        events.append({"name": name, "ph": "i", "s": scope, "pid": pid, "tid": 1,
                       "ts": t * 1e6, "args": args or {}})

    pid = 0
    for job in scenario.all_jobs:                   # a lane per job's PS
        pid += 1
        lane(pid, f"PS {job.ps}")
        run = _ps(run_dir, job.recorder)
        for r in run.records:      # superseded versions too: a killed PS's work happened
            if "version" not in r or "event" in r or "t" not in r:
                continue
            end = r["t"]
            for key in reversed(PS_SPANS):           # back from the record, made after push
                d = r.get(key)
                if isinstance(d, (int, float)):
                    span(pid, key.replace("_", " "), end - d, end,
                         {"version": r["version"], "gradients": r.get("gradients")})
                    end -= d
        if job is scenario.training:                # faults: a one-job run's only
            for m in fault_marks(read_summary(run_dir), run.records):
                instant(pid, m.label, m.t, "p" if m.kind in PS_EVENTS else "g")

    for w in scenario.worker_names:
        pid += 1
        lane(pid, f"worker {w}")
        path = run_dir / "metrics" / f"{w}.jsonl"
        for r in read_metrics(path) if path.exists() else []:
            if "t" not in r or "ts" not in r:
                continue
            if "event" in r:
                if r["event"] != "end":
                    instant(pid, r["event"], r["t"], "p", {k: v for k, v in r.items() if k
                                                           not in ("t", "ts", "event", "role",
                                                                   "name")})
                continue
            if "compute_at" not in r:
                continue
            start = r["compute_at"] - (r["ts"] - r["t"])       # wall clock -> run's axis
            end_compute = start + r.get("compute", 0)
            span(pid, "compute", start, end_compute, {"step": r.get("step")})
            span(pid, "communication", end_compute, r["t"],
                 {"step": r.get("step"), "version": r.get("version")})

    for stem in sorted({*_trace_stems(run_dir, "rates"), *_trace_stems(run_dir, "tables")}):
        pid += 1
        lane(pid, f"forwarder {stem}")
        events += _forwarder_counters(run_dir, stem, pid, scenario.trace_interval)
    path = run_dir / "timeline.json"
    path.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))
    return path


def _forwarder_counters(run_dir: Path, stem: str, pid: int, interval: float) -> list[dict]:
    """Counter events of one forwarder process: packets and MB per second in and out (each
    trace interval's rows, management excluded; drawn from the interval's start, back to zero
    over intervals without traffic, which have no rows) and its table sizes."""
    per: dict[float, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for row in read_tsv(run_dir / "traces" / f"{stem}-rates.tsv"):
        if row["Class"] != "mgmt":
            d = "in" if row["Type"].startswith("In") else "out"
            c = per[float(row["Time"])]
            c[f"{d}_packets"] += int(row["Packets"])
            c[f"{d}_bytes"] += int(row["Bytes"])
    events = []

    def counter(name: str, t: float, args: dict) -> None:
        events.append({"name": name, "ph": "C", "pid": pid, "ts": t * 1e6,
                       "args": args})
    times = sorted(per)
    for i, t in enumerate(times):
        c = per[t]
        counter("packets/s", t - interval, {d: round(c[f"{d}_packets"] / interval, 1)
                                            for d in ("in", "out")})
        counter("MB/s", t - interval, {d: round(c[f"{d}_bytes"] / interval / 1e6, 4)
                                       for d in ("in", "out")})
        if i + 1 == len(times) or times[i + 1] > t + 1.5 * interval:
            counter("packets/s", t, {"in": 0, "out": 0})
            counter("MB/s", t, {"in": 0, "out": 0})
    for row in read_tsv(run_dir / "traces" / f"{stem}-tables.tsv"):
        counter("tables", float(row["Time"]), {"PIT": int(row["Pit"]),
                                               "persistent faces": int(row["PersistentFaces"]),
                                               "CS": int(row["Cs"])})
    return events
