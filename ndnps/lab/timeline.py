"""The run's Chrome-trace timeline (chrome://tracing, Perfetto), on the run's time axis."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from .marks import PS_EVENTS, fault_marks, read_summary
from .metrics import read_metrics
from .series import ps_series
from .traces import read_tsv, trace_stems

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
        lane(pid, f"PS {job.who.ps}")
        run = ps_series(run_dir, job.recorder)
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

    for stem in sorted({*trace_stems(run_dir, "rates"), *trace_stems(run_dir, "tables")}):
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
