"""One time base per run: every process's metrics count from the runner's start (NDNPS_RUN_T0),
so a PS restarted mid-run continues the series; the live progress never shows a negative
iteration time."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ndnps.lab import runner as lab_runner
from ndnps.lab import spec
from ndnps.lab.progress import Progress
from ndnps.lab.metrics import RUN_T0_ENV, MetricsWriter, read_metrics


def test_metrics_count_from_the_runs_origin_across_processes(tmp_path, monkeypatch):
    monkeypatch.setenv(RUN_T0_ENV, "100.0")
    now = [103.5]
    path = tmp_path / "ps.jsonl"
    first = MetricsWriter(path, clock=lambda: now[0], role="ps")
    first.write({"version": 1})
    now[0] = 110.0                         # killed; the restarted PS appends to the same file
    MetricsWriter(path, clock=lambda: now[0], role="ps").write({"version": 2})
    first.close()
    assert [(r["version"], r["t"]) for r in read_metrics(path)] == [(1, 3.5), (2, 10.0)]


@pytest.mark.parametrize("value", [None, "not a number", "nan"])
def test_without_a_run_origin_metrics_count_from_the_writers_start(tmp_path, monkeypatch,
                                                                     value):
    if value is None:
        monkeypatch.delenv(RUN_T0_ENV, raising=False)     # an app run by hand
    else:
        monkeypatch.setenv(RUN_T0_ENV, value)
    now = [50.0]
    w = MetricsWriter(tmp_path / "m.jsonl", clock=lambda: now[0])
    now[0] = 52.25
    w.write({"version": 1})
    w.close()
    assert read_metrics(tmp_path / "m.jsonl")[0]["t"] == 2.25


def test_the_runner_gives_every_child_its_start_as_the_origin(tmp_path, monkeypatch):
    spawned = []

    class FakeProcess:
        def __init__(self, name, argv, log_path, env=None):
            spawned.append((name, env))

    monkeypatch.setattr(lab_runner, "ManagedProcess", FakeProcess)
    runner = lab_runner.Runner(spec.load("sync-sgd"), tmp_path)
    runner.spawn("fwd-fwd", ["forwarder"])
    runner.spawn("ps-r1", ["ps"], {"NDN_CLIENT_TRANSPORT": "unix:///x.sock"})
    origin = repr(runner.t0)
    assert spawned == [("fwd-fwd", {RUN_T0_ENV: origin}),
                       ("ps-r1", {"NDN_CLIENT_TRANSPORT": "unix:///x.sock", RUN_T0_ENV: origin})]
    assert float(origin) == runner.t0


def _progress(tmp_path: Path, records: list[dict]) -> Progress:
    sc = spec.load("sync-sgd", ["topology.workers=1"])
    path = tmp_path / "metrics" / f"{sc.training.who.ps}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    progress = Progress(sc, tmp_path, live=False)
    progress.update()
    return progress


def _killed_and_resumed(resumed_t0: float) -> list[dict]:
    """A PS killed after version 6, resumed from its checkpoint at version 4; the resumed
    PS's clock starts at `resumed_t0` (0: its own start, as before the run's time base)."""
    killed = [{"event": "start", "version": 0, "t": 1.0}] + [
        {"version": v, "t": 1.0 + 0.1 * v, "loss": 1.0 / v} for v in range(1, 7)]
    resumed = [{"event": "resumed", "version": 4, "t": resumed_t0},
               {"event": "start", "version": 4, "t": resumed_t0 + 0.1}] + [
        {"version": v, "t": resumed_t0 + 0.1 * v, "loss": 1.0 / v} for v in range(5, 9)]
    return killed + resumed


def test_progress_takes_the_resumed_ps_versions_over_the_killed_ones(tmp_path, capsys):
    progress = _progress(tmp_path, _killed_and_resumed(resumed_t0=3.0))
    assert [r["version"] for r in progress.records] == list(range(1, 9))
    assert [r["t"] for r in progress.records][-4:] == [3.5, 3.6, 3.7, 3.8]
    stats = progress._stats(progress.sc.training.who.ps)
    assert stats["version"] == 8
    # versions 1..8 from t 1.1 to 3.8: the restart's pause is in the mean, never negative
    assert stats["iteration"] == pytest.approx((3.8 - 1.1) / 7)


def test_progress_never_shows_a_negative_iteration_time(tmp_path, capsys):
    """Metrics without the run's time base (an app started by hand, a file from before):
    the resumed PS's clock restarts at 0."""
    progress = _progress(tmp_path, _killed_and_resumed(resumed_t0=0.0))
    stats = progress._stats(progress.sc.training.who.ps)
    assert stats["iteration"] == pytest.approx(0.1)
    assert stats["samples_per_s"] > 0
    assert "iteration ms -" not in progress._line(progress.sc.training.who.ps)
