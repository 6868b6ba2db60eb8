"""One scenario run for real (processes, UDP between forwarders) and then simulated with the
real run's compute profile: the same final parameters, the same bytes on every link.
(bench/agreement.py compares the iteration times too; a test never asserts on wall time.)"""
from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from ndnps.lab.traces import TRAINING_CLASSES, link_bytes

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]
ROOT = Path(__file__).resolve().parents[2]
SETS = ["training.max_versions=8", "training.eval_every=8", 'training.device_time="profiled"']


def run(out: Path, *sets: str) -> dict:
    argv = [sys.executable, "-m", "ndnps.scenario", "tree", "--plain", "--out", str(out)]
    for s in sets:
        argv += ["--set", s]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads((out / "summary.json").read_text())


def test_a_simulated_tree_ends_with_the_real_runs_parameters_and_bytes(tmp_path):
    real = run(tmp_path / "real", *SETS)
    layers = tomllib.loads((tmp_path / "real" / "scenario.toml").read_text())["training"][
        "layer_seconds"]
    sim = run(tmp_path / "sim", *SETS, 'run.mode="sim"', f"training.layer_seconds={layers}")
    assert sim["simulated"]["events"] > 0 and real["versions"] == sim["versions"] == 8
    with np.load(tmp_path / "real" / "model.npz") as a, np.load(tmp_path / "sim" / "model.npz") as b:
        for key in a.files:             # synchronous SGD: the same sums in the same order
            assert np.array_equal(a[key], b[key]), key
    # the pushes (distribute: once per version and link, along the persistent PIT) carry the
    # same bytes on every link direction; with the collects too, within what a real run's
    # retransmissions under the suite's load add (one gradient of 8 is 12 %)
    pushes = link_bytes(tmp_path / "real", frozenset({"distribute"}))
    assert pushes == link_bytes(tmp_path / "sim", frozenset({"distribute"}))
    assert len(pushes) == 1 + 2 + 8      # the PS to the root, to the leaves, to the workers
    real_links = link_bytes(tmp_path / "real", TRAINING_CLASSES)
    sim_links = link_bytes(tmp_path / "sim", TRAINING_CLASSES)
    assert sorted(real_links) == sorted(sim_links) and len(real_links) == 4 + 2 * 9
    for key, n in real_links.items():
        assert n * 0.85 <= sim_links[key] <= n, key
