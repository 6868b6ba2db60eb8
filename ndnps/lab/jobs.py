"""Several trainings at once on one topology ([[jobs]], docs/experiments.md): each job's figures
in summary.json's `jobs`, how they shared the network in `sharing`, and their rows in the final
table. ([[jobs]] itself is read by ndnps.lab.spec: every other table's checks see the jobs.)"""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .bottleneck import drop_rows
from .feature import Feature, Rows
from .series import PsRun, job_bytes, job_summary, ps_series
from .values import fmt

if TYPE_CHECKING:
    from .config import Scenario


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


def job_rows(summary: dict) -> list[tuple[str, object]]:
    """The final table of a run with several jobs: each job's outcome, then how they shared
    the network (`sharing`) and the bottleneck's drops."""
    rows: list[tuple[str, object]] = []
    shares = (summary.get("sharing") or {}).get("jobs") or {}
    for job in summary["jobs"]:
        share = shares.get(job["ps"], {})
        rows.append((f"job {job['ps']}: accuracy, versions, iteration (s), share",
                     f"{fmt(job['final_accuracy'], '.4f')}, {job['versions']}, "
                     f"{fmt(job['iteration_seconds'], '.3f')}, "
                     f"{fmt(share.get('wire_mbps'), '.1f')} Mbit/s = "
                     f"{fmt(share.get('over_equal_share'), '.2f')} of equal"))
    sharing = summary.get("sharing") or {}
    rows.append(("Jain's index (overlap, s)", f"{fmt(sharing.get('jain_index'), '.4f')} "
                 f"({fmt(sharing.get('overlap_seconds'), '.1f')})"))
    return rows + drop_rows(summary.get("bottleneck"))


class Jobs(Feature):
    """[[jobs]]: the jobs' own figures, and how fairly they shared the network."""
    name = "jobs"

    def active(self, sc: "Scenario") -> bool:
        return bool(sc.jobs)

    def document(self, sc: "Scenario", doc: dict[str, Any]) -> None:
        doc.pop("training")
        doc["jobs"] = [{**job.as_table(), **({"start": sc.job_start[job.who.ps]}
                                            if job.who.ps in sc.job_start else {})}
                       for job in sc.jobs]

    def summarize(self, run_dir: Path, sc: "Scenario", summary: dict[str, Any],
                  wall_seconds: float) -> None:
        runs = {job.who.ps: ps_series(run_dir, job.recorder) for job in sc.jobs}
        summary["jobs"] = [{"ps": job.who.ps, **job_summary(run_dir, job, runs[job.who.ps])}
                           for job in sc.jobs]
        sharing = summary["sharing"] = sharing_summary(
            runs, {job.who.ps: wire_bytes_per_version(sc.system, job_bytes(runs[job.who.ps]),
                                                  len(job.who.workers)) for job in sc.jobs})
        if sc.topology == "bottleneck" and sharing.get("jobs"):
            # the jobs' wire rates together over one direction's rate (a duplex link: up to 2)
            sharing["link_use"] = sum(j["wire_mbps"] for j in sharing["jobs"].values()) \
                / sc.bottleneck.rate_mbps

    def rows(self, summary: dict[str, Any], rows: Rows) -> Rows:
        return [("scenario", summary["scenario"]), *job_rows(summary),
                ("wall seconds", summary["wall_seconds"])]
