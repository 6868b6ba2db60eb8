"""Application faults with real processes (docs/faults.md): a worker killed with SIGKILL
mid-training, with the PS going on without it ("continue") or waiting for it ("wait"), and a
restarted worker of the same name rejoining at the current version; the PS killed and restarted
from its checkpoint; the forwarder killed and restarted on the same socket. The same faults driven
by a scenario's [faults] table through the runner: test_faults_runner.py.
"""
from __future__ import annotations

import sys
import time

import pytest

from ndnps.lab.metrics import read_metrics
from ndnps.lab.process import wait_until

from test_training import KEY, WORKERS, finish, start_ps, start_workers, worker_end

pytestmark = pytest.mark.slow

# short failure detection and re-offers; 8 epochs of 14 versions (3 workers)
FAST = ["--workers", ",".join(WORKERS), "--min-workers", "2", "--epochs", "8",
        "--worker-timeout", "2", "--rejoin-interval", "0.5", "--task-timeout", "0.5"]


def ps_version(procs, name="ps") -> int:
    path = procs.workdir / f"{name}.jsonl"
    if not path.exists():
        return -1
    versions = [r["version"] for r in read_metrics(path) if "collect_wait" in r]
    return max(versions, default=-1)


def kill_at(procs, ps, worker, version):
    wait_until(lambda: ps_version(procs) >= version, 60, ps, f"at version {version}")
    worker.kill()


def restart_worker(procs, sock, gpu, tag="again"):
    argv = [sys.executable, "-m", "ndnps.apps.worker", "--name", gpu, "--key", KEY,
            "--metrics", str(procs.workdir / f"{gpu}-{tag}.jsonl")]
    proc = procs.spawn(f"{gpu}-{tag}", argv, env={"NDN_CLIENT_TRANSPORT": f"unix://{sock}"})
    wait_until(lambda: f"worker {gpu} ready" in proc.tail(), 30, proc, "ready")
    return proc


def start_and_kill_w2(procs, *ps_args, at=10):
    """A forwarder, w1..w3 and a PS with the FAST settings plus `ps_args`; w2 is killed
    (SIGKILL) once the PS reaches version `at`. Returns (socket, workers, PS)."""
    sock = procs.forwarder()
    workers = start_workers(procs, sock)
    ps = start_ps(procs, sock, *FAST, *ps_args)
    kill_at(procs, ps, workers["w2"], at)
    return sock, workers, ps


def events(records, kind):
    return [r for r in records if r.get("event") == kind]


def restart_w2_and_finish(procs, sock, workers, ps, after_drop=True):
    """w2 started again (once the PS has dropped it, with `after_drop`) and the run to its
    end; every process exits 0.  Returns the PS's (end record, records)."""
    if after_drop:
        wait_until(lambda: events(read_metrics(procs.workdir / "ps.jsonl"), "dropped"), 60, ps,
                   "dropping w2")
    again = restart_worker(procs, sock, "w2")
    codes, end, records = finish(procs, ps, {"w1": workers["w1"], "w3": workers["w3"],
                                             "w2-again": again}, timeout=120)
    assert codes == {"w1": 0, "w3": 0, "w2-again": 0}
    return end, records


@pytest.mark.timeout(150)
def test_killed_worker_continue_finishes_with_fewer_workers(procs):
    # long enough after the loss for re-offers (the first after rejoin_interval)
    _, workers, ps = start_and_kill_w2(procs, "--on-worker-loss", "continue", "--epochs", "20")
    codes, end, records = finish(procs, ps, {g: workers[g] for g in ("w1", "w3")}, timeout=120)
    assert codes == {"w1": 0, "w3": 0}
    assert end["accuracy"] >= 0.9 and end["version"] == 20 * 14
    assert end["workers"] == ["w1", "w3"] and end["lost"] == ["w2"]
    assert end["workers_lost"] == 1 and end["workers_rejoined"] == 0
    assert end["rejoin_offers"] >= 1             # re-offered while it was away
    versions = [r for r in records if "collect_wait" in r]
    short = [r for r in versions if r["gradients"] < 3]
    assert short and end["short_versions"] == len(short)
    assert all(r["gradients"] == 2 for r in short)
    assert [r["worker"] for r in events(records, "dropped")] == ["w2"]


@pytest.mark.timeout(150)
def test_restarted_worker_rejoins_at_the_current_version(procs):
    # a longer run: the restarted process needs seconds to start (imports, dataset)
    sock, workers, ps = start_and_kill_w2(procs, "--on-worker-loss", "continue",
                                          "--epochs", "40")
    end, records = restart_w2_and_finish(procs, sock, workers, ps, after_drop=False)
    assert end["accuracy"] >= 0.9 and end["version"] == 40 * 14
    assert end["workers"] == WORKERS and end["lost"] == []
    # w2 was lost and came back; on a loaded host another worker silent for the 2 s of
    # --worker-timeout may be dropped too (a fresh-clone CI run saw it): it must come back too
    assert "w2" in [r["worker"] for r in events(records, "dropped")]
    assert end["workers_lost"] == end["workers_rejoined"] >= 1
    rejoined = events(records, "rejoined")
    assert "w2" in [r["worker"] for r in rejoined]
    # it started from the PS's version at the time (not from 0) and trained to the end
    w2 = read_metrics(procs.workdir / "w2-again.jsonl")
    steps = [r["step"] for r in w2 if "step" in r]
    assert steps and min(steps) >= 10
    assert worker_end(procs, "w2-again")["code"] == 0
    # versions after the rejoin have all three gradients again
    versions = [r for r in records if "collect_wait" in r]
    assert versions[-1]["gradients"] == 3
    assert end["short_versions"] == sum(r["gradients"] < 3 for r in versions) > 0


@pytest.mark.timeout(150)
def test_wait_policy_collects_the_lost_gradient_again(procs):
    sock, workers, ps = start_and_kill_w2(procs, "--on-worker-loss", "wait")
    end, records = restart_w2_and_finish(procs, sock, workers, ps)
    assert end["accuracy"] >= 0.9 and end["version"] == 8 * 14
    assert end["workers_lost"] == 1 and end["workers_rejoined"] == 1
    assert end["collects_redone"] == 1 and end["short_versions"] == 0
    versions = [r for r in records if "collect_wait" in r]
    assert all(r["gradients"] == 3 for r in versions)


@pytest.mark.timeout(90)
def test_wait_policy_fails_when_the_worker_never_returns(procs):
    _, workers, ps = start_and_kill_w2(procs, "--on-worker-loss", "wait",
                                       "--rejoin-timeout", "2", at=5)
    assert ps.wait(60) == 3
    failed = events(read_metrics(procs.workdir / "ps.jsonl"), "failed")
    assert failed and "w2 did not rejoin" in failed[-1]["reason"]
    for gpu in ("w1", "w3"):                 # told the training is aborted: they leave
        assert workers[gpu].wait(30) == 3


@pytest.mark.timeout(200)
def test_ps_killed_and_restarted_resumes_from_its_checkpoint(procs):
    """kill -9 the PS mid-run; a new PS with the same checkpoint path resumes at the
    checkpoint's version; the workers (still in the job) fetch their content again, go back
    to that version, and the run finishes: every version after the checkpoint is redone once."""
    sock = procs.forwarder()
    workers = start_workers(procs, sock)
    ckpt = procs.workdir / "ps.ckpt.npz"
    args = ["--workers", ",".join(WORKERS), "--min-workers", "3", "--epochs", "20",
            "--checkpoint", str(ckpt), "--checkpoint-every", "7", "--task-timeout", "0.5"]
    ps = start_ps(procs, sock, *args)
    wait_until(lambda: ps_version(procs) >= 30, 60, ps, "at version 30")
    ps.kill()
    died_at = ps_version(procs)
    assert ckpt.exists()            # whole, even if the PS died writing the next one (.tmp)
    ps2 = start_ps(procs, sock, *args, name="ps2")
    codes, end, records = finish(procs, ps2, workers, timeout=150)
    assert codes == {g: 0 for g in WORKERS}
    assert end["accuracy"] >= 0.9 and end["version"] == 20 * 14
    start = events(records, "start")[-1]
    resumed = start["resumed_from"]
    assert resumed % 7 == 0 and 28 <= resumed <= died_at and end["restarts"] == 1
    versions = [r["version"] for r in records if "collect_wait" in r]
    assert versions == list(range(resumed + 1, 20 * 14 + 1))     # each version once, in order
    assert all(r["gradients"] == 3 for r in records if "collect_wait" in r)
    for gpu in WORKERS:
        # a worker already at the checkpoint's version (the PS died before pushing the next
        # one) has nothing to redo
        w = read_metrics(procs.workdir / f"{gpu}.jsonl")
        resyncs = events(w, "resync")
        wend = events(w, "end")[-1]
        assert len(resyncs) == wend["resyncs"] <= 1
        assert wend["versions_rolled_back"] == sum(r["from"] - r["to"] for r in resyncs)
        assert all(r["to"] == resumed and r["from"] > resumed for r in resyncs)
    # the final checkpoint says the training is done: a third PS refuses to redo it
    ps3 = start_ps(procs, sock, *args, name="ps3")
    assert ps3.wait(30) == 3 and "finished" in ps3.tail()


@pytest.mark.timeout(200)
def test_forwarder_killed_and_restarted_apps_reconnect_and_finish(procs):
    """kill -9 the forwarder mid-run and start a new one on the same socket: the PS and the
    workers reconnect (bounded backoff), register their prefixes again, the workers insert
    again (the new forwarder has no persistent PIT entry), and the run finishes."""
    sock = procs.forwarder()
    workers = start_workers(procs, sock)
    ps = start_ps(procs, sock, "--workers", ",".join(WORKERS), "--min-workers", "3",
                  "--epochs", "20", "--reconnect-timeout", "20")
    wait_until(lambda: ps_version(procs) >= 30, 60, ps, "at version 30")
    procs.by_name["fwd"].kill()
    time.sleep(1.0)
    assert procs.forwarder() == sock                  # the same socket
    codes, end, records = finish(procs, ps, workers, timeout=150)
    assert codes == {g: 0 for g in WORKERS}
    assert end["accuracy"] >= 0.9 and end["version"] == 20 * 14
    assert end["reconnects"] == 1 and end["workers_lost"] == 0
    versions = [r["version"] for r in records if "collect_wait" in r]
    assert versions == list(range(1, 20 * 14 + 1))
    for gpu in WORKERS:
        w = worker_end(procs, gpu)
        assert w["reconnects"] == 1 and w["reinserts"] == 1


@pytest.mark.timeout(60)
def test_forwarder_gone_for_good_ends_the_apps_with_exit_1(procs):
    sock = procs.forwarder()
    # both give up after 2 s (--reconnect-timeout; the default, 30 s, would only be waited out)
    workers = start_workers(procs, sock, gpus=["w1"],
                            extra={"w1": ["--reconnect-timeout", "2"]})
    ps = start_ps(procs, sock, "--workers", "w1", "--epochs", "200", "--reconnect-timeout", "2")
    wait_until(lambda: ps_version(procs) >= 5, 60, ps, "at version 5")
    procs.by_name["fwd"].kill()
    assert ps.wait(30) == 1 and "not back within 2 s" in ps.tail()
    assert workers["w1"].wait(30) == 1 and "not back within 2 s" in workers["w1"].tail()
