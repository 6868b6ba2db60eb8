"""Pipeline + data-parallel training on devices of different speeds with real processes
(docs/hetero.md): the runner plans the stages on this machine, starts one stage app per device of
each virtual machine (python -m ndnps.apps.stage), and the stages exchange activations and
gradients as named Data through the forwarder. The training ends where the single-process reference
of the same mini-batches ends (accuracy within a point, the loss curves close), the same stage of
both machines holds the same parameters after every step; recomputation trains the same and holds
less; on lossy links it recovers; a stage killed mid-run stops the run, saying which, and leaves no
process behind."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ndnps.lab.metrics import read_metrics
from tests.support.procfs import processes_naming

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
# the hetero scenario, smaller and quicker: the devices 2x this machine's core at the fastest
QUICK = ["training.hidden=[64,64,64,64,64]", "pipeline.device_scale=2.0", "training.epochs=4"]
# ... where the prediction is checked: devices 64x (a step ~0.1 s, as quick to run), so that
# their compute, not the NDN transfers on a loaded host, makes most of a step
SCALE = 64.0
# The planner's prediction ÷ the measured step, devices timed by the profile (the scenario's
# device_time): the compute is the profile's by construction, so the band is what the
# transfers, the rings and the event loops on two shared cores add beyond the plan's model
# (2 ms + bytes at 200 Mbit/s). Measured on this 2-core host: 0.91-0.99 at load 2-4, 0.83-0.84
# with three more processes spinning on it; at scale 2 (transfers most of a step) 0.29-0.66,
# too loose to mean anything. Below 0.6 the plan no longer models the run (stages waiting on
# transfers, devices not keeping their time); above 1.3 the run was faster than its own
# devices allow.
PREDICTION_BAND = (0.6, 1.3)


def run(out: Path, overrides: list[str], scenario: str = "hetero",
        timeout: float = 130) -> subprocess.CompletedProcess:
    args = [a for o in overrides for a in ("--set", o)]
    return subprocess.run([sys.executable, "-m", "ndnps.scenario", scenario, "--plain", *args,
                           "--out", str(out)], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT)


def summary_of(done: subprocess.CompletedProcess, out: Path) -> dict:
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["ok"] is True and s["collective"] == "pipeline"
    return s


def check_trained(s: dict, out: Path, least: float = 0.8) -> dict:
    p = s["pipeline"]
    assert s["parameters_identical"] is True and s["digest_mismatches"] == []
    assert abs(p["accuracy_vs_reference"]) <= 0.01, p
    assert p["final_accuracy"] >= least
    assert p["loss_max_difference"] < 1e-3
    assert len(p["loss_curve"]) == len(p["reference_loss_curve"]) == 4
    plan = json.loads((out / "plan.json").read_text())
    assert plan["split"] == p["split"] and [x for st in plan["stage_layers"] for x in st] == \
        list(range(6))                      # the 6 layers, in order, over the stages
    # every stage app ran every step and ended cleanly
    apps = [f"m{j}-{k}" for j in (1, 2) for k in ("slow", "mid", "fast")]
    for a in apps:
        recs = read_metrics(out / "metrics" / f"{a}.jsonl")
        end = [r for r in recs if r.get("event") == "end"][-1]
        assert (end["code"], end["version"]) == (0, s["versions"]), a
    return p


@pytest.mark.timeout(150)
@pytest.mark.parametrize("dataset", ["digits", "synthetic"])
def test_the_hetero_scenario_trains_as_the_single_process_does(tmp_path, dataset):
    out = tmp_path / "run"
    # the synthetic task learns slowly with 6 layers: 4 epochs reach about a third (the
    # reference's too; chance is a tenth)
    data = ['training.dataset="synthetic"', "training.n_samples=4000", "training.lr=0.1"] \
        if dataset == "synthetic" else []
    s = summary_of(run(out, [*QUICK, f"pipeline.device_scale={SCALE}", *data]), out)
    p = check_trained(s, out, 0.8 if dataset == "digits" else 0.25)
    assert p["loss_curve"][-1] < p["loss_curve"][0]
    assert p["split"] == "planned" and p["plan"]["machines"] == 2
    # the stages in the planner's order, each holding its layers on its kind's device
    kinds = [st["kind"] for st in p["stages"]]
    assert sorted(kinds) == ["fast", "mid", "slow"] and kinds[0] == "fast"
    speeds = {"slow": 1.0, "mid": 2.0, "fast": 4.0}
    for st in p["stages"]:
        assert st["device_factor"] == pytest.approx(SCALE * 4.0 / speeds[st["kind"]])
        assert st["busy_seconds"] > 0 and st["cpu_seconds"] > 0
        assert 0 <= st["idle_fraction"] < 1
    assert p["stage_imbalance"] >= 1 and p["samples_per_second"] > 0
    low, high = PREDICTION_BAND
    assert low <= p["predicted_vs_measured"] <= high, (p["predicted_vs_measured"], p["stages"])
    # profiled devices: each stage's compute is the profile's (the prediction's own; the
    # records' times are rounded)
    assert p["device_time"] == "profiled"
    assert all(st["device_vs_profile"] == pytest.approx(1.0, rel=1e-4) for st in p["stages"])
    assert p["predicted_from_run_compute"] == pytest.approx(p["predicted_iteration_seconds"],
                                                            rel=1e-4)
    assert p["memory_saved"] == 0.0         # nothing recomputed


@pytest.mark.timeout(150)
def test_recomputation_trains_alike_and_holds_fewer_activations(tmp_path):
    """Recomputed activations are the same float32 arithmetic: the same parameters, step by
    step, as without (the digests of test 1's runs would match; here the reference's)."""
    out = tmp_path / "run"
    s = summary_of(run(out, [*QUICK, "pipeline.recompute=true"]), out)
    p = check_trained(s, out)
    assert p["recompute"] is True and p["memory_saved"] > 0
    first = p["stages"][0]                  # several layers: recomputing saves there
    assert first["peak_activation_bytes"] < first["peak_activation_bytes_kept"]
    assert first["recompute_seconds"] > 0


@pytest.mark.timeout(150)
def test_on_lossy_links_the_stages_recover(tmp_path):
    out = tmp_path / "run"
    s = summary_of(run(out, [*QUICK, "links.loss=0.05", "training.epochs=2"]), out)
    p = s["pipeline"]
    assert s["parameters_identical"] is True
    assert abs(p["accuracy_vs_reference"]) <= 0.01 and p["loss_max_difference"] < 1e-3


@pytest.mark.timeout(150)
def test_a_killed_stage_stops_the_run_naming_it(tmp_path):
    out = tmp_path / "run"
    done = run(out, [*QUICK, "training.epochs=50", "training.worker_timeout=3.0",
                     'faults.kill=[{ worker = "m2-mid", at_version = 5 }]', "run.timeout=90"])
    assert done.returncode != 0, done.stdout[-2000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["ok"] is False
    why = s.get("error", "") + done.stderr
    assert "exited with code 3 (the training cannot go on)" in why, why[-3000:]
    assert "m2-mid" in why
    failed = [r for a in ("m1-slow", "m1-mid", "m1-fast", "m2-slow", "m2-fast")
              for r in read_metrics(out / "metrics" / f"{a}.jsonl") if r.get("event") == "failed"]
    assert failed and all("silent" in r["reason"] for r in failed)
    assert processes_naming(str(out)) == []
