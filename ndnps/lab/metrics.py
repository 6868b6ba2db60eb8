"""Metrics as JSON lines: one object per line, one line per version (PS) or step (worker),
plus a final ``"event": "end"`` summary.  Counters are cumulative inside the apps; each line
carries the change since the previous line (`Delta`).

Every line's `t` counts from one origin per run: the scenario runner passes its own
`time.monotonic()` at the start of the run in NDNPS_RUN_T0 to every child (CLOCK_MONOTONIC is
system-wide on Linux, network namespaces included), so a PS restarted mid-run continues the
same time series; an app run by hand counts from its own start."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import IO, Any, Callable

from ndnps.ndn.clock import RUN_T0_ENV, monotonic, run_origin, wall

__all__ = ["RUN_T0_ENV", "run_origin", "Delta", "MetricsWriter", "read_metrics"]


class Delta:
    """The change of a dict of cumulative counters since the previous `take`."""

    def __init__(self) -> None:
        self._last: dict[str, float] = {}

    def take(self, counters: dict[str, float]) -> dict[str, float]:
        out = {k: v - self._last.get(k, 0) for k, v in counters.items()}
        self._last = dict(counters)
        return out


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 6) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item"):                   # numpy scalars
        return _clean(value.item())
    return value


class MetricsWriter:
    """Writes to `path` (appending, line-buffered); no path: records are dropped. `static`
    fields (role, name, ...) go into every line, with `t`, seconds since the run's origin
    (`run_origin`), and `ts`, the wall clock (seconds since the epoch). Both follow the
    process's clock (ndnps.ndn.clock: a simulator's virtual time when substituted)."""

    def __init__(self, path: str | Path | None, clock: Callable[[], float] = monotonic,
                 **static: Any) -> None:
        self.static = static
        self._clock = clock
        self.start = run_origin(clock)
        self.lines = 0
        self._f: IO[str] | None = None
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._f = open(path, "a", buffering=1)

    def write(self, record: dict[str, Any]) -> None:
        self.lines += 1
        if self._f is None:
            return
        # t: seconds since the run's origin; ts: wall clock (ts - t: the wall clock at the origin)
        line = {**self.static, "t": self._clock() - self.start, "ts": wall(), **record}
        self._f.write(json.dumps(_clean(line), separators=(",", ":")) + "\n")

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """All records of a metrics file (for tests and the scenario runner). A last line without
    its newline is a record still being written by a live process: not a record yet."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.endswith("\n") and line.strip()]
