"""Faults on the run's time axis — kills and restarts by [faults], unplanned exits, workers
dropped and rejoined, PS resumptions — as the plots and the timeline mark them."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


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
