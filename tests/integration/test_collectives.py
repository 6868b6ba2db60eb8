"""PS-less training end to end (docs/collectives.md): the scenario runner starts peers (python -m
ndnps.apps.peer) that combine their gradients by ring all-reduce, in-network all-reduce or BCube's
level-by-level all-reduce, on a star or a BCube fabric. Each run's peers hold the same
parameters at every version and end where the single-process reference ends; a peer killed
mid-run stops the run (the others say it was silent) and leaves no process behind."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ndnps.lab.metrics import read_metrics
from ndnps.lab.netns import NetnsUnavailable, check_available
from ndnps.lab.spec import load
from ndnps.ml.data import load_dataset
from ndnps.ml.train import train_sync_reference
from tests.support.procfs import namespaces_left, processes_naming

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["training.hidden=[32]"]


def run_scenario(out: Path, scenario: str, overrides: list[str],
                 timeout: float = 100) -> subprocess.CompletedProcess:
    args = [a for o in overrides for a in ("--set", o)]
    return subprocess.run([sys.executable, "-m", "ndnps.scenario", scenario, "--plain", *args,
                           "--out", str(out)], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT)


def reference(scenario: str, overrides: list[str]) -> dict:
    """The single-process sync SGD reference with the scenario's training settings."""
    cfg = load(scenario, overrides).training
    ds = load_dataset(cfg.model.dataset, cfg.model.seed, **cfg.model.dataset_kwargs())
    spec = {"n_in": ds.n_features, "n_classes": ds.n_classes, **cfg.model.model_spec()}
    return train_sync_reference(ds, spec, len(cfg.who.workers), cfg.sgd.epochs, cfg.sgd.batch,
                                cfg.sgd.lr, cfg.sgd.momentum, cfg.sgd.weight_decay,
                                cfg.model.seed)


def ends(out: Path, peers: list[str]) -> dict[str, dict]:
    return {p: [r for r in read_metrics(out / "metrics" / f"{p}.jsonl")
                if r.get("event") == "end"][-1] for p in peers}


def check_run(tmp_path: Path, scenario: str, overrides: list[str], peers: int) -> dict:
    out = tmp_path / "run"
    done = run_scenario(out, scenario, overrides)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["ok"] is True and s["peers"] == peers and s["workers"] == peers
    assert s["parameters_identical"] is True and s["digest_mismatches"] == []
    ref = reference(scenario, overrides)
    epochs = load(scenario, overrides).training.sgd.epochs
    assert s["versions"] == epochs * ref["steps_per_epoch"]
    assert s["versions_compared"] == s["versions"]
    names = [f"w{i + 1}" for i in range(peers)]
    end = ends(out, names)
    assert {p: e["code"] for p, e in end.items()} == {p: 0 for p in names}
    assert {e["version"] for e in end.values()} == {s["versions"]}
    # every peer evaluated its last version: the same parameters, the same accuracy
    assert len({e["accuracy"] for e in end.values()}) == 1
    assert abs(s["final_accuracy"] - ref["final_accuracy"]) <= 0.01, \
        (s["final_accuracy"], ref["final_accuracy"])
    assert s["sync_seconds"] is not None and s["sync_seconds"] > 0
    for level, analytic in s["analytic_bytes_per_peer_face_per_version"].items():
        assert analytic > 0 and s["bytes_per_peer_face_per_version"][level] >= analytic
    return {"summary": s, "ends": end, "out": out}


@pytest.mark.timeout(150)
def test_ring_on_a_star_matches_the_reference(tmp_path):
    r = check_run(tmp_path, "ring", ["topology.workers=4", "training.epochs=3", *SMALL], 4)
    assert r["summary"]["collective"] == "ring"
    assert set(r["summary"]["bytes_per_peer_face_per_version"]) == {"0"}


@pytest.mark.timeout(150)
def test_ina_on_a_star_matches_the_reference_and_sums_in_the_network(tmp_path):
    r = check_run(tmp_path, "ina-allreduce",
                  ["topology.workers=4", "training.epochs=3", *SMALL], 4)
    assert r["summary"]["collective"] == "ina"
    for peer, end in r["ends"].items():
        assert end["segments_aggregated"] > 0, (peer, end)


@pytest.mark.timeout(150)
def test_bcube_on_a_bcube_2_2_fabric_matches_the_reference(tmp_path):
    r = check_run(tmp_path, "bcube", ["topology.n=2", "topology.k=2", "topology.workers=4",
                                      "training.epochs=3", *SMALL], 4)
    s = r["summary"]
    assert s["collective"] == "bcube" and s["bcube"] == {"n": 2, "k": 2}
    assert set(s["bytes_per_peer_face_per_version"]) == {"0", "1"}       # an uplink a level


@pytest.mark.timeout(150)
def test_bcube_on_a_bcube_2_3_fabric_with_8_peers_matches_the_reference(tmp_path):
    r = check_run(tmp_path, "bcube", ["topology.k=3", "topology.n=2", "topology.workers=8",
                                      "training.epochs=2", *SMALL], 8)
    s = r["summary"]
    assert s["bcube"] == {"n": 2, "k": 3}
    assert set(s["bytes_per_peer_face_per_version"]) == {"0", "1", "2"}


KILLED = """
[topology]
kind = "star"
workers = 4

[run]
timeout = 90.0

[training]
collective = "{collective}"
mode = "sync"
hidden = [32]
epochs = 100
key = "k"
worker_timeout = 3.0

[faults]
kill = [{{ worker = "w2", at_version = 5 }}]
"""


@pytest.mark.timeout(150)
@pytest.mark.parametrize("collective", ["ring", "ina"])
def test_a_peer_killed_mid_run_stops_the_run_and_leaves_no_process(tmp_path, collective):
    path = tmp_path / "killed.toml"
    path.write_text(KILLED.format(collective=collective))
    out = tmp_path / "run"
    done = run_scenario(out, str(path), [], timeout=120)
    assert done.returncode != 0, done.stdout[-2000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["ok"] is False
    why = s.get("error", "") + done.stderr
    assert "exited with code 3 (the training cannot go on)" in why, why[-3000:]
    assert "silent for 3 s" in why
    assert "peers gone before: w2 (killed by [faults] at version" in why
    (kill,) = s["faults"]
    assert (kill["worker"], kill["at_version"]) == ("w2", 5) and "skipped" not in kill
    # every surviving peer stopped, saying which peer it waited for in vain
    for peer in ("w1", "w3", "w4"):
        recs = read_metrics(out / "metrics" / f"{peer}.jsonl")
        assert all(r.get("version", 0) < 100 for r in recs)
    failed = [r for p in ("w1", "w3", "w4") for r in read_metrics(out / "metrics" / f"{p}.jsonl")
              if r.get("event") == "failed"]
    assert failed and all("silent" in r["reason"] for r in failed)
    assert processes_naming(str(out)) == []


@pytest.mark.timeout(150)
def test_bcube_in_namespaces_over_tbf_limited_links(tmp_path):
    """BCube(2, 2) with --netns: a namespace per switch and host forwarder, every veth limited
    by tbf ([links] rate_mbps); the run trains as locally, and leaves no namespace."""
    try:
        check_available("links.rate_mbps with --netns", tbf=True)
    except NetnsUnavailable as e:
        pytest.skip(str(e))
    r = check_run(tmp_path, "bcube", ["topology.n=2", "topology.k=2", "topology.workers=4",
                                      "training.epochs=2", "netns.enabled=true",
                                      "links.rate_mbps=50", *SMALL], 4)
    s = r["summary"]
    assert "links limited to 50 Mbit/s by tbf on every veth" in s["notes"]
    # the uplinks carried the parts: p<i> -> s<level>-<j> for every host and level
    uplinks = [label for label in s["link_bytes"] if label.startswith("p") and "->s" in label]
    assert len(uplinks) == 8
    assert s["max_link_bytes_per_version"] > 0
    assert namespaces_left() == []


@pytest.mark.timeout(150)
@pytest.mark.parametrize("collective", ["ring", "ina"])
def test_a_killed_peer_is_left_behind_when_the_collective_re_forms(tmp_path, collective):
    """on_peer_loss = "re-form": the survivors' roll call agrees on who is left and the
    version to go on from; the training ends with their parameters still bit-identical."""
    path = tmp_path / "reform.toml"
    path.write_text(KILLED.format(collective=collective).replace(
        "worker_timeout = 3.0", 'worker_timeout = 3.0\non_peer_loss = "re-form"').replace(
        "epochs = 100", "epochs = 3"))
    out = tmp_path / "run"
    done = run_scenario(out, str(path), [], timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["ok"] is True and s["parameters_identical"] is True
    (reformed,) = s["reformed"]
    assert reformed["epoch"] == 1 and reformed["peers"] == ["w1", "w3", "w4"]
    # w2 dies once the recorder (w1) has version 5; a peer still finishing version 5 (its last
    # ring part was w2's to pass on) is at 4, so the survivors may go on from 4
    assert reformed["lost"] == ["w2"] and reformed["version"] >= 4
    total = load(str(path), []).training.sgd.epochs * reference(str(path), [])["steps_per_epoch"]
    assert s["versions"] == total and s["versions_compared"] == total
    end = ends(out, ["w1", "w3", "w4"])
    assert {p: (e["code"], e["version"]) for p, e in end.items()} == \
        {p: (0, total) for p in end}
    assert s["final_accuracy"] > 0.5
    assert processes_naming(str(out)) == []


@pytest.mark.timeout(150)
@pytest.mark.parametrize("reliability", [True, False])
def test_a_ring_over_lossy_links_recovers_and_stays_identical(tmp_path, reliability):
    """5 % loss on every link, repaired per hop by NDNLPv2 (the default on lossy links) or end
    to end by the fetches (held Interests re-asked after 4 round trips, at least 0.1 s)."""
    r = check_run(tmp_path, "ring", ["topology.workers=4", "training.epochs=2",
                                     "links.loss=0.05",
                                     f"links.reliability={str(reliability).lower()}", *SMALL], 4)
    assert r["summary"]["links"]["loss"] == 0.05
