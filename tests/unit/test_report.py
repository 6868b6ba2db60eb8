"""The run's report from a small run directory written here: one series across a PS restart,
steady-state and start-up bytes, warnings, both directions of every link, faults on the time
plots and in the Chrome trace, the PS's and forwarders' lanes."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ndnps.lab import plots, report, spec
from ndnps.lab.marks import fault_marks
from ndnps.lab.series import iterations, ps_run, run_warnings
from ndnps.lab.traces import link_bytes

WALL = 1_700_000_000.0          # the wall clock at the run's start (whole seconds: exact sums)
MODEL_BYTES = 4000              # 1000 parameters


def write_jsonl(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({**r, "ts": WALL + r["t"]}) + "\n" for r in records))


def version(v: int, t: float, sent: int) -> dict:
    return {"version": v, "t": t, "bytes_sent": sent, "collect_wait": 0.05, "apply": 0.01,
            "push": 0.02, "loss": 1.0 / v, "accuracy": 0.5 + v / 100, "gradients": 1}


def ps_records() -> list[dict]:
    """A PS killed after version 6 and resumed from its checkpoint at version 4: each process
    sends its training content with its first version."""
    killed = [{"event": "start", "version": 0, "n_params": 1000, "workers": ["w1"], "t": 1.0}]
    killed += [version(v, 1.0 + 0.1 * v, {1: 50_000, 2: 9000}.get(v, 4000)) for v in range(1, 7)]
    resumed = [{"event": "resumed", "version": 4, "t": 3.0},
               {"event": "start", "version": 4, "n_params": 1000, "workers": ["w1"], "t": 3.1}]
    resumed += [version(v, 3.0 + 0.1 * (v - 4), {5: 40_000, 6: 8000}.get(v, 4000))
                for v in range(5, 31)]
    resumed.insert(9, {"event": "dropped", "worker": "w1", "version": 11, "t": 3.75})
    resumed.insert(13, {"event": "rejoined", "worker": "w1", "version": 14, "t": 4.05})
    return killed + resumed + [{"event": "end", "version": 30, "accuracy": 0.8, "t": 5.7}]


SUMMARY = {"faults": [{"kind": "kill", "role": "ps", "ps": "ps", "t": 1.65,
                       "restarted": {"process": "ps-r1", "version": 6, "t": 2.6}},
                      {"kind": "kill", "role": "worker", "worker": "w1", "at_version": 900,
                       "skipped": "the run ended before that version"}],
           "unplanned_exits": [{"who": "w1", "t": 3.7, "code": -9, "log_tail": "..."}]}


def write_tsv(path: Path, header: str, rows: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + "\n" + "".join(r.replace(" ", "\t") + "\n" for r in rows))


RATES = "Time Node FaceId Type Class Packets Bytes".replace(" ", "\t")
TABLES = "Time Node Pit PersistentEntries PersistentFaces Cs".replace(" ", "\t")


@pytest.fixture
def run_dir(tmp_path) -> Path:
    d = tmp_path / "run"
    write_jsonl(d / "metrics" / "ps.jsonl", ps_records())
    write_jsonl(d / "metrics" / "w1.jsonl", [
        {"step": 3, "version": 4, "compute": 0.02, "compute_at": WALL + 1.25, "t": 1.4},
        {"event": "resync", "from": 6, "to": 4, "t": 3.05}])
    traces = d / "traces"
    (traces / "fwd-status.json").parent.mkdir(parents=True)
    (traces / "fwd-status.json").write_text(json.dumps({"labels": {"1": "ps", "2": "w1"}}))
    write_tsv(traces / "fwd-rates.tsv", RATES, [
        "0.5 fwd 1 InData distribute 10 80000", "0.5 fwd 2 OutData distribute 10 81000",
        "0.5 fwd 2 InInterests mgmt 1 150",            # the runner's status requests
        "1.0 fwd 2 InData collect 4 16000",            # then nothing until 2.5
        "2.5 fwd 1 OutInterests collect 2 300"])
    write_tsv(traces / "fwd-tables.tsv", TABLES, ["0.5 fwd 3 1 1 10", "1.0 fwd 0 1 1 12"])
    return d


@pytest.fixture
def sc():
    return spec.load("sync-sgd", ["topology.workers=1"])


# ---- one series, steady state, warnings ----------------------------------------------------------

def test_a_resumed_ps_continues_the_series_and_the_later_record_wins():
    run = ps_run(ps_records())
    assert [r["version"] for r in run.versions] == list(range(1, 31))
    assert [r["t"] for r in run.versions][3:5] == [1.4, 3.1]      # v4 killed PS's, v5 resumed
    assert all(dt > 0 for _, dt in iterations(run.versions))
    # the first two versions of each PS process: start-up
    assert [(r["version"], r["t"]) for r in run.warmup] == [(1, 1.1), (2, 1.2), (5, 3.1),
                                                            (6, 3.2)]


def test_summary_reports_steady_state_bytes_and_start_up_apart(run_dir, sc):
    s = report.summarize(run_dir, sc, wall_seconds=6.0)
    # versions 3, 4 and 7..30: 4000 bytes each; start-up: both processes' first two versions
    assert s["ps_bytes_out_per_version"] == 4000
    assert s["ps_bytes_out_per_version_over_model"] == 4000 / MODEL_BYTES
    assert s["ps_steady_versions"] == 26
    assert s["ps_startup_bytes_out"] == 50_000 + 9000 + 40_000 + 8000
    assert s["iteration_seconds"] == pytest.approx(0.1)
    assert s["training_seconds"] == pytest.approx(5.6 - 1.0)
    assert s["warnings"] == []
    assert s["workers_lost"] == s["workers_rejoined"] == 1


def test_a_short_run_is_warned_about():
    records = [{"event": "start", "version": 0, "t": 1.0}] + [
        version(v, 1.0 + 0.03 * v, 4000) for v in range(1, 11)]
    warnings = run_warnings(ps_run(records))
    assert len(warnings) == 2
    assert "only 8 versions after the first 2" in warnings[0]
    assert "took 0.30 s" in warnings[1]
    long_enough = [{"event": "start", "version": 0, "t": 1.0}] + [
        version(v, 1.0 + 0.1 * v, 4000) for v in range(1, 23)]
    assert run_warnings(ps_run(long_enough)) == []


# ---- faults, links, forwarders' time --------------------------------------------------------------

def test_fault_marks_from_the_summary_and_the_ps_events():
    marks = fault_marks(SUMMARY, ps_records())
    assert [(m.t, m.kind, m.label) for m in marks] == [
        (1.65, "kill", "kill ps"), (2.6, "restart", "restart ps-r1"),
        (3.0, "resumed", "PS resumed at v4"), (3.7, "exit", "w1 exited (-9)"),
        (3.75, "dropped", "w1 dropped"), (4.05, "rejoined", "w1 rejoined")]
    # summary.json absent (a failed run), or from before unplanned exits were recorded
    assert [m.kind for m in fault_marks({}, ps_records())] == ["resumed", "dropped",
                                                                    "rejoined"]
    older = {"faults": SUMMARY["faults"]}
    assert [m.kind for m in fault_marks(older, [])] == ["kill", "restart"]


def test_both_directions_of_every_link(tmp_path):
    traces = tmp_path / "traces"
    (traces).mkdir()
    (traces / "root-status.json").write_text(json.dumps({"labels": {"1": "leaf1", "2": "ps"}}))
    (traces / "leaf1-status.json").write_text(json.dumps({"labels": {"1": "root", "2": "w1"}}))
    write_tsv(traces / "root-rates.tsv", RATES, [
        "0.5 root 1 OutData distribute 1 100", "0.5 root 1 InData collect 1 90",
        "0.5 root 2 OutInterests collect 1 10", "0.5 root 2 InData distribute 1 20",
        "0.5 root 2 InInterests mgmt 1 7", "0.5 root 9 OutData other 1 5"])
    write_tsv(traces / "leaf1-rates.tsv", RATES, [
        "0.5 leaf1 1 OutData collect 1 300", "0.5 leaf1 1 InData distribute 1 99",
        "0.5 leaf1 2 OutData distribute 1 40", "0.5 leaf1 2 InData collect 1 50"])
    # a link between forwarders counted by its sender; an app's direction by its forwarder
    assert link_bytes(tmp_path) == {
        "leaf1->root": 300, "leaf1->w1": 40, "ps->root": 20, "root->face9": 5,
        "root->leaf1": 100, "root->ps": 10, "w1->leaf1": 50}


# ---- plots and timeline ---------------------------------------------------------------------------

@pytest.fixture
def figures(monkeypatch):
    """The figures plot_all makes, by file name, before they are written."""
    import matplotlib.pyplot as plt
    made: dict = {}
    monkeypatch.setattr(plots, "save", lambda fig, path: made.setdefault(path.name, fig)
                        and path)
    yield made
    plt.close("all")


def legend(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes if ax.get_legend()
            for t in ax.get_legend().get_texts()]


def test_plots_mark_the_faults_on_one_time_axis(run_dir, sc, figures):
    (run_dir / "summary.json").write_text(json.dumps(SUMMARY))
    report.plot_all(run_dir, sc)
    assert set(figures) == {"loss_accuracy.png", "iteration_time.png", "link_bytes.png",
                            "pit_size.png"}
    loss = figures["loss_accuracy.png"]
    assert legend(loss) == ["training loss", "test accuracy", "kill", "restart", "PS resumed",
                            "unplanned exit", "worker dropped", "worker rejoined"]
    t = list(loss.axes[0].get_lines()[0].get_xdata())
    assert t == sorted(t) and t[0] == 1.1
    marked = {line.get_xdata()[0] for line in loss.axes[0].get_lines()[1:]}
    assert marked == {1.65, 2.6, 3.0, 3.7, 3.75, 4.05}
    iteration = figures["iteration_time.png"].axes[0].get_lines()[0].get_ydata()
    assert min(iteration) > 0
    assert "kill" in legend(figures["iteration_time.png"])
    # the forwarder's tables on the run's axis (its Time counts from the run's start)
    assert list(figures["pit_size.png"].axes[0].get_lines()[0].get_xdata()) == \
        pytest.approx([0.5, 1.0])
    figures["link_bytes.png"].canvas.draw()
    bars = [t.get_text() for t in figures["link_bytes.png"].axes[0].get_yticklabels()]
    assert sorted(bars) == ["fwd → ps", "fwd → w1", "ps → fwd", "w1 → fwd"]


def test_plots_without_a_summary(run_dir, sc, figures):
    report.plot_all(run_dir, sc)           # summary.json is written after a failed run's exit
    assert "kill" not in legend(figures["loss_accuracy.png"])
    assert "PS resumed" in legend(figures["loss_accuracy.png"])


def test_timeline_has_ps_worker_and_forwarder_lanes_and_the_faults(run_dir, sc):
    (run_dir / "summary.json").write_text(json.dumps(SUMMARY))
    events = json.loads(report.timeline(run_dir, sc).read_text())["traceEvents"]
    lanes = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert lanes == {1: "PS ps", 2: "worker w1", 3: "forwarder fwd"}

    def us(seconds: float) -> float:
        return pytest.approx(seconds * 1e6)
    # version 3 (t 1.3): collect wait, apply, push back to back, ending at its record
    v3 = {e["name"]: (e["ts"], e["dur"]) for e in events
          if e["ph"] == "X" and e["pid"] == 1 and e["args"]["version"] == 3}
    assert v3 == {"collect wait": (us(1.22), us(0.05)), "apply": (us(1.27), us(0.01)),
                  "push": (us(1.28), us(0.02))}
    ps_spans = [e for e in events if e["ph"] == "X" and e["pid"] == 1]
    assert len(ps_spans) == 3 * 32          # the killed PS's versions 5 and 6 happened too
    worker = {e["name"]: (e["ts"], e["dur"]) for e in events if e["ph"] == "X" and e["pid"] == 2}
    assert worker == {"compute": (us(1.25), us(0.02)), "communication": (us(1.27), us(0.13))}

    instants = {(e["name"], e["s"], e["pid"]): e["ts"] for e in events if e["ph"] == "i"}
    assert instants == {("kill ps", "g", 1): us(1.65), ("restart ps-r1", "g", 1): us(2.6),
                        ("w1 exited (-9)", "g", 1): us(3.7),
                        ("PS resumed at v4", "p", 1): us(3.0), ("w1 dropped", "p", 1): us(3.75),
                        ("w1 rejoined", "p", 1): us(4.05), ("resync", "p", 2): us(3.05)}

    # 0.5 s intervals, drawn from their start, back to 0 over the intervals without rows;
    # management traffic left out
    packets = [(e["ts"], e["args"]) for e in events if e["name"] == "packets/s"]
    assert packets == [(us(0.0), {"in": 20.0, "out": 20.0}), (us(0.5), {"in": 8.0, "out": 0.0}),
                       (us(1.0), {"in": 0, "out": 0}), (us(2.0), {"in": 0.0, "out": 4.0}),
                       (us(2.5), {"in": 0, "out": 0})]
    tables = [(e["ts"], e["args"]["PIT"]) for e in events if e["name"] == "tables"]
    assert tables == [(us(0.5), 3), (us(1.0), 0)]
