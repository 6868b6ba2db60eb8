"""Faults driven by a scenario's [faults] table, through the runner exactly as a user runs it
(docs/faults.md): a worker killed and restarted, the PS killed and resumed from its checkpoint, the
forwarder killed and restarted, and chaos.toml shortened (a worker kill, a PS kill and a forwarder
kill under 3% loss).

Each test reads back what the run recorded (summary.json, the PS's metrics, model.npz) and
checks it against the single-process reference of the same training (bench/fault_runs.py's
`reference`): a sync run that loses nothing and applies nothing twice ends with the
reference's parameters. Every process is stopped whatever happens: the runner on SIGTERM
stops its children; any of them left (the runner killed) is killed by pid.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from bench.fault_cases import CHAOS_SHORT
from bench.fault_runs import reference, version_ledger
from ndnps.lab.metrics import read_metrics
from ndnps.lab.process import ManagedProcess

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def run_dir():
    # unix socket paths stay short (108 bytes): the runner puts them in <run>/sockets/
    base = Path(tempfile.mkdtemp(prefix="ndnps-fr-"))
    yield base / "run"
    _kill_leftovers(base)
    if not os.environ.get("NDNPS_KEEP_TEST_DIRS"):
        shutil.rmtree(base, ignore_errors=True)


def _kill_leftovers(base: Path) -> None:
    """Children of a runner that could not clean up (it is started in its own session, they
    in theirs): every process whose command line names this test's directory, by pid."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().decode(errors="replace")
        except OSError:
            continue
        if str(base) in cmd:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass


def run(out: Path, scenario: str, *sets: str, timeout: float) -> tuple[int, str, dict]:
    """`python -m ndnps.scenario SCENARIO --out OUT --plain --set ...`; (exit code, its
    output, summary.json). Past `timeout` the runner gets SIGTERM (it stops its children)."""
    argv = [sys.executable, "-m", "ndnps.scenario", scenario, "--out", str(out), "--plain"]
    for s in sets:
        argv += ["--set", s]
    log = out.parent / "runner.log"
    proc = ManagedProcess("runner", argv, log, cwd=str(ROOT))
    try:
        rc = proc.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        rc = None
    finally:
        proc.stop(grace=30.0)
    text = log.read_text(errors="replace")
    assert rc == 0, f"runner exit {rc}:\n{text[-3000:]}"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["unplanned_exits"] == [], summary["unplanned_exits"]    # only [faults]' kills
    return rc, text, summary


def assert_reference_parameters(out: Path) -> dict:
    """Every version applied once (redone only after a PS restart) and the final parameters
    those of the single-process reference: nothing lost, nothing applied twice."""
    ref = reference(out)
    with np.load(out / "model.npz") as z:
        for k, v in ref["params"].items():
            np.testing.assert_allclose(z[k], v, atol=1e-5, err_msg=k)
    return ref


def incarnations(out: Path) -> list[list[int]]:
    """The versions each PS process applied, in order (a restarted PS appends to the same
    metrics file, after its own start record)."""
    runs: list[list[int]] = []
    for r in read_metrics(out / "metrics" / "ps.jsonl"):
        if r.get("event") == "start":
            runs.append([])
        elif "collect_wait" in r and runs:
            runs[-1].append(r["version"])
    return runs


def ledger(out: Path) -> dict:
    """bench/fault_runs.py's reading of the PS's records (4 workers in every scenario here)."""
    return version_ledger(read_metrics(out / "metrics" / "ps.jsonl"), workers=4)


@pytest.mark.timeout(200)
def test_worker_killed_by_the_runner_is_restarted_and_rejoins(run_dir):
    """scenarios/worker-killed.toml: the runner kills w2 at version 40 and restarts it; the
    summary says what was injected and what the PS saw."""
    out = run_dir
    # 600 versions: time for the restarted process to start and rejoin on a loaded machine
    _, text, summary = run(out, "worker-killed", "training.epochs=60", timeout=150)
    [fault] = summary["faults"]
    assert fault["worker"] == "w2" and fault["version"] >= 40
    assert fault["restarted"]["process"] == "w2-r1"
    assert summary["exit_codes"]["w2"] == -9 and summary["exit_codes"]["w2-r1"] == 0
    assert summary["workers_lost"] == summary["workers_rejoined"] == 1
    assert summary["workers_lost_at_end"] == [] and summary["short_versions"] > 0
    [versions] = incarnations(out)
    assert versions == list(range(1, len(versions) + 1)) and versions[-1] == summary["versions"]
    assert ledger(out)["short"] == summary["short_versions"]
    assert summary["final_accuracy"] >= reference(out)["accuracy"] - 0.03
    assert (out / "logs" / "w2-r1.log").stat().st_size > 0
    assert "workers lost / rejoined" in text


@pytest.mark.timeout(240)
def test_ps_killed_by_the_runner_resumes_from_its_checkpoint(run_dir):
    out = run_dir
    _, text, summary = run(out, "ps-killed", "training.epochs=10", timeout=180)
    [fault] = summary["faults"]
    assert fault["role"] == "ps" and fault["version"] >= 45
    assert fault["restarted"]["process"] == "ps-r1"
    codes = summary["exit_codes"]
    assert codes["ps"] == -9 and codes["ps-r1"] == 0
    assert all(codes[f"w{i}"] == 0 for i in range(1, 5))
    assert summary["ps_restarts"] == 1 and summary["workers_lost"] == 0
    resumed = summary["ps_resumed_from"]
    first, second = incarnations(out)
    died_at = first[-1]
    # checkpoints every 10 versions: the newest one not after the version it died at
    assert resumed % 10 == 0 and 40 <= resumed <= died_at and died_at >= 45
    # each version once, in order, then the ones after the checkpoint once more
    assert first == list(range(1, died_at + 1))
    assert second == list(range(resumed + 1, 101))
    led = ledger(out)
    assert led["redone"] == led["redone_explained"] == died_at - resumed
    # the workers went back to the checkpoint's version, once each
    for w, end in summary["workers_end"].items():
        assert end["code"] == 0, w
        if died_at > resumed:
            assert end["resyncs"] == 1 and end["versions_rolled_back"] >= died_at - resumed, w
    ref = assert_reference_parameters(out)
    assert summary["final_accuracy"] == pytest.approx(ref["accuracy"], abs=1e-6)
    assert "PS restarts (resumed from version)" in text
    # one time base per run: the resumed PS's records go on from the killed one's
    t = [r["t"] for r in read_metrics(out / "metrics" / "ps.jsonl")]
    assert t == sorted(t) and t[-1] > fault["restarted"]["t"]
    marks = {e["name"] for e in json.loads((out / "timeline.json").read_text())["traceEvents"]
             if e["ph"] == "i"}
    assert {"kill ps", "restart ps-r1", f"PS resumed at v{resumed}"} <= marks


@pytest.mark.timeout(240)
def test_forwarder_killed_by_the_runner_apps_reconnect_and_finish(run_dir):
    out = run_dir
    _, text, summary = run(out, "forwarder-killed", "training.epochs=10", timeout=180)
    [fault] = summary["faults"]
    assert fault["role"] == "forwarder" and fault["forwarder"] == "fwd"
    assert fault["version"] >= 40 and fault["restarted"]["process"] == "fwd-fwd-r1"
    codes = summary["exit_codes"]
    assert codes["fwd-fwd"] == -9 and codes["fwd-fwd-r1"] == 0
    assert all(codes[n] == 0 for n in ("ps", "w1", "w2", "w3", "w4"))
    # the PS and every worker reconnected once, re-registered; every worker inserted again
    assert summary["reconnects"] == {n: 1 for n in ("ps", "w1", "w2", "w3", "w4")}
    assert all(e["reinserts"] == 1 for e in summary["workers_end"].values())
    assert summary["workers_lost"] == 0 and summary["ps_restarts"] == 0
    # the killed forwarder's traces are kept beside the new one's (what it flushed before
    # SIGKILL: maybe nothing yet but the header, at a trace interval of its own)
    assert (out / "traces" / "fwd-r0-rates.tsv").read_text().startswith("Time")
    rows = (out / "traces" / "fwd-rates.tsv").read_text().splitlines()[1:]
    assert any(r.split("\t")[4] == "collect" for r in rows)
    # the restarted forwarder's Time counts from the run's start, as the apps' metrics do
    (kill,) = [f for f in summary["faults"] if f["role"] == "forwarder"]
    assert float(rows[0].split("\t")[0]) > kill["restarted"]["t"]
    [versions] = incarnations(out)
    assert versions == list(range(1, 101))           # each once, in order
    assert ledger(out)["short"] == 0                 # each with every gradient
    ref = assert_reference_parameters(out)
    assert summary["final_accuracy"] == pytest.approx(ref["accuracy"], abs=1e-6)


@pytest.mark.timeout(420)
def test_chaos_shortened_survives_worker_ps_and_forwarder_kills(run_dir):
    """chaos.toml (3% loss, on_worker_loss = continue) on a 400-version run: w3 killed at 29
    and w4 at 61 (seed 7, each restarted 1.5 s later), the PS at 50 (checkpoint every 10),
    the forwarder at 85."""
    out = run_dir
    _, text, summary = run(out, "chaos", *CHAOS_SHORT, timeout=360)
    faults = summary["faults"]
    assert [(f["role"], f[f["role"]]) for f in faults] == [
        ("worker", "w3"), ("ps", "ps"), ("worker", "w4"), ("forwarder", "fwd")]
    assert all("skipped" not in f and "restarted" in f for f in faults), faults
    codes = summary["exit_codes"]
    for killed, again in (("w3", "w3-r1"), ("ps", "ps-r1"), ("w4", "w4-r1"),
                          ("fwd-fwd", "fwd-fwd-r1")):
        assert codes[killed] == -9 and codes[again] == 0, codes
    assert codes["w1"] == 0 and codes["w2"] == 0
    # the PS resumed once from a checkpoint at or before the version it was killed at
    assert summary["ps_restarts"] == 1
    resumed = summary["ps_resumed_from"]
    assert resumed % 10 == 0 and resumed <= faults[1]["version"] + 1
    # killed workers came back: to the PS that lost them (silent for worker_timeout = 5 s),
    # or — when the next kill (PS at 50, forwarder at 85) lands within those 5 s, as it does
    # on a fast run — to a PS that assigned them their task afresh; either way every lost
    # worker rejoined, nobody is missing at the end, and each restarted incarnation trained
    # to the last version
    assert summary["workers_rejoined"] == summary["workers_lost"]
    for w in ("w3", "w4"):
        end = summary["workers_end"][w]
        assert end["version"] == 400 and end["gradients_sent"] > 0, (w, end)
    assert summary["workers_lost_at_end"] == []
    # every app running (and connected) when the forwarder died reconnected to the new one:
    # w1, w2, and a restarted PS or worker whose restart came well before the forwarder's
    # kill — on a fast run w4 (restarted 1.5 s after version 61) may come up only once the
    # forwarder was killed, and then simply connects; and on a starved host the runner may
    # see the versions only once they are past every trigger and fire the kills together
    # (all at one version): the PS restarted after the forwarder's kill connects afresh too
    fwd_kill = faults[3]["t"]
    settled = {f[f["role"]] for f in faults[:3] if f["restarted"]["t"] < fwd_kill - 3.0}
    assert {"w1", "w2"} | settled <= set(summary["reconnects"]) <= \
        {"ps", "w1", "w2", "w3", "w4"}, (faults, summary["reconnects"])
    led = ledger(out)
    assert led["missing"] == [] and led["last"] == 400 and not led["applied_thrice"]
    assert led["redone"] == led["redone_explained"]
    ends = [summary["ps_end"], *summary["workers_end"].values()]
    assert sum(e.get("rejected", 0) + e.get("malformed", 0) for e in ends) == 0
    ref = reference(out)
    assert summary["final_accuracy"] >= ref["accuracy"] - 0.03
