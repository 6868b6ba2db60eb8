"""Trainings with real processes: forwarder(s) + ``python -m ndnps.apps.ps`` + ``python -m
ndnps.apps.worker`` x 3, through unix sockets (and a lossy UDP link between two forwarders).

Small runs (digits MLP, a few epochs) so the file stays well under three minutes on 2 cores.
"""
from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest

from ndnps.ml.data import load_dataset
from ndnps.lab.metrics import read_metrics
from ndnps.lab.process import free_port, wait_until
from ndnps.ml.train import train_sync_reference

pytestmark = pytest.mark.slow

KEY = "integration-key"
WORKERS = ["w1", "w2", "w3"]


def start_workers(procs, sock, gpus=WORKERS, extra=None, key=KEY):
    """Workers on forwarder `sock`, each ready (its prefix registered) on return."""
    started = {}
    for gpu in gpus:
        argv = [sys.executable, "-m", "ndnps.apps.worker", "--name", gpu, "--key", key,
                "--metrics", str(procs.workdir / f"{gpu}.jsonl"), *(extra or {}).get(gpu, [])]
        started[gpu] = procs.spawn(gpu, argv, env={"NDN_CLIENT_TRANSPORT": f"unix://{sock}"})
    for gpu, proc in started.items():
        wait_until(lambda p=proc, g=gpu: f"worker {g} ready" in p.tail(), 30, proc, "ready")
    return started


def start_ps(procs, sock, *args, name="ps", key=KEY):
    argv = [sys.executable, "-m", "ndnps.apps.ps", "--key", key, "--linger", "1",
            "--metrics", str(procs.workdir / f"{name}.jsonl"),
            "--save", str(procs.workdir / f"{name}.npz"), *args]
    return procs.spawn(name, argv, env={"NDN_CLIENT_TRANSPORT": f"unix://{sock}"})


def finish(procs, ps, workers, timeout=90):
    """Exit codes of the PS and the workers, and the PS's final metrics record."""
    code = ps.wait(timeout)
    codes = {}
    for gpu, proc in workers.items():
        try:
            codes[gpu] = proc.wait(30)
        except Exception as e:             # say where it was: its last metrics lines
            path = procs.workdir / f"{gpu}.jsonl"
            tail = path.read_text().splitlines()[-3:] if path.exists() else []
            raise AssertionError(f"{e}\nlast metrics of {gpu}: {tail}\nPS: {ps.tail(5)}") from e
    records = read_metrics(procs.workdir / f"{ps.name}.jsonl")
    end = [r for r in records if r.get("event") == "end"]
    assert code == 0 and end, ps.tail()
    return codes, end[-1], records


def reference_accuracy(workers: int, epochs: int) -> float:
    ds = load_dataset("digits", 0)
    return train_sync_reference(ds, {"kind": "mlp", "hidden": [64]}, workers, epochs, 32, 0.1,
                                0.9)["final_accuracy"]


def worker_end(procs, gpu):
    return [r for r in read_metrics(procs.workdir / f"{gpu}.jsonl") if r.get("event") == "end"][-1]


@pytest.mark.timeout(120)
def test_sync_run_matches_the_single_process_reference(procs):
    sock = procs.forwarder()
    workers = start_workers(procs, sock)
    ps = start_ps(procs, sock, "--workers", ",".join(WORKERS), "--min-workers", "3",
                  "--epochs", "5")
    codes, end, records = finish(procs, ps, workers)
    assert codes == {g: 0 for g in WORKERS}
    ref = reference_accuracy(3, 5)
    assert abs(end["accuracy"] - ref) <= 0.01 and end["accuracy"] >= 0.95
    assert end["version"] == 5 * 14
    # the saved model is the one evaluated
    saved = np.load(procs.workdir / "ps.npz")
    assert set(saved.files) >= {"W0", "b0", "W1", "b1", "__meta__"}
    # the PS pushed each version once, whatever the number of workers
    versions = [r for r in records if "collect_wait" in r]
    assert len(versions) == 70 and all(r["segments_pushed"] == 3 for r in versions)
    model_bytes = 4810 * 4
    sent = np.median([r["bytes_sent"] for r in versions])
    assert model_bytes < sent < 1.3 * model_bytes
    for gpu in WORKERS:
        w = worker_end(procs, gpu)
        assert w["code"] == 0 and w["segments_pushed"] >= 70 * 3 and w["rejected"] == 0


@pytest.mark.timeout(120)
def test_async_run_reaches_the_target_accuracy(procs):
    sock = procs.forwarder()
    workers = start_workers(procs, sock)
    ps = start_ps(procs, sock, "--workers", ",".join(WORKERS), "--min-workers", "3",
                  "--mode", "async", "--momentum", "0.5", "--epochs", "10",
                  "--target-accuracy", "0.95", "--max-staleness", "6")
    codes, end, records = finish(procs, ps, workers)
    assert codes == {g: 0 for g in WORKERS}
    assert end["accuracy"] >= 0.95
    applied = [r for r in records if "staleness" in r]
    assert applied and all(r["staleness"] <= 6 for r in applied if r["applied"])


@pytest.mark.timeout(120)
def test_unicast_baseline_costs_the_ps_one_copy_per_worker(procs):
    sock = procs.forwarder()
    workers = start_workers(procs, sock)
    ps = start_ps(procs, sock, "--workers", ",".join(WORKERS), "--min-workers", "3",
                  "--epochs", "3", "--push-mode", "unicast")
    codes, end, records = finish(procs, ps, workers)
    assert codes == {g: 0 for g in WORKERS}
    assert abs(end["accuracy"] - reference_accuracy(3, 3)) <= 0.01
    versions = [r for r in records if "collect_wait" in r]
    assert all(r["segments_pushed"] == 0 for r in versions)
    sent = np.median([r["bytes_sent"] for r in versions[1:]])
    assert sent > 2.5 * 4810 * 4                  # ~3 copies of the model, one per worker
    assert end["params_served"] >= 3 * 3 * len(versions)    # each worker its own copy


@pytest.mark.timeout(120)
def test_a_busy_worker_declines_and_the_ps_goes_on_with_the_others(procs):
    sock = procs.forwarder()
    workers = start_workers(procs, sock, ["w1", "w2", "w3"])
    # long enough (~800 versions, a few seconds) to be still running when psb asks
    first = start_ps(procs, sock, "--ps", "psa", "--workers", "w1,w2", "--min-workers", "2",
                     "--epochs", "40", name="psa")
    wait_until(lambda: "2 workers" in first.tail(), 30, first, "training")
    second = start_ps(procs, sock, "--ps", "psb", "--workers", "w2,w3", "--min-workers", "1",
                      "--max-versions", "10", name="psb")
    codes_b, end_b, records_b = finish(procs, second, {"w3": workers["w3"]})
    tasks = {r["worker"]: r for r in records_b if r.get("event") == "task"}
    assert not tasks["w2"]["accepted"], tasks
    assert tasks["w2"]["reason"] == "busy with training /psa/t1", tasks
    assert tasks["w3"]["accepted"] and end_b["workers"] == ["w3"] and end_b["version"] == 10, \
        (tasks, end_b)
    codes_a, end_a, _ = finish(procs, first, {"w1": workers["w1"], "w2": workers["w2"]})
    assert codes_a == {"w1": 0, "w2": 0} and codes_b == {"w3": 0}, \
        (codes_a, codes_b, [p.tail(10) for p in workers.values()])


@pytest.mark.timeout(60)
def test_too_few_workers_accept_exit_3(procs):
    sock = procs.forwarder()
    start_workers(procs, sock, ["w1"])
    ps = start_ps(procs, sock, "--workers", "w1,nobody", "--min-workers", "2",
                  "--task-tries", "2", "--task-timeout", "0.3")
    assert ps.wait(30) == 3
    assert "only 1 of 2 workers accepted" in ps.tail()


def _two_forwarders(procs, loss: float) -> tuple[str, str]:
    """PS side A and workers' side B, joined by UDP; A -> B loses `loss` of its packets."""
    port_a, port_b = free_port(), free_port()
    conf_a = procs.workdir / "a.toml"
    conf_b = procs.workdir / "b.toml"
    conf_a.write_text(textwrap.dedent(f"""
        [[faces]]
        name = "b"
        uri = "udp4://127.0.0.1:{port_b}"
        loss = {loss}
    """) + "".join(f'[[routes]]\nprefix = "/{g}"\nface = "b"\n' for g in WORKERS))
    conf_b.write_text(textwrap.dedent(f"""
        [[faces]]
        name = "a"
        uri = "udp4://127.0.0.1:{port_a}"
        [[routes]]
        prefix = "/ps"
        face = "a"
    """))
    return (procs.forwarder("fwda", udp=port_a, config=conf_a),
            procs.forwarder("fwdb", udp=port_b, config=conf_b))


@pytest.mark.timeout(150)
def test_pushes_lost_on_a_lossy_link_are_recovered_and_the_run_stays_correct(procs):
    sock_a, sock_b = _two_forwarders(procs, loss=0.05)
    workers = start_workers(procs, sock_b)
    ps = start_ps(procs, sock_a, "--workers", ",".join(WORKERS), "--min-workers", "3",
                  "--epochs", "5", "--probe-initial", "0.3", "--segment-timeout", "0.3",
                  "--collect-lifetime", "0.5")
    codes, end, _ = finish(procs, ps, workers, timeout=120)
    assert codes == {g: 0 for g in WORKERS}
    assert abs(end["accuracy"] - reference_accuracy(3, 5)) <= 0.01
    ends = [worker_end(procs, g) for g in WORKERS]
    recovered = sum(w["probes"] + w["collect_probes"] + w["gap_fetches"] for w in ends)
    assert recovered >= 1 and sum(w["probe_segments"] for w in ends) >= 1


@pytest.mark.timeout(120)
def test_every_push_lost_at_one_worker_the_probe_timer_recovers(procs):
    sock = procs.forwarder()
    workers = start_workers(procs, sock, extra={"w2": ["--drop-pushes-prob", "1.0"]})
    ps = start_ps(procs, sock, "--workers", ",".join(WORKERS), "--min-workers", "3",
                  "--epochs", "3", "--probe-initial", "0.3")
    codes, end, _ = finish(procs, ps, workers)
    assert codes == {g: 0 for g in WORKERS}
    assert abs(end["accuracy"] - reference_accuracy(3, 3)) <= 0.01
    w2 = worker_end(procs, "w2")
    assert w2["dropped_injected"] >= 42 and w2["segments_pushed"] == 0
    assert w2["probes"] >= 1                  # the final version: nothing but the timer
    assert w2["probe_segments"] >= 42 * 3


@pytest.mark.timeout(120)
def test_a_forged_gradient_is_rejected_and_never_applied(procs):
    sock = procs.forwarder()
    workers = start_workers(procs, sock, extra={"w3": ["--forge-gradient-at", "7"]})
    ps = start_ps(procs, sock, "--workers", ",".join(WORKERS), "--min-workers", "3",
                  "--epochs", "3")
    codes, end, _ = finish(procs, ps, workers)
    assert codes == {g: 0 for g in WORKERS}
    assert end["rejected"] >= 1
    assert worker_end(procs, "w3")["forged_sent"] >= 1
    assert abs(end["accuracy"] - reference_accuracy(3, 3)) <= 0.01
