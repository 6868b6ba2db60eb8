"""What a scenario run leaves behind, computed from the apps' metrics (JSON lines) and the
forwarders' traces (TSV): summary.json (here), plots (ndnps.lab.plots) and a Chrome-trace
timeline (ndnps.lab.timeline).

One time axis: seconds since the run started. The apps' metrics (`t`, see ndnps.lab.metrics)
and the forwarders' traces (`Time`, ndnps.ndn.clock.run_origin) count from it. Faults — kills and
restarts by [faults], unplanned exits, workers dropped and rejoined, PS resumptions — are
marked on the time plots and are instant events of the timeline (ndnps.lab.marks)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .features import active
from .plots import plot_all
from .series import job_summary, ps_series
from .timeline import timeline

__all__ = ["plot_all", "summarize", "timeline"]


def summarize(run_dir: Path, scenario: Any, wall_seconds: float,
              extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """summary.json: the scenario, then the training's figures — the first job's at the top
    level (a one-job run's whole) — then each feature's block (ndnps.lab.feature: `summarize`:
    several jobs' `jobs` and `sharing`, a pipeline's, a PS-less run's, `share`, `ina`)."""
    sc = scenario
    summary = {
        "scenario": sc.name,
        "system": sc.system,
        "mode": sc.training.update.mode,
        "push_mode": sc.training.push.push_mode if sc.system == "ndnps" else None,
        "topology": sc.topology,
        "netns": sc.netns,
        **job_summary(run_dir, sc.training, ps_series(run_dir, sc.training.recorder)),
        "wall_seconds": round(wall_seconds, 3),
        "links": {"loss": sc.links.loss, "delay_ms": sc.links.delay_ms,
                  "jitter_ms": sc.links.jitter_ms, "rate_mbps": sc.links.rate_mbps,
                  "reliability": sc.links.reliability},
    }
    for feature in active(sc):
        feature.summarize(run_dir, sc, summary, wall_seconds)
    if extra:
        summary.update(extra)
    return summary
