"""A scenario on a Mini-NDN topology file, end to end: every node a forwarder, the PS and three
workers on the nodes named, each link with its own bw/delay/loss, `[ina]` placing an aggregator
on the file's nodes — locally, and with --netns (skipped where namespaces are unavailable)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]

# written as Mini-NDN writes its topologies: the PS's node a behind a slow link to r, the
# workers' nodes beyond r, z behind a layer-2 switch s
TOPOLOGY = """\
# a fan-in of four routers and a switch
[nodes]
a: _ network=/world router=/a.Router/
r: _ radius=1.2 angle=0.5
x: _ radius=1 angle=0.5
y: _ radius=1 angle=1.5
z: _
[switches]
s: _
[links]
a:r delay=5ms bw=20
r:x delay=2ms bw=100
r:y delay=2ms
r:s delay=1ms bw=100
s:z delay=1ms bw=100 loss=0.5 max_queue_size=1000
"""

SCENARIO = """\
description = "sync SGD on a Mini-NDN file: PS on a, workers on x, y, z, r aggregating"

[topology]
file = "fan.conf"
ps_node = "a"
worker_nodes = ["x", "y", "z"]

[ina]
k = 1

[training]
mode = "sync"
model = "mlp"
hidden = [32]
dataset = "digits"
epochs = 2
batch = 32
lr = 0.1
key = "minindn-test-key"
"""


def run(tmp_path: Path, *args: str) -> tuple[dict, Path]:
    exp = tmp_path / "exp"
    exp.mkdir(exist_ok=True)
    (exp / "fan.conf").write_text(TOPOLOGY)
    (exp / "fan.toml").write_text(SCENARIO)
    out = tmp_path / "run"
    # run from elsewhere: the file is found beside the scenario
    done = subprocess.run([sys.executable, "-m", "ndnps.scenario", str(exp / "fan.toml"),
                           "--plain", "--out", str(out), *args], capture_output=True,
                          text=True, timeout=240, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads((out / "summary.json").read_text()), out


def check(summary: dict, out: Path) -> None:
    assert summary["ok"] and summary["topology"] == "minindn" and summary["workers"] == 3
    assert summary["final_accuracy"] > 0.5                # chance is 0.1 on digits
    i = summary["ina"]
    # r sums the three workers: one stream over the 20 Mbit/s link instead of three
    assert i["edge"] == "a" and i["aggregators"] == {"r": ["w1", "w2", "w3"]}
    assert i["forwarders"]["r"]["answered"] > 0 and i["segments_fallback"] == 0
    assert i["gamma"] == pytest.approx(20.0)
    # a forwarder on every node and on the switch, each with its trace
    for node in "arxyzs":
        assert (out / "traces" / f"{node}-rates.tsv").exists(), node
    as_run = tomllib.loads((out / "scenario.toml").read_text())
    assert Path(as_run["topology"]["file"]).is_absolute()


def faces(out: Path, node: str) -> dict[str, dict]:
    return {f["name"]: f for f in tomllib.loads((out / "config" / f"{node}.toml").read_text())
            ["faces"]}


@pytest.mark.timeout(300)
def test_a_minindn_file_runs_locally(tmp_path):
    summary, out = run(tmp_path)
    check(summary, out)
    # each link's own conditions on both its faces; the lossy one with link reliability
    assert faces(out, "a")["r"]["delay_ms"] == 5.0 and faces(out, "a")["r"]["rate_mbps"] == 20.0
    assert faces(out, "r")["y"]["delay_ms"] == 2.0 and "rate_mbps" not in faces(out, "r")["y"]
    assert faces(out, "z")["s"]["loss"] == 0.005 and faces(out, "z")["s"]["reliability"]


@pytest.mark.timeout(300)
def test_a_minindn_file_runs_in_namespaces(tmp_path):
    from ndnps.lab.netns import NetnsUnavailable, check_available
    try:
        check_available(tbf=True)
    except NetnsUnavailable as e:
        pytest.skip(f"netns mode unavailable here: {e}")
    summary, out = run(tmp_path, "--netns")
    check(summary, out)
    assert summary["netns"] is True
    assert "4 of 5 links limited by tbf at their rate" in summary["notes"]
    # the rate is the kernel's; delay and loss stay on the faces
    assert faces(out, "a")["r"]["delay_ms"] == 5.0 and "rate_mbps" not in faces(out, "a")["r"]
    assert faces(out, "z")["s"]["loss"] == 0.005
