"""In-network aggregation with real processes (issue 24): the `ina` tree scenario sums in the
network (PS ingress about one model a version, accuracy as without), a pool too small falls
back and stays correct, a forged contribution is rejected at the aggregator and counted, and
an aggregator killed mid-run makes the plan fall back without wedging the job."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from forwarder.status import fetch_status
from ndnps.lab import ina
from ndnps.protocol.config import TrainingConfig

from tests.integration.test_training import (KEY, WORKERS, finish, reference_accuracy,
                                             start_workers, worker_end)

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
# a model large enough that the workers' small header segments are noise in the PS's ingress
BIGGER = ["--set", "training.hidden=[512]", "--set", "training.epochs=2", "--plain"]


def run(out: Path, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "ndnps.scenario", "ina", *args, "--out",
                           str(out)], capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads((out / "summary.json").read_text())


@pytest.mark.timeout(600)
def test_the_ina_tree_sums_in_the_network_and_trains_as_without(tmp_path):
    s = run(tmp_path / "ina", *BIGGER)
    i = s["ina"]
    assert i["aggregators"] and set(i["aggregators_configured"]) == {"root", "leaf1", "leaf2"}
    assert i["segments_fallback"] == 0 and i["segments_aggregated"] > 0
    assert i["forwarders"]["leaf1"]["answered"] > 0 and i["forwarders"]["leaf2"]["answered"] > 0
    assert i["forwarders"]["root"]["answered"] >= i["segments_aggregated"]
    assert s["ps_bytes_in_per_version_over_model"] < 1.1        # 8 workers, one sum
    # the same run without [ina]: 8 gradients reach the PS, the same accuracy
    doc = (ROOT / "scenarios" / "ina.toml").read_text()
    plain = tmp_path / "plain.toml"
    plain.write_text(doc[:doc.index("[ina]")] + doc[doc.index("[training]"):])
    done = subprocess.run([sys.executable, "-m", "ndnps.scenario", str(plain), *BIGGER,
                           "--out", str(tmp_path / "plain")], capture_output=True, text=True,
                          timeout=240, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    p = json.loads((tmp_path / "plain" / "summary.json").read_text())
    assert p["ps_bytes_in_per_version_over_model"] > 7.5
    assert abs(s["final_accuracy"] - p["final_accuracy"]) <= 0.01


@pytest.mark.timeout(300)
def test_a_pool_too_small_falls_back_and_stays_correct(tmp_path):
    s = run(tmp_path / "small", "--set", "ina.slots=1", *BIGGER)
    i = s["ina"]
    assert i["slot_collisions"] > 0 and i["segments_fallback"] > 0
    assert i["segments_aggregated"] > 0
    # what reached the PS: a sum per aggregated segment, a gradient segment per worker for
    # each one that fell back (header segments aside)
    segs = i["segments_aggregated"] + i["segments_fallback"]
    predicted = (i["segments_aggregated"] + 8 * i["segments_fallback"]) / segs
    assert abs(s["ps_bytes_in_per_version_over_model"] / predicted - 1) < 0.1
    assert s["final_accuracy"] > 0.8          # (2 epochs of 8 workers: ~0.9)


def _aggregating_forwarder(procs, node: str = "edge", slots: int = 64) -> str:
    sock = procs.forwarder()
    job = TrainingConfig(ps="ps", train="t1", workers=list(WORKERS), key=KEY)
    ina.configure(f"unix://{sock}", job, node, slots, 1.0)
    return sock


@pytest.mark.timeout(120)
def test_a_forged_contribution_is_rejected_at_the_aggregator(procs):
    sock = _aggregating_forwarder(procs)
    workers = start_workers(procs, sock, extra={"w3": ["--forge-gradient-at", "2"]})
    ps_argv = [sys.executable, "-m", "apps.ps", "--key", KEY, "--linger", "1",
               "--metrics", str(procs.workdir / "ps.jsonl"), "--workers", ",".join(WORKERS),
               "--min-workers", "3", "--epochs", "3", "--aggregate-at", "edge"]
    ps = procs.spawn("ps", ps_argv, env={"NDN_CLIENT_TRANSPORT": f"unix://{sock}"})
    status = None

    codes, end, _ = finish(procs, ps, workers)
    status = fetch_status(f"unix://{sock}")
    assert codes == {g: 0 for g in WORKERS}
    agg = status["aggregation"]["counters"]
    assert agg["rejected"] >= 1 and agg["answered"] > 0
    assert worker_end(procs, "w3")["forged_sent"] >= 1
    assert end["segments_aggregated"] > 0
    assert abs(end["accuracy"] - reference_accuracy(3, 3)) <= 0.01


@pytest.mark.timeout(300)
def test_a_killed_aggregator_falls_back_and_the_job_goes_on(tmp_path):
    doc = (ROOT / "scenarios" / "ina.toml").read_text()
    path = tmp_path / "killed.toml"
    path.write_text(doc + '\n[faults]\nkill = [{ forwarder = "leaf1", at_version = 10, '
                    'restart_after = 1.0 }]\n')
    done = subprocess.run([sys.executable, "-m", "ndnps.scenario", str(path), "--plain",
                           "--set", "training.epochs=5", "--set", "training.worker_timeout=5",
                           "--out", str(tmp_path / "run")], capture_output=True, text=True,
                          timeout=280, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert s["ok"] and s["versions"] == 25 and s["final_accuracy"] > 0.8
    assert [f["forwarder"] for f in s["faults"] if f.get("restarted")] == ["leaf1"]
    i = s["ina"]
    # leaf1 came back without its configuration's slots: the runner configured it again
    assert i["forwarders"]["leaf1"]["answered"] > 0 and i["segments_aggregated"] > 0


@pytest.mark.timeout(300)
def test_the_fat_tree_scenario_sums_at_its_placed_aggregators(tmp_path):
    done = subprocess.run([sys.executable, "-m", "ndnps.scenario", "ina-fat-tree", "--plain",
                           "--set", "training.epochs=2", "--out", str(tmp_path / "ft")],
                          capture_output=True, text=True, timeout=280, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    s = json.loads((tmp_path / "ft" / "summary.json").read_text())
    i = s["ina"]
    assert i["edge"] == "e1-1" and len(i["aggregators"]) >= 2
    assert i["segments_fallback"] == 0 and i["segments_aggregated"] > 0
    for node in i["aggregators_configured"]:
        assert i["forwarders"][node]["answered"] == i["segments_aggregated"]
    assert s["ps_bytes_in_per_version_over_model"] < 1.2 and s["final_accuracy"] > 0.6
