"""A PS's metrics as one version series (across restarts), and one job's figures from it:
what the report, the progress display and every feature's summary read."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .metrics import read_metrics


# The first version records of each PS process carry its start-up: task offers and the
# training content (the whole model, to every worker). As bench/scenario_runs.py's WARMUP_VERSIONS.
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


def ps_series(run_dir: Path, ps: str) -> PsRun:
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


def iterations(versions: list[dict]) -> list[tuple[float, float]]:
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


def job_bytes(run: PsRun) -> int:
    """The model's bytes (float32 parameters), from the PS's start record."""
    return int(run.start.get("n_params", 0)) * 4


def job_summary(run_dir: Path, job: Any, run: PsRun) -> dict[str, Any]:
    """One job's figures from its PS's and workers' metrics."""
    versions, end, start = run.versions, run.end, run.start
    workers_end: dict[str, dict] = {}
    for w in job.who.workers:
        path = run_dir / "metrics" / f"{w}.jsonl"
        recs = read_metrics(path) if path.exists() else []      # (a worker that never ran)
        workers_end[w] = next((r for r in reversed(recs) if r.get("event") == "end"), {})
    n_params = start.get("n_params", 0)
    steady_out = [r["bytes_sent"] for r in run.steady if "bytes_sent" in r]
    out_per_version = statistics.mean(steady_out) if steady_out else None
    steady_in = [r["bytes_received"] for r in run.steady if "bytes_received" in r]
    in_per_version = statistics.mean(steady_in) if steady_in else None
    iters = [dt for _, dt in iterations(versions)]
    seconds = training_seconds(run)
    return {
        "workers": len(job.who.workers),
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
                       for name, e in [(job.who.ps, end), *workers_end.items()]
                       if e.get("reconnects")},
        "warnings": run_warnings(run),
        "ps_end": end,
        "workers_end": workers_end,
    }
