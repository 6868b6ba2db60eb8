"""In-network aggregation with real processes (docs/aggregation.md): the `ina` tree scenario sums
in the network (PS ingress about one model a version, accuracy as without), a pool too small falls
back and stays correct, a forged contribution is rejected at the aggregator and counted, an
aggregator killed mid-run makes the plan fall back without wedging the job, whatever was summed
where — two levels, at the PS after a collision, around a killed aggregator — the final parameters
are the same bytes, and forged plans sent at an aggregator during a run claim no slot."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from ndn.encoding import Component, InterestParam, Name, make_interest

from ndnps.forwarder.status import command, fetch_status
from ndnps.lab import ina
from ndnps.lab.metrics import read_metrics
from ndnps.lab.process import ManagedProcess
from ndnps.ndn import aggregation
from ndnps.ndn.tlv import NAME, encode_tlv, name_from_str
from ndnps.protocol import names
from ndnps.protocol.config import from_table

from tests.support.procfs import processes_naming
from tests.support.rawclient import RawFace

from tests.integration.test_training import (KEY, WORKERS, finish, reference_accuracy,
                                             start_workers, worker_end)

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
# a model large enough that the workers' small header segments are noise in the PS's ingress
BIGGER = ["--set", "training.hidden=[512]", "--set", "training.epochs=2", "--plain"]


def run(out: Path, *args: str, scenario: str = "ina") -> dict:
    done = subprocess.run([sys.executable, "-m", "ndnps.scenario", scenario, *args, "--out",
                           str(out)], capture_output=True, text=True, timeout=280, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads((out / "summary.json").read_text())


def at_once(*calls: Callable[[], object]) -> list:
    """The calls' results, two running at a time: each is a whole run, mostly waiting on its
    processes' start-up (an exception in one is raised here)."""
    with ThreadPoolExecutor(2) as pool:
        return [f.result() for f in [pool.submit(c) for c in calls]]


@pytest.mark.timeout(600)
def test_the_ina_tree_sums_in_the_network_and_trains_as_without(tmp_path):
    s = run(tmp_path / "ina", *BIGGER)
    i = s["ina"]
    assert i["aggregators"] and set(i["aggregators_configured"]) == {"root", "leaf1", "leaf2"}
    assert i["segments_fallback"] == 0 and i["segments_aggregated"] > 0
    assert i["forwarders"]["leaf1"]["answered"] > 0 and i["forwarders"]["leaf2"]["answered"] > 0
    assert i["forwarders"]["root"]["answered"] >= i["segments_aggregated"]
    assert s["ps_bytes_in_per_version_over_model"] < 1.1        # 8 workers, one sum
    # the same run without [ina] (after it: the ingress above is the PS's alone, the host not
    # loaded by a second run's retransmissions): 8 gradients reach the PS, the same accuracy
    doc = (ROOT / "scenarios" / "ina.toml").read_text()
    plain = tmp_path / "plain.toml"
    plain.write_text(doc[:doc.index("[ina]")] + doc[doc.index("[training]"):])
    p = run(tmp_path / "plain", *BIGGER, scenario=str(plain))
    assert p["ps_bytes_in_per_version_over_model"] > 7.5
    assert abs(s["final_accuracy"] - p["final_accuracy"]) <= 0.01


@pytest.mark.timeout(300)
def test_a_pool_too_small_falls_back_and_stays_correct(tmp_path):
    s = run(tmp_path / "small", "--set", "ina.slots=1", *BIGGER)
    i = s["ina"]
    assert i["slot_collisions"] > 0 and i["segments_fallback"] > 0
    assert i["segments_aggregated"] > 0
    # what reached the PS: a sum per aggregated segment, a gradient segment per worker for
    # each one that fell back (header segments and the fallbacks' retransmitted segments
    # aside: a run on the compiled core came out 10.3 % above this count)
    segs = i["segments_aggregated"] + i["segments_fallback"]
    predicted = (i["segments_aggregated"] + 8 * i["segments_fallback"]) / segs
    assert abs(s["ps_bytes_in_per_version_over_model"] / predicted - 1) < 0.15
    assert s["final_accuracy"] > 0.8          # (2 epochs of 8 workers: ~0.9)


def _aggregating_forwarder(procs, node: str = "edge", slots: int = 64) -> str:
    sock = procs.forwarder()
    job = from_table({"ps": "ps", "train": "t1", "workers": list(WORKERS), "key": KEY})
    ina.configure(f"unix://{sock}", job, node, slots, 1.0)
    return sock


@pytest.mark.timeout(120)
def test_a_forged_contribution_is_rejected_at_the_aggregator(procs):
    sock = _aggregating_forwarder(procs)
    workers = start_workers(procs, sock, extra={"w3": ["--forge-gradient-at", "2"]})
    ps_argv = [sys.executable, "-m", "ndnps.apps.ps", "--key", KEY, "--linger", "1",
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
    done = subprocess.run([sys.executable, "-m", "ndnps.scenario",
                           str(killed_leaf(tmp_path, 10)), "--plain",
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


SAME = ["--plain", "--set", "training.epochs=3"]       # 15 versions of the tree's 8 workers


def killed_leaf(tmp_path: Path, at_version: int) -> Path:
    """The `ina` scenario with leaf1, an aggregator, killed at `at_version` and restarted."""
    doc = (ROOT / "scenarios" / "ina.toml").read_text()
    path = tmp_path / "killed.toml"
    path.write_text(doc + f'\n[faults]\nkill = [{{ forwarder = "leaf1", at_version = {at_version}, '
                    'restart_after = 1.0 }]\n')
    return path


class LiveRun:
    """`python -m ndnps.scenario ina ARGS --out OUT` running in the background, for a test to
    act on while it trains; stopped (with its children) whatever happens."""

    def __init__(self, out: Path, *args: str) -> None:
        out.parent.mkdir(parents=True, exist_ok=True)
        self.out, self.log = out, out.parent / f"{out.name}.log"
        self.proc = ManagedProcess("runner", [sys.executable, "-m", "ndnps.scenario", "ina",
                                              *args, "--out", str(out)], self.log,
                                   cwd=str(ROOT))

    def version(self) -> int:
        """The latest version the PS applied (-1: none yet)."""
        return max((r["version"] for r in _records(self.out / "metrics" / "ps.jsonl")
                    if "collect_wait" in r), default=-1)

    def wait_version(self, v: int, timeout: float = 200.0) -> None:
        deadline = time.monotonic() + timeout
        while self.version() < v:
            assert self.running() and time.monotonic() < deadline, self.tail()
            time.sleep(0.05)

    def running(self) -> bool:
        return self.proc.proc.poll() is None

    def socket(self, forwarder: str) -> str:
        """The unix socket forwarder `forwarder` of this run listens on."""
        (_, cmd), = processes_naming(str(self.out / "config" / f"{forwarder}.toml"))
        argv = cmd.split()
        return argv[argv.index("--unix") + 1]

    def finish(self, timeout: float = 240.0) -> dict:
        assert self.proc.proc.wait(timeout) == 0, self.tail()
        return json.loads((self.out / "summary.json").read_text())

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:]

    def __enter__(self) -> "LiveRun":
        return self

    def __exit__(self, *exc) -> None:
        self.proc.stop(grace=30.0)


def run_removing_leaf1(out: Path, at_version: int) -> None:
    """The `ina` scenario, leaf1 told to stop aggregating (aggregators/remove) once the PS has
    applied `at_version`: from then on the root's Interests for leaf1's sub-group come back
    Nacked (leaf1 has no route for its own name) and the root collects leaf1's workers
    itself — the sub-group fallback, at every segment, whatever the timing."""
    with LiveRun(out, *SAME) as run:
        run.wait_version(at_version)
        code, text = command(f"unix://{run.socket('leaf1')}", Name.from_str(
            "/localhost/nfd/aggregators/remove") + [Component.from_bytes(
                encode_tlv(NAME, name_from_str("/ps/t1")))])
        assert code == 200, text
        run.finish()


def _records(path: Path) -> list[dict]:
    try:
        return list(read_metrics(path))
    except (OSError, ValueError):
        return []


@pytest.mark.timeout(1200)
def test_the_final_parameters_are_the_same_bytes_whatever_summed_where(tmp_path):
    # sums are exact until the one rounding of the total for the PS (partial sums travel as
    # int64 fixed point): two levels, a one-slot pool whose collisions the PS sums itself,
    # leaf1 stopping (its workers summed by the root), leaf1 killed, and one leaf summing
    # every worker (the PS asks it directly: its sum float32, no sub-group) all end in the
    # same parameters, bit for bit
    killed = str(killed_leaf(tmp_path, 5))
    at_once(lambda: run_removing_leaf1(tmp_path / "removed", 5),
            lambda: run(tmp_path / "normal", *SAME),
            lambda: run(tmp_path / "one-slot", *SAME, "--set", "ina.slots=1"),
            lambda: run(tmp_path / "killed", *SAME, scenario=killed),
            lambda: run(tmp_path / "direct", *SAME, "--set", "topology.leaves=1",
                        "--set", "ina.k=1"))
    runs = {}
    for label in ("normal", "one-slot", "killed", "removed", "direct"):
        s = json.loads((tmp_path / label / "summary.json").read_text())
        assert s["ok"] and s["versions"] == 15 and s["workers_lost"] == 0, label
        with np.load(tmp_path / label / "model.npz") as z:
            runs[label] = (s["ina"], {k: z[k].tobytes() for k in z.files})
    normal, small, removed = runs["normal"][0], runs["one-slot"][0], runs["removed"][0]
    assert normal["segments_fallback"] == normal["subgroup_fallbacks"] == 0
    assert small["slot_collisions"] > 0 and small["segments_fallback"] > 0     # at the PS
    assert removed["subgroup_fallbacks"] > 0                                  # at the root
    direct = runs["direct"][0]
    assert (direct["root"], direct["aggregators_configured"]) == ("leaf1", ["leaf1"])
    assert direct["segments_aggregated"] > 0 and direct["segments_fallback"] == 0
    # (a kill falls back only when it lands while sums are in flight: it compares whatever
    # it did; the removal is the deterministic sub-group fallback)
    assert [f["forwarder"] for f in json.loads((tmp_path / "killed" / "summary.json")
                                               .read_text())["faults"]
            if f.get("restarted")] == ["leaf1"]
    params = [runs[label][1] for label in runs]
    assert params[0].keys() == params[1].keys() and all(p == params[0] for p in params)


KEY_NAME = b"".join(bytes(c) for c in names.key("ps", "t1"))


def forged_plans(version: int, segments: int) -> list[bytes]:
    """For each segment of `version`, at the root, the plan "root sums w2 alone": unsigned
    (python-ndn adds the right digest), with an all-zero digest, and signed under another
    key."""
    plan = aggregation.encode_plan(aggregation.Group("root", ("w2",)))
    out = []
    for seg in range(1, segments + 1):
        comps = names.aggregate("ps", "t1", version, seg)
        name = b"".join(bytes(c) for c in comps)
        out.append(bytes(make_interest(comps, InterestParam(
            must_be_fresh=True, lifetime=1000, forwarding_hint=[Name.from_str("/root")]),
            app_param=plan)))
        hint = encode_tlv(0x1E, encode_tlv(NAME, encode_tlv(0x08, b"root")))
        out.append(encode_tlv(0x05, encode_tlv(NAME, name + encode_tlv(0x02, bytes(32)))
                              + b"\x12\x00" + hint + b"\x0a\x04" + os.urandom(4)
                              + b"\x0c\x02\x03\xe8" + encode_tlv(0x24, plan)))
        out.append(aggregation.encode_interest(name, plan, "root", 1000, b"not the key",
                                               KEY_NAME)[0])
    return out


async def attack(run: LiveRun, seconds: float) -> int:
    """Forged plans for the next versions' segments at the root, ahead of the PS's genuine
    ones, for `seconds` or until the run ends (the PS's last version, or the root gone); how
    many were sent."""
    face = await RawFace.connect(run.socket("root"))
    sent = 0
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    try:
        while loop.time() < end and run.version() < LAST and sent < 5000:
            v = run.version()
            for wire in forged_plans(v + 1, 5) + forged_plans(v + 2, 5):
                face.send(wire)
                sent += 1
            await face.writer.drain()
            await asyncio.sleep(0.05)
    except ConnectionError:
        pass                                    # the run ended: its forwarders are gone
    finally:
        face.close()
    return sent


LAST = 50                   # versions of the attacked run (10 epochs of the tree's 8 workers)


@pytest.mark.timeout(600)
def test_forged_plans_at_an_aggregator_claim_nothing_during_a_real_run(tmp_path):
    # the outside tester's attack: "root sums w2 alone", unsigned, zero-digest or under
    # another key, for the segments of the versions about to be summed; before plans were
    # signed it took their slots (collisions: the segments fell back to the PS)
    with LiveRun(tmp_path / "attacked", "--plain", "--set", "training.epochs=10") as run:
        run.wait_version(1)
        sent = asyncio.run(attack(run, 8.0))
        s = run.finish()
    i = s["ina"]
    assert sent > 300 and s["ok"] and s["versions"] == LAST and s["workers_lost"] == 0
    root = i["forwarders"]["root"]
    assert 0 < root["unauthorised"] <= sent
    assert i["slot_collisions"] == 0 and i["segments_fallback"] == 0
    assert i["subgroup_fallbacks"] == 0 and root["stale"] == 0
    assert root["answered"] == i["segments_aggregated"] == 5 * LAST
