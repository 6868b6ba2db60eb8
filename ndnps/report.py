"""What a scenario run leaves behind, computed from the apps' metrics (JSON lines) and the
forwarders' traces (TSV): summary.json, plots (PNG) and a Chrome-trace timeline."""
from __future__ import annotations

import csv
import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from .metrics import read_metrics


def _ps_records(run_dir: Path, ps: str) -> tuple[list[dict], dict, dict, dict]:
    records = read_metrics(run_dir / "metrics" / f"{ps}.jsonl")
    versions = [r for r in records if "version" in r and "event" not in r]
    end: dict = next((r for r in reversed(records) if r.get("event") == "end"), {})
    start: dict = next((r for r in records if r.get("event") == "start"), {})
    return versions, end, start, fault_counts(records)


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


def _iteration_times(versions: list[dict]) -> list[float]:
    return [b["t"] - a["t"] for a, b in zip(versions, versions[1:])]


def summarize(run_dir: Path, scenario: Any, wall_seconds: float,
              extra: dict[str, Any] | None = None) -> dict[str, Any]:
    sc = scenario
    ps = sc.training.ps
    versions, end, start, faults = _ps_records(run_dir, ps)
    workers_end: dict[str, dict] = {}
    for w in sc.worker_names:
        recs = read_metrics(run_dir / "metrics" / f"{w}.jsonl")
        workers_end[w] = next((r for r in reversed(recs) if r.get("event") == "end"), {})
    n_params = start.get("n_params", 0)
    out_per_version = [r["bytes_sent"] for r in versions if "bytes_sent" in r]
    iters = _iteration_times(versions)
    summary = {
        "scenario": sc.name,
        "mode": sc.training.mode,
        "push_mode": sc.training.push_mode,
        "topology": sc.topology,
        "netns": sc.netns,
        "workers": len(sc.worker_names),
        "final_accuracy": end.get("accuracy", versions[-1].get("accuracy") if versions else None),
        "versions": end.get("version", len(versions)),
        "model_params": n_params,
        "model_bytes": n_params * 4,
        "ps_bytes_out_per_version": statistics.mean(out_per_version) if out_per_version else None,
        "ps_bytes_out_per_version_over_model": (statistics.mean(out_per_version) / (n_params * 4)
                                                if out_per_version and n_params else None),
        "wall_seconds": round(wall_seconds, 3),
        "iteration_seconds": statistics.median(iters) if iters else None,
        "probes": sum(e.get("probes", 0) for e in workers_end.values()),
        "retransmissions": sum(e.get("retransmissions", 0)
                               for e in [end, *workers_end.values()]),
        "links": {"loss": sc.links.loss, "delay_ms": sc.links.delay_ms,
                  "jitter_ms": sc.links.jitter_ms, "rate_mbps": sc.links.rate_mbps,
                  "reliability": sc.links.reliability},
        # faults (issue 6): what the PS saw; summary["faults"] says what was injected
        **faults,
        "workers_lost_at_end": end.get("lost", []),
        "collects_redone": end.get("collects_redone", 0),
        "ps_restarts": end.get("restarts", 0),
        "ps_resumed_from": end.get("resumed_from"),
        "reconnects": {name: e.get("reconnects", 0)
                       for name, e in [(ps, end), *workers_end.items()] if e.get("reconnects")},
        "ps_end": end,
        "workers_end": workers_end,
    }
    if extra:
        summary.update(extra)
    return summary


# ---- traces -------------------------------------------------------------------------------------

def read_tsv(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def link_bytes(run_dir: Path) -> dict[str, int]:
    """Bytes each forwarder sent on each face over the run, labelled node->peer."""
    out: dict[str, int] = defaultdict(int)
    for rates in sorted((run_dir / "traces").glob("*-rates.tsv")):
        node = rates.name[:-len("-rates.tsv")]
        labels = _face_labels(run_dir / "traces" / f"{node}-status.json")
        for row in read_tsv(rates):
            if row["Type"].startswith("Out") and row["Class"] != "mgmt":   # not our monitoring
                face = labels.get(row["FaceId"], f"face{row['FaceId']}")
                out[f"{node}->{face}"] += int(row["Bytes"])
    return dict(out)


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
    versions, _, _, _ = _ps_records(run_dir, scenario.training.ps)

    fig, ax1 = plt.subplots(figsize=(7, 4))
    t = [r["t"] for r in versions]
    loss = [r.get("loss", float("nan")) for r in versions]     # (NaN: not plotted)
    ax1.plot(t, loss, color="tab:red", label="training loss")
    ax1.set_xlabel("time since the PS started (s)")
    ax1.set_ylabel("loss")
    ax2 = ax1.twinx()
    acc = [(r["t"], r["accuracy"]) for r in versions if r.get("accuracy") is not None]
    ax2.plot([a for a, _ in acc], [b for _, b in acc], color="tab:blue", label="test accuracy")
    ax2.set_ylabel("test accuracy")
    ax1.set_title(f"{scenario.name}: loss and accuracy")
    fig.tight_layout()
    made.append(_save(fig, plots / "loss_accuracy.png"))

    fig, ax = plt.subplots(figsize=(7, 4))
    iters = _iteration_times(versions)
    ax.plot([r["version"] for r in versions[1:]], [x * 1000 for x in iters], lw=0.8)
    ax.set_xlabel("version")
    ax.set_ylabel("iteration time (ms)")
    ax.set_title(f"{scenario.name}: iteration time per version")
    fig.tight_layout()
    made.append(_save(fig, plots / "iteration_time.png"))

    lb = link_bytes(run_dir)
    fig, ax = plt.subplots(figsize=(7, max(3, 0.35 * len(lb) + 1)))
    names = sorted(lb)
    ax.barh(names, [lb[n] / 1e6 for n in names])
    ax.set_xlabel("MB sent")
    ax.set_title(f"{scenario.name}: bytes per link and direction")
    fig.tight_layout()
    made.append(_save(fig, plots / "link_bytes.png"))

    fig, ax = plt.subplots(figsize=(7, 4))
    for tables in sorted((run_dir / "traces").glob("*-tables.tsv")):
        rows = read_tsv(tables)
        node = tables.name[:-len("-tables.tsv")]
        ts = [float(r["Time"]) for r in rows]
        ax.plot(ts, [int(r["Pit"]) for r in rows], label=f"{node} PIT")
        ax.plot(ts, [int(r["PersistentFaces"]) for r in rows], ls="--",
                label=f"{node} persistent faces")
    ax.set_xlabel("time since the forwarder started (s)")
    ax.set_ylabel("entries")
    ax.set_title(f"{scenario.name}: ordinary and persistent PIT")
    ax.legend(fontsize=7)
    fig.tight_layout()
    made.append(_save(fig, plots / "pit_size.png"))
    return made


def _save(fig, path: Path) -> Path:
    fig.savefig(path, dpi=110)
    import matplotlib.pyplot as plt
    plt.close(fig)
    return path


# ---- timeline -----------------------------------------------------------------------------------

def timeline(run_dir: Path, scenario: Any) -> Path:
    """Chrome trace (chrome://tracing, Perfetto): per worker, compute and communication spans
    (gradient collect + waiting for the next parameters), on one wall clock."""
    events = []
    for pid, w in enumerate(scenario.worker_names, start=1):
        events.append({"name": "process_name", "ph": "M", "pid": pid,
                       "args": {"name": w}})
        for r in read_metrics(run_dir / "metrics" / f"{w}.jsonl"):
            if "compute_at" not in r or "ts" not in r:
                continue
            start = r["compute_at"] * 1e6
            end_compute = start + r.get("compute", 0) * 1e6
            events.append({"name": "compute", "cat": "compute", "ph": "X", "pid": pid,
                           "tid": 1, "ts": start, "dur": max(1.0, end_compute - start),
                           "args": {"step": r.get("step")}})
            events.append({"name": "communication", "cat": "net", "ph": "X", "pid": pid,
                           "tid": 1, "ts": end_compute,
                           "dur": max(1.0, r["ts"] * 1e6 - end_compute),
                           "args": {"step": r.get("step"), "version": r.get("version")}})
    path = run_dir / "timeline.json"
    path.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))
    return path
