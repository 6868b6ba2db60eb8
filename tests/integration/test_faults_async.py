"""Faults in async mode, with real processes (docs/faults.md): a worker killed with SIGKILL and
restarted rejoins from the step it had reached; the PS killed and restarted resumes from its
checkpoint, and the workers go back to the steps it recorded."""
from __future__ import annotations

import pytest

from ndnps.lab.metrics import read_metrics
from ndnps.lab.process import wait_until

from test_faults import events, restart_w2_and_finish
from test_training import WORKERS, finish, start_ps, start_workers, worker_end

pytestmark = pytest.mark.slow

ASYNC = ["--workers", ",".join(WORKERS), "--mode", "async", "--momentum", "0.5",
         "--task-timeout", "0.5"]


def applied(procs, name="ps") -> int:
    path = procs.workdir / f"{name}.jsonl"
    try:
        records = read_metrics(path)
    except (OSError, ValueError):           # not there yet, or a line being written
        return -1
    return max((r["version"] for r in records if r.get("applied")), default=-1)


@pytest.mark.timeout(150)
def test_async_killed_worker_rejoins_from_its_step(procs):
    sock = procs.forwarder()
    workers = start_workers(procs, sock)
    ps = start_ps(procs, sock, *ASYNC, "--min-workers", "2", "--epochs", "20",
                  "--worker-timeout", "2", "--rejoin-interval", "0.5")
    wait_until(lambda: applied(procs) >= 30, 60, ps, "30 gradients applied")
    workers["w2"].kill()
    end, records = restart_w2_and_finish(procs, sock, workers, ps)
    assert end["accuracy"] >= 0.9
    assert end["workers"] == WORKERS and end["lost"] == []
    assert end["workers_lost"] == 1 and end["workers_rejoined"] == 1
    # the new process started at the step after the last one the PS had of w2, not at 0
    back = records.index(events(records, "rejoined")[0])
    before = [r["step"] for r in records[:back] if r.get("worker") == "w2" and "step" in r]
    steps = [r["step"] for r in read_metrics(procs.workdir / "w2-again.jsonl") if "step" in r]
    assert before and steps and min(steps) == max(before) + 1
    assert worker_end(procs, "w2-again")["code"] == 0
    # every step of w2 applied at most once, nothing twice
    w2_steps = [r["step"] for r in records if r.get("worker") == "w2" and "step" in r]
    assert len(w2_steps) == len(set(w2_steps))


@pytest.mark.timeout(200)
def test_async_ps_killed_and_restarted_resumes_from_its_checkpoint(procs):
    sock = procs.forwarder()
    workers = start_workers(procs, sock)
    ckpt = procs.workdir / "ps.ckpt.npz"
    args = [*ASYNC, "--min-workers", "3", "--epochs", "20", "--checkpoint", str(ckpt),
            "--checkpoint-every", "10"]
    ps = start_ps(procs, sock, *args)
    wait_until(lambda: applied(procs) >= 40, 60, ps, "40 gradients applied")
    ps.kill()
    assert ckpt.exists()
    ps2 = start_ps(procs, sock, *args, name="ps2")
    codes, end, records = finish(procs, ps2, workers, timeout=150)
    assert codes == {g: 0 for g in WORKERS}
    assert end["accuracy"] >= 0.9 and end["restarts"] == 1
    resumed = events(records, "start")[-1]["resumed_from"]
    assert resumed >= 10 and resumed % 10 == 0
    # after the restart, each worker's steps go on from where the checkpoint had it, once each
    for gpu in WORKERS:
        steps = [r["step"] for r in records if r.get("worker") == gpu and "step" in r]
        assert steps == sorted(steps) and len(steps) == len(set(steps))
        w = read_metrics(procs.workdir / f"{gpu}.jsonl")
        assert events(w, "end")[-1]["code"] == 0
