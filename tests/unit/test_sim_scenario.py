"""Scenarios simulated end to end (ndnps.lab.simulated): the runner's own plan, forwarders,
aggregators and apps in one process in virtual time, and a real run's outputs."""
from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from ndnps.lab import spec
from ndnps.lab.scenario import main as scenario_main
from ndnps.lab.simulated import SimRunner

pytestmark = pytest.mark.timeout(120)


def simulate(tmp_path: Path, name: str, *sets: str) -> tuple[int, dict, Path]:
    sc = spec.load(name, list(sets))
    out = tmp_path / "run"
    code = SimRunner(sc, out).run()
    return code, json.loads((out / "summary.json").read_text()), out


def test_a_simulated_sync_sgd_run_trains_and_writes_a_real_runs_outputs(tmp_path):
    code, summary, out = simulate(tmp_path, "sync-sgd", "training.max_versions=12",
                                  "training.eval_every=4")
    assert code == 0, summary.get("error")
    assert summary["ok"] and summary["versions"] == 12 and summary["workers"] == 4
    assert summary["final_accuracy"] > 0.3              # chance is 0.1 on digits
    sim = summary["simulated"]
    assert sim["events"] > 1000 and sim["virtual_seconds"] > 0
    # the whole run in virtual time: the metrics count from the run's start, in order
    ts = [json.loads(line)["t"] for line in (out / "metrics" / "ps.jsonl").read_text().splitlines()]
    assert ts == sorted(ts) and 0 <= ts[0] and ts[-1] <= sim["virtual_seconds"]
    tomllib.loads((out / "scenario.toml").read_text())
    for name in ("ps", "w1", "w4"):
        assert "ready" in (out / "logs" / f"{name}.log").read_text() or name == "ps"
        assert (out / "metrics" / f"{name}.jsonl").read_text()
    assert (out / "traces" / "fwd-rates.tsv").read_text().startswith("Time\t")
    assert json.loads((out / "traces" / "fwd-status.json").read_text())["faces"]
    assert (out / "plots" / "loss_accuracy.png").read_bytes()[:4] == b"\x89PNG"


def test_a_simulated_run_is_the_same_twice_given_its_profile(tmp_path):
    first = simulate(tmp_path / "1", "sync-sgd", "training.max_versions=5")
    run = tomllib.loads((first[2] / "scenario.toml").read_text())["training"]
    assert run["device_time"] == "profiled" and run["layer_seconds"]    # a simulation's default
    again = simulate(tmp_path / "2", "sync-sgd", "training.max_versions=5",
                     f"training.layer_seconds={run['layer_seconds']}")
    third = simulate(tmp_path / "3", "sync-sgd", "training.max_versions=5",
                     f"training.layer_seconds={run['layer_seconds']}")
    runs = [again[1], third[1]]
    a, b = ({k: s["simulated"][k] for k in ("virtual_seconds", "events")} for s in runs)
    assert a == b
    assert runs[0]["final_accuracy"] == runs[1]["final_accuracy"]


def test_the_bottleneck_is_simulated_on_its_two_hosts_and_its_link(tmp_path):
    code, summary, out = simulate(tmp_path, "bottleneck", "topology.workers=2",
                                  "training.max_versions=6", "training.n_features=256",
                                  "training.hidden=[64]", "training.n_samples=2000")
    assert code == 0, summary.get("error")
    links = json.loads((out / "traces" / "sim-links.json").read_text())
    assert {(c["from"], c["to"]) for c in links} == {("ps-host", "workers-host"),
                                                    ("workers-host", "ps-host")}
    # the pushes go down once per version, whatever the number of workers
    down = next(c for c in links if c["from"] == "ps-host")
    assert down["bytes"] > 6 * summary["model_bytes"]
    assert summary["bottleneck"]["qdisc"] is not None


def test_what_a_simulation_cannot_do_is_refused_naming_the_key(tmp_path, capsys):
    code = scenario_main(["bottleneck", "--sim", "--set", "run.system=tcp", "--out",
                          str(tmp_path / "x")])
    assert code == 2 and "run.system" in capsys.readouterr().err
    code = scenario_main(["worker-killed", "--set", "run.mode=sim", "--out",
                          str(tmp_path / "y")])
    assert code == 2 and "faults" in capsys.readouterr().err
    with pytest.raises(spec.ScenarioError, match="run.mode"):
        spec.load("sync-sgd", ["run.mode=virtual"])
