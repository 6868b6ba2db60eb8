"""The run's progress as it goes — each job's PS's version records, read as its metrics file
grows, in a live table (rich) or a line every few versions — and the final table."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .bottleneck import bottleneck_rows
from .config import Scenario
from .features import active
from .series import VersionSeries
from .values import fmt

if TYPE_CHECKING:
    from rich.live import Live


class JobFollower:
    """One PS's metrics file, read as it grows, as one version series."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.series = VersionSeries()
        self.printed: dict | None = None        # the version record last shown (--plain)
        self._pos = 0

    def read(self) -> None:
        try:
            with open(self.path) as f:
                f.seek(self._pos)
                chunk = f.read()
                complete = chunk[:chunk.rfind("\n") + 1]
                self._pos += len(complete)
        except FileNotFoundError:
            return
        for line in complete.splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            self.series.add(rec)


class Progress:
    """Live progress from each PS's metrics file (rich), or one line per few versions; a
    row per job."""

    def __init__(self, sc: Scenario, run_dir: Path, live: bool) -> None:
        self.sc = sc
        self.jobs = {job.who.ps: JobFollower(run_dir / "metrics" / f"{job.recorder}.jsonl")
                     for job in sc.all_jobs}
        self.path = self.jobs[sc.training.who.ps].path        # the first job's (faults)
        self.live = live and sys.stdout.isatty()
        self._live: Live | None = None
        self._last_print = 0.0

    def start(self) -> None:
        if self.live:
            from rich.live import Live
            self._live = Live(self._table(), refresh_per_second=4, transient=False)
            self._live.start()

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    @property
    def records(self) -> list[dict]:
        """The (first) PS's version records so far, one per version (a resumed PS's redone
        versions replace the killed PS's)."""
        return self.jobs[self.sc.training.who.ps].series.versions

    def update(self) -> None:
        for job in self.jobs.values():
            job.read()
        if self._live is not None:
            self._live.update(self._table())
        elif time.monotonic() - self._last_print > 2.0:
            for ps, job in self.jobs.items():           # each job that made a version since
                if job.series.versions and job.series.versions[-1] is not job.printed:
                    self._last_print = time.monotonic()
                    job.printed = job.series.versions[-1]
                    print(self._line(ps), flush=True)

    def _stats(self, ps: str) -> dict:
        recs = self.jobs[ps].series.versions
        last = recs[-1]
        acc = next((r["accuracy"] for r in reversed(recs) if r.get("accuracy") is not None), None)
        recent = recs[-11:]
        # only records on one time base: metrics written without the run's (an app started
        # by hand) count from each process's start, and a restart would give a negative time
        for i in range(len(recent) - 1, 0, -1):
            if recent[i]["t"] < recent[i - 1]["t"]:
                recent = recent[i:]
                break
        it = ((recent[-1]["t"] - recent[0]["t"]) / (len(recent) - 1)) if len(recent) > 1 else None
        job = self.sc.job_of(ps)
        # a pipeline's machines hold the data
        replicas = job.stages.machines or len(job.who.workers)
        return {"version": last["version"], "loss": last.get("loss"), "accuracy": acc,
                "iteration": it,
                "samples_per_s": (job.sgd.batch * replicas / it) if it else None}

    def _cells(self, ps: str) -> list[str]:
        s = self._stats(ps)
        cells = [str(s["version"]), fmt(s["loss"], ".4f"), fmt(s["accuracy"], ".4f"),
                 fmt(s["iteration"] and s["iteration"] * 1000, ".1f"),
                 fmt(s["samples_per_s"], ".0f")]
        return [ps, *cells] if self.sc.jobs else cells

    def _columns(self) -> list[str]:
        cols = ["version", "loss", "accuracy", "iteration ms", "samples/s"]
        return ["job", *cols] if self.sc.jobs else cols

    def _line(self, ps: str) -> str:
        return "  ".join(f"{label} {cell}" for label, cell in
                         zip(self._columns(), self._cells(ps)))

    def _table(self):
        from rich.table import Table
        jobs = f"{len(self.jobs)} jobs, " if self.sc.jobs else ""
        table = Table(title=f"ndnps {self.sc.name} — {jobs}{self.sc.training.update.mode}, "
                            f"{len(self.sc.worker_names)} workers, {self.sc.topology}")
        for col in self._columns():
            table.add_column(col, justify="right")
        for ps, job in self.jobs.items():
            if job.series.versions:
                table.add_row(*self._cells(ps))
        return table

    def final(self, summary: dict) -> None:
        rows = [("scenario", summary["scenario"]),
                ("mode", f"{summary['mode']} / {summary['push_mode'] or summary['system']}"),
                ("workers", summary["workers"]), ("final accuracy", summary["final_accuracy"]),
                ("versions", summary["versions"]), ("model bytes", summary["model_bytes"]),
                ("PS bytes out per version / model (steady)",
                 summary["ps_bytes_out_per_version_over_model"]),
                ("PS start-up bytes out", summary.get("ps_startup_bytes_out")),
                ("iteration (median, s)", summary["iteration_seconds"]),
                ("probes", summary["probes"]), ("retransmissions", summary["retransmissions"]),
                ("wall seconds", summary["wall_seconds"])]
        if summary.get("faults") or summary.get("workers_lost"):
            rows += [("faults injected", len([f for f in summary.get("faults", [])
                                              if "skipped" not in f])),
                     ("workers lost / rejoined",
                      f"{summary['workers_lost']} / {summary['workers_rejoined']}"),
                     ("versions with fewer gradients", summary["short_versions"]),
                     ("gradients collected again (wait)", summary["collects_redone"]),
                     ("PS restarts (resumed from version)",
                      f"{summary['ps_restarts']} ({summary['ps_resumed_from']})"),
                     ("forwarder reconnects", sum(summary["reconnects"].values()))]
        rows += bottleneck_rows(summary.get("bottleneck"))
        for feature in active(self.sc):     # what a method promises instead of the PS's rows
            rows = feature.rows(summary, rows)
        try:
            from rich.console import Console
            from rich.table import Table
            table = Table(title="summary", show_header=False)
            for k, v in rows:
                table.add_row(k, fmt(v, ".4f") if isinstance(v, float) else str(v))
            Console().print(table)
        except ImportError:                      # pragma: no cover - rich is a dependency
            for k, v in rows:
                print(f"{k:>36}: {v}")
        for note in summary.get("notes", []):
            print(f"note: {note}")
        for warning in summary.get("warnings", []):
            print(f"warning: {warning}")
