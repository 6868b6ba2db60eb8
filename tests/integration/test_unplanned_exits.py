"""Every role killed from outside the runner (kill -9 by pid, as a user or the OOM killer does),
each handled by its own role's policy and recorded under its true role: a PS without a
checkpoint fails the run, a ring peer goes to on_peer_loss (the others re-form), a pipeline
stage stops the pipeline (exit 3, naming the stage), the share controller leaves the rounds to
the ordinary way. A worker and a forwarder killed the same way: tests/integration/test_scenario.py."""
from __future__ import annotations

import json
import os
import signal
import sys
import tomllib
from pathlib import Path

import pytest

from ndnps.lab.metrics import read_metrics
from ndnps.lab.process import ManagedProcess, wait_until
from ndnps.lab.tomltext import to_toml
from tests.support.procfs import processes_naming

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def _version(path: Path) -> int:
    try:
        return max((r.get("version", 0) for r in read_metrics(path)), default=0)
    except (OSError, ValueError):
        return 0


def kill_mid_run(tmp_path: Path, scenario: str, sets: list[str], recorder: str,
                 victim: list[str], at_version: int = 3,
                 timeout: float = 120) -> tuple[int, str, dict]:
    """Run `scenario`; once `recorder`'s metrics reach `at_version`, SIGKILL the one process
    whose argv holds the `victim` words in a row; (runner's exit code, its output, summary)."""
    out = tmp_path / "run"
    args = [a for s in sets for a in ("--set", s)]
    runner = ManagedProcess("runner", [sys.executable, "-m", "ndnps.scenario", scenario,
                                       "--plain", "--out", str(out), *args],
                            tmp_path / "runner.log", env={"PYTHONPATH": str(ROOT)})
    try:
        wait_until(lambda: _version(out / "metrics" / f"{recorder}.jsonl") >= at_version, 90,
                   runner, f"{recorder} at version {at_version}")
        words = " ".join(victim)
        (pid,) = [pid for pid, cmd in processes_naming(str(out)) if words in cmd]
        os.kill(pid, signal.SIGKILL)
        code = runner.wait(timeout)
        summary = json.loads((out / "summary.json").read_text())
        assert processes_naming(str(out)) == []       # nothing of the run outlives it
        return code, runner.tail(400), summary
    finally:
        runner.stop()


@pytest.mark.timeout(150)
def test_a_ps_without_a_checkpoint_killed_fails_the_run_as_the_ps(tmp_path):
    code, text, s = kill_mid_run(tmp_path, "sync-sgd", ["training.epochs=200"], "ps",
                                 ["-m", "ndnps.apps.ps"])
    assert code == 1 and s["ok"] is False, text[-2000:]
    (rec,) = s["unplanned_exits"]
    assert (rec["who"], rec["role"], rec["how"]) == ("ps", "ps", "SIGKILL")
    assert "no checkpoint to resume from" in rec["action"]


@pytest.mark.timeout(200)
def test_a_ring_peer_killed_goes_to_on_peer_loss_and_the_others_re_form(tmp_path):
    code, text, s = kill_mid_run(
        tmp_path, "ring", ["topology.workers=4", "training.epochs=40",
                           "training.worker_timeout=2.0", 'training.on_peer_loss="re-form"'],
        "w1", ["ndnps.apps.peer", "--name", "w3"], timeout=150)
    assert code == 0 and s["ok"] is True, text[-3000:]
    (rec,) = s["unplanned_exits"]
    assert (rec["who"], rec["role"], rec["how"]) == ("w3", "peer", "SIGKILL")
    assert "re-form" in rec["action"] and "checkpoint" not in rec["action"]
    assert "w3 exited unplanned (SIGKILL)" in text
    (reformed,) = s["reformed"]
    assert reformed["lost"] == ["w3"] and reformed["peers"] == ["w1", "w2", "w4"]
    assert s["parameters_identical"] is True


@pytest.mark.timeout(200)
def test_a_pipeline_stage_killed_stops_the_run_with_exit_3_naming_the_stage(tmp_path):
    code, text, s = kill_mid_run(
        tmp_path, "hetero", ["training.hidden=[64,64,64,64,64]", "pipeline.device_scale=2.0",
                             "training.epochs=50", "training.worker_timeout=6.0"],
        "m1-fast", ["--name", "m2-mid"], timeout=150)
    assert code == 3 and s["ok"] is False, text[-3000:]
    (rec,) = s["unplanned_exits"]
    assert (rec["who"], rec["role"], rec["how"]) == ("m2-mid", "stage", "SIGKILL")
    assert "the pipeline stops" in rec["action"] and "stage m2-mid" in rec["action"]
    first = text[text.index("run stopped:"):].splitlines()[0]
    assert "the training cannot go on" in first and "m2-mid (SIGKILL, unplanned)" in first


@pytest.mark.timeout(240)
def test_the_share_controller_killed_leaves_rounds_to_the_ordinary_way(tmp_path):
    with open(ROOT / "scenarios" / "multi-job.toml", "rb") as f:
        doc = tomllib.load(f)
    for job in doc["jobs"]:
        job["epochs"] = 1
        job.pop("target_accuracy", None)
    # the rounds after the kill each wait one ask's lifetime (0.5 s), the first share_patience
    doc["training"]["share_patience"] = 1.0
    path = tmp_path / "multi.toml"
    path.write_text(to_toml(doc))
    code, text, s = kill_mid_run(tmp_path, str(path), [], "big", ["-m", "ndnps.apps.controller"],
                                 at_version=2, timeout=200)
    assert code == 0 and s["ok"] is True, text[-3000:]
    (rec,) = s["unplanned_exits"]
    assert (rec["role"], rec["how"]) == ("controller", "SIGKILL")
    assert "ordinary way" in rec["action"]
