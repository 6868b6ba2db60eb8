"""The bottleneck scenario with real processes in network namespaces (docs/congestion.md): the PS
host and the workers host joined by one veth limited by tbf at 100 Mbit/s both ways. ndnps with N =
8 completes with the target accuracy and no worker dropped; the TCP PS baseline trains the same
over the same wire. A smaller model than the scenario's 1M (100k parameters: 40 versions in
seconds, not minutes); N, the link and everything else as the file says. Skipped, with the reason,
where namespaces or the kernel's tbf cannot be made. Each runner is stopped and its namespaces are
removed whatever happens (checked)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from ndnps.lab import spec
from ndnps.lab.netns import PREFIX, NetnsUnavailable, check_available
from ndnps.lab.process import ManagedProcess, ProcessFailed, owner_tag
from tests.support.procfs import namespaces

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
# the 100k model of bench.iteration, on the synthetic dataset: 40 versions of 8 x 64 samples
SMALL = ["training.n_features=256", "training.hidden=[256, 128]", "training.n_samples=8000",
         "training.batch=64", "training.eval_every=10", "run.timeout=100"]
TARGET = 0.3             # the reference reaches 0.39 at N = 8, 40 versions (chance: 0.1)


@pytest.fixture(scope="module", autouse=True)
def bottleneck_host() -> None:
    try:
        check_available('topology.kind = "bottleneck"', tbf=True)
    except NetnsUnavailable as e:
        pytest.skip(f"bottleneck scenario unavailable here: {e}")


def _namespaces(owner: str) -> list[str]:
    return [ns for ns in namespaces() if ns.startswith(f"{PREFIX}{owner}-")]


@pytest.fixture
def run_bottleneck(tmp_path) -> Iterator:
    """Runs `python -m ndnps.scenario bottleneck --set ...` to its end; returns summary.json.
    Afterwards (pass, fail or timeout) the runner is stopped — it stops its children and
    deletes its namespaces — and whatever it left is removed, then found absent."""
    started: list[tuple[ManagedProcess, str]] = []

    def run(*sets: str, timeout: float = 110, scenario: str = "bottleneck") -> dict:
        out = tmp_path / f"run{len(started)}"
        argv = [sys.executable, "-m", "ndnps.scenario", scenario, "--plain", "--out",
                str(out)] + [a for s in sets for a in ("--set", s)]
        runner = ManagedProcess("runner", argv, tmp_path / f"runner{len(started)}.log",
                                env={"PYTHONPATH": str(ROOT)}, cwd=str(ROOT))
        started.append((runner, owner_tag(runner.pid)))
        try:
            code = runner.wait(timeout)
        except ProcessFailed as e:
            pytest.fail(str(e))
        assert code == 0, runner.tail(60)
        return {**json.loads((out / "summary.json").read_text()), "run_dir": str(out)}

    yield run
    left = []
    for runner, owner in started:
        runner.stop()
        left += _namespaces(owner)
        for ns in left:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    assert not left, f"namespaces left behind: {left}"


def reference_accuracy(sets: list[str], scenario: str = "bottleneck") -> float:
    """The single-process sync SGD of the same training (what a sync run ends with; the
    first job's, with several)."""
    from threadpoolctl import threadpool_limits
    from ndnps.ml.data import load_dataset
    from ndnps.ml.models import SGD, build_model
    from ndnps.ml.train import WorkerBatches, average_grads
    t = spec.load(scenario, sets).training
    ds = load_dataset(t.model.dataset, t.model.seed, **t.model.dataset_kwargs())
    model = build_model({"n_in": ds.n_features, "n_classes": ds.n_classes,
                         **t.model.model_spec()}, t.model.seed)
    opt = SGD(t.sgd.lr, t.sgd.momentum, t.sgd.weight_decay)
    n = len(t.who.workers)
    feeds = [WorkerBatches(ds, n, i, t.sgd.batch, t.model.seed) for i in range(n)]
    with threadpool_limits(1):
        for v in range(t.sgd.max_versions):
            grads = [model.loss_and_grad(*f.for_step(v))[1] for f in feeds]
            opt.step(model.params, average_grads(grads))
        return float(model.accuracy(ds.X_test, ds.y_test))


def check_link(summary: dict, system: str, workers: int) -> None:
    """The run went over the tbf-limited veth, both ways, and says so in summary.json."""
    b = summary["bottleneck"]
    assert (b["rate_mbps"], b["queue_bytes"]) == (100.0, 1 << 20)
    assert set(b["qdisc"]) == {"ps-host->workers-host", "workers-host->ps-host"}
    for direction, c in b["qdisc"].items():
        assert c["kind"] == "tbf" and c["sent_packets"] > 0 and c["drops"] >= 0, direction
    # nothing beats the wire: tbf limits every iteration (its burst allows a little)
    limit = b["wire_limit_seconds"]
    assert limit["tcp"] / limit["ndnps"] == pytest.approx(2 * workers / (workers + 1))
    assert b["iteration_over_wire_limit"][system] > 0.85
    assert summary["system"] == system and summary["workers"] == workers


@pytest.mark.timeout(180)
def test_ndnps_with_8_workers_completes_on_the_bottleneck(run_bottleneck):
    sets = [*SMALL, "training.max_versions=40"]
    summary = run_bottleneck(*sets)
    assert summary["ok"] is True and summary["versions"] == 40
    assert summary["workers_lost"] == 0 and not summary["unplanned_exits"]
    assert summary["final_accuracy"] >= TARGET
    assert summary["final_accuracy"] == pytest.approx(reference_accuracy(sets), abs=0.01)
    check_link(summary, "ndnps", 8)
    assert summary["link_bytes"]["ps-host->workers-host"] > 0     # the forwarders' UDP faces


@pytest.mark.timeout(120)
def test_the_tcp_baseline_trains_the_same_over_the_same_link(run_bottleneck):
    sets = [*SMALL, "topology.workers=2", "training.max_versions=20", 'run.system="tcp"']
    summary = run_bottleneck(*sets)
    assert summary["ok"] is True and summary["versions"] == 20
    assert set(summary["exit_codes"].values()) == {0}
    assert summary["final_accuracy"] == pytest.approx(reference_accuracy(sets), abs=0.01)
    check_link(summary, "tcp", 2)
    # N copies of the model per version, every one through the link
    assert summary["ps_bytes_out_per_version_over_model"] == pytest.approx(2.0, abs=0.01)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("system", ["ndnps", "tcp"])
def test_two_jobs_share_the_bottleneck_and_both_complete(run_bottleneck, system):
    """scenarios/shared-bottleneck.toml: two PSs on the PS host, 4 workers each behind the
    link (ndnps, or two TCP PSs). Both jobs train as each would alone, and neither starves the
    other (the benchmark holds them to 20 % of an equal share; here only a gross imbalance
    fails)."""
    sets = [*SMALL, "training.max_versions=30", f'run.system="{system}"']
    summary = run_bottleneck(*sets, timeout=200, scenario="shared-bottleneck")
    assert summary["ok"] is True and not summary["unplanned_exits"]
    reference = reference_accuracy(sets, "shared-bottleneck")
    assert [j["ps"] for j in summary["jobs"]] == ["ps1", "ps2"]
    for job in summary["jobs"]:
        assert job["versions"] == 30 and job["workers"] == 4 and job["workers_lost"] == 0
        assert job["final_accuracy"] == pytest.approx(reference, abs=0.01)
    sharing = summary["sharing"]
    assert sharing["overlap_seconds"] > 0 and 0 < sharing["jain_index"] <= 1
    low, high = sharing["share_range"]
    assert 0.5 < low <= 1 <= high < 1.5, sharing
    assert summary["bottleneck"]["qdisc_drops_over_sent"] < 0.01


def udp_faces(run_dir: str) -> dict[str, dict]:
    """Each forwarder's UDP face over the veth, from its final status (traces/*-status.json)."""
    out = {}
    for host in ("ps-host", "workers-host"):
        status = json.loads((Path(run_dir) / "traces" / f"{host}-status.json").read_text())
        [face] = [f for f in status["faces"] if f["remote"].startswith("udp4://10.")]
        out[host] = face
    return out


@pytest.mark.timeout(400)
def test_jumbo_frames_carry_every_packet_whole(run_bottleneck):
    # links.mtu = 9000: the veth's MTU, the forwarders' UDP faces send datagrams of up to 8800
    # octets (an NDN packet's longest), so no segment is fragmented on the link (NDNLPv2's
    # counters stay at 0 both ways), where at 1500 each ~8 KB segment leaves as 6 fragments;
    # the TCP PS runs over the same veth: its segments as long as the MTU allows
    sets = [*SMALL, "topology.workers=4", "bottleneck.rate_mbps=1000.0",
            "training.max_versions=6", "training.eval_every=6"]
    jumbo = run_bottleneck(*sets, "links.mtu=9000")
    assert jumbo["ok"] and jumbo["versions"] == 6 and jumbo["bottleneck"]["mtu"] == 9000
    for host, face in udp_faces(jumbo["run_dir"]).items():
        frag = face["lp_fragmentation"]
        assert face["mtu"] == 8800, host
        assert (frag["fragmented"], frag["fragments_out"], frag["fragments_in"],
                frag["reassembled"]) == (0, 0, 0, 0), host
        assert face["counters"]["out_data"] + face["counters"]["in_data"] > 0, host
    plain = run_bottleneck(*sets)
    faces = udp_faces(plain["run_dir"])
    assert {f["mtu"] for f in faces.values()} == {1472}
    assert faces["ps-host"]["lp_fragmentation"]["fragmented"] > 0          # the pushes
    assert faces["workers-host"]["lp_fragmentation"]["reassembled"] > 0
    tcp = run_bottleneck(*sets, "links.mtu=9000", 'run.system="tcp"')
    start = next(json.loads(line) for line in
                 (Path(tcp["run_dir"]) / "metrics" / "ps.jsonl").read_text().splitlines()
                 if '"start"' in line)
    assert tcp["ok"] and len(start["mss"]) == 4
    assert all(1460 < mss <= 9000 - 40 for mss in start["mss"].values())
