"""What lets the simulator run the real programs in one process and in virtual time: each
program's `prepare(argv)` (no socket), the process clock (ndnps.ndn.clock) substituted by a
virtual loop's, the worker's device rest awaited (never a blocking sleep), and synthetic
gradients."""
from __future__ import annotations

import asyncio
import importlib
import math
import time

import numpy as np
import pytest

from ndnps.apps.common.launch import EXIT_USAGE, Prepared
from ndnps.apps.ps.__main__ import ParameterServer
from ndnps.apps.worker.__main__ import Worker
from ndnps.apps.worker.job import Job
from ndnps.client.app import App
from ndnps.client.face import Face
from ndnps.client.wire import parse_data
from ndnps.lab.metrics import RUN_T0_ENV, MetricsWriter, read_metrics
from ndnps.ml.synthetic import SCALE, synthetic_gradient
from ndnps.ndn import clock
from ndnps.protocol import messages
from ndnps.protocol.config import PsConfig, from_table
from ndnps.sim.loop import VirtualLoop
from tests.support.memnet import MemNet

KEY = b"k"

PEER = """[training]
ps = "ring"
train = "t1"
workers = ["p1", "p2"]
collective = "ring"
key = "k"
"""
STAGE = """[training]
ps = "pipe"
train = "t1"
workers = ["m1-a", "m1-b"]
collective = "ring"
machines = 1
stage_kinds = ["a:1", "b:2"]
stage_layers = [1, 1]
hidden = [16]
key = "k"
"""
CONTROLLER = """[share]
name = "ctl"
policy = "time-division"

[[jobs]]
ps = "psb"
train = "t"
workers = ["w1"]
aggregate_at = "fwd"
key = "kb"
"""


def argv_of(tmp_path, program: str) -> tuple[list[str], list[str]]:
    """A good and a bad command line of `program`."""
    files = {"peer": PEER, "stage": STAGE, "controller": CONTROLLER}
    path = tmp_path / f"{program}.toml"
    if program in files:
        path.write_text(files[program])
    good = {"ps": ["--workers", "w1", "--key", "k"],
            "worker": ["--name", "w1", "--slowdown", "2", "--synthetic-gradients"],
            "peer": ["--name", "p1", "--config", str(path)],
            "stage": ["--name", "m1-a", "--config", str(path)],
            "controller": ["--config", str(path)]}[program]
    bad = {"ps": ["--workers", "w1", "--lr", "-1"],
           "worker": ["--name", "w1", "--slowdown", "0.5"],
           "peer": ["--name", "p9", "--config", str(path)],
           "stage": ["--name", "m9-a", "--config", str(path)],
           "controller": ["--config", str(tmp_path / "missing.toml")]}[program]
    return good, bad


@pytest.mark.parametrize("program", ["ps", "worker", "peer", "stage", "controller"])
def test_prepare_gives_the_role_without_a_socket_or_the_usage_code(program, tmp_path,
                                                                     monkeypatch, capsys):
    def no_socket(*_a, **_k):
        raise AssertionError("prepare opened a connection")
    monkeypatch.setattr(Face, "open", no_socket)
    good, bad = argv_of(tmp_path, program)
    module = importlib.import_module(f"ndnps.apps.{program}.__main__")
    p = module.prepare(good + ["--link-repair", "--start-after", "1.5"])
    assert isinstance(p, Prepared) and callable(p.role)
    assert isinstance(p.metrics, MetricsWriter)
    assert p.args.link_repair and p.args.start_after == 1.5 and not p.args.lp_reliability
    p.metrics.close()
    assert module.prepare(bad) == EXIT_USAGE
    assert "bad configuration" in capsys.readouterr().err


def test_an_app_on_a_given_face_keeps_the_connection_flags():
    face = Face("unix:///nowhere.sock")
    app = App("sim://x", face=face, link_repair=True, lp_reliability=True)
    assert app.face is face and app.link_repair and app.lp_reliability


# ---- the process clock ------------------------------------------------------------------------

def test_a_substituted_clock_is_read_everywhere_and_restored(monkeypatch, tmp_path):
    monkeypatch.setenv(RUN_T0_ENV, "123.0")         # ignored while substituted
    now = [10.0]
    assert clock.run_origin() == 123.0
    with clock.use(lambda: now[0], origin=4.0):
        assert clock.monotonic() == 10.0 and clock.run_origin() == 4.0
        assert clock.wall() == clock.SIM_EPOCH + 6.0
        w = MetricsWriter(tmp_path / "m.jsonl", role="worker")
        now[0] = 12.5
        w.write({"step": 0})
        w.close()
        with clock.use(lambda: 99.0, origin=0.0, epoch=1000.0):     # blocks nest
            assert clock.wall() == 1099.0
        assert clock.monotonic() == 12.5
    rec = read_metrics(tmp_path / "m.jsonl")[0]
    assert rec["t"] == 8.5 and rec["ts"] == clock.SIM_EPOCH + 8.5
    assert clock.run_origin() == 123.0
    assert abs(clock.monotonic() - time.monotonic()) < 1.0
    assert abs(clock.wall() - time.time()) < 1.0


# ---- the worker's gradients in virtual time --------------------------------------------------

def config(**kw) -> PsConfig:
    return PsConfig.of(from_table({"workers": ["w1"], "key": KEY.decode(), "max_versions": 2,
                                   **kw}))


def ready_job(slowdown: float = 1.0, synthetic: bool = False) -> Job:
    net = MemNet()
    ps = ParameterServer(config(), net.app())
    ps.prepare_content(["w1"])
    job = Job(Worker("w1", KEY, net.app(), slowdown=slowdown, synthetic=synthetic), "ps", "t1")
    blob = b"".join(bytes(parse_data(w).content) for w in ps.content.contents["w1"])
    job.setup(*messages.parse_content(blob))
    return job


def in_virtual_time(coro_of):
    """Run `coro_of()` on a VirtualLoop whose clock is the process's: (result, virtual s)."""
    loop = VirtualLoop()
    with clock.use(loop.time, origin=0.0), asyncio.Runner(loop_factory=lambda: loop) as r:
        result = r.run(coro_of())
    return result, loop.time()


def gradient_of(job: Job, step: int) -> messages.Gradient:
    wires = job.grads.store.get(step)
    assert wires is not None
    return messages.parse_gradient(b"".join(bytes(parse_data(w).content) for w in wires),
                                   job.n_params, step)


def test_a_slow_devices_rest_is_awaited_in_virtual_time_not_slept():
    async def compute() -> Job:
        job = ready_job(slowdown=3.0)
        job.knobs.update(device_time="profiled", layer_seconds=[0.25, 0.25])
        answered = []
        # the loop stays free meanwhile: a timer due within the rest runs before it ends
        asyncio.get_running_loop().call_later(1.0, lambda: answered.append(clock.monotonic()))
        await job.grads.compute(0)
        assert answered == [1.0] and job.grads.store.get(0) is not None
        return job
    w0 = time.monotonic()
    job, virtual = in_virtual_time(compute)
    owed = 3.0 * 0.5 * job.batch                    # factor x the profiled cost
    assert virtual == pytest.approx(owed) and owed > 40
    assert time.monotonic() - w0 < 10               # (a blocking sleep would take `owed`)
    assert job.grads.step_record["compute"] == pytest.approx(owed)
    assert job.grads.step_record["compute_at"] == clock.SIM_EPOCH
    assert gradient_of(job, 0).compute == pytest.approx(owed)


def test_synthetic_gradients_have_the_models_size_and_cost_the_profile():
    async def compute() -> Job:
        job = ready_job(slowdown=2.0, synthetic=True)
        assert job.model is None and job.batches is None        # no model, no data shard
        await job.grads.compute(0)
        job.knobs.update(device_time="profiled", layer_seconds=[0.01])
        await job.grads.compute(1)
        return job
    job, virtual = in_virtual_time(compute)
    assert virtual == pytest.approx(2.0 * 0.01 * job.batch)     # step 0 cost nothing
    for step in (0, 1):
        g = gradient_of(job, step)
        assert g.vector.size == job.n_params == ready_job().n_params
        assert np.array_equal(g.vector, synthetic_gradient(job.n_params, step, "w1"))
        assert math.isnan(g.loss)


def test_synthetic_gradients_are_deterministic_finite_and_small():
    a = synthetic_gradient(1000, 3, "w1")
    assert a.dtype == np.float32 and a.shape == (1000,)
    assert np.array_equal(a, synthetic_gradient(1000, 3, "w1"))
    values = {float(synthetic_gradient(4, s, w)[0]) for s in range(20) for w in ("w1", "w2")}
    assert len(values) > 20                                      # (worker, step) tell them apart
    assert all(math.isfinite(v) and abs(v) <= SCALE for v in values)
