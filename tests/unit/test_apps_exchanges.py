"""Each exchange of ndnps.apps.ps / ndnps.apps.worker on its own, with in-process fakes
(tests.support.memnet, or plain reply callables): task assignment, training content, registration,
collect, probes, leaving."""
from __future__ import annotations

import asyncio

import numpy as np
import pytest

from ndnps.apps.ps.__main__ import ParameterServer
from ndnps.apps.worker.job import Job
from ndnps.apps.worker.__main__ import Worker
from ndnps.client.events import now_ms
from ndnps.client.wire import parse_data
from ndnps.protocol import messages, names
from tests.support.memnet import MemNet
from ndnps.protocol.config import PsConfig, from_table

KEY = b"k"


def config(**kw):
    return PsConfig.of(from_table({"workers": ["w1", "w2"], "min_workers": 1,
                                   "key": KEY.decode(), "task_timeout": 0.2, "task_tries": 2,
                                   "linger": 0.1, "max_versions": 2, **kw}))


async def started(net, *gpus):
    workers = [Worker(g, KEY, net.app()) for g in gpus]
    tasks = [asyncio.create_task(w.run()) for w in workers]
    await asyncio.sleep(0)
    return workers, tasks


def stop(*tasks):
    for t in tasks:
        t.cancel()


# ---- step 2: task assignment ------------------------------------------------------------------

@pytest.mark.asyncio
async def test_task_accepted_reasked_accepted_busy_declined():
    net = MemNet()
    (w1,), tasks = await started(net, "w1")
    ps_a = ParameterServer(config(train="tA"), net.app())
    ps_b = ParameterServer(config(train="tB"), net.app())
    assert await ps_a.roster.assign_task("w1") == (True, "")
    assert await ps_a.roster.assign_task("w1") == (True, "")      # the same PS again: still yes
    ok, reason = await ps_b.roster.assign_task("w1")
    assert not ok and reason == "busy with training /ps/tA"
    assert (w1.job.ps, w1.job.train) == ("ps", "tA")
    stop(*tasks, w1.job_task)


@pytest.mark.asyncio
async def test_too_few_acceptances_fail_clearly(caplog):
    net = MemNet()
    _, tasks = await started(net, "w1")
    busy = ParameterServer(config(train="other", workers=["w1"]), net.app())
    assert (await busy.roster.assign_task("w1"))[0]
    ps = ParameterServer(config(workers=["w1", "w2"], min_workers=1), net.app())
    assert await ps.run() == 3                 # w1 busy, w2 not running
    assert "only 0 of 2 workers accepted" in caplog.text
    assert "busy with training /ps/other" in caplog.text and "w2" in caplog.text
    stop(*tasks)


@pytest.mark.asyncio
async def test_goes_on_with_those_that_accept():
    net = MemNet()
    _, tasks = await started(net, "w1")
    ps = ParameterServer(config(workers=["w1", "w2"], min_workers=1), net.app())
    assert await ps.run() == 0
    assert [w.gpu for w in ps.workers] == ["w1"]
    stop(*tasks)


# ---- step 3: training content ----------------------------------------------------------------

def content_of(ps: ParameterServer, gpu: str):
    blob = b"".join(bytes(parse_data(w).content) for w in ps.content.contents[gpu])
    return messages.parse_content(blob)


def test_content_carries_spec_hyper_parameters_shard_and_initial_params():
    ps = ParameterServer(config(workers=["w1", "w2", "w3"]), MemNet().app())
    ps.prepare_content(["w1", "w3"])
    for index, gpu in enumerate(["w1", "w3"]):
        vec, info = content_of(ps, gpu)
        assert info["gpu"] == gpu and info["index"] == index and info["workers"] == 2
        assert info["model_spec"] == {"n_in": 64, "n_classes": 10, "kind": "mlp", "hidden": [64]}
        assert info["hyper"]["lr"] == 0.1 and info["batch"] == 32 and info["dataset"] == "digits"
        assert info["total_steps"] == 2
        np.testing.assert_array_equal(vec, np.concatenate(
            [v.reshape(-1) for v in ps.model.params.values()]))
    assert len(ps.content.contents["w1"]) == 3               # 4810 float32 in 8000-byte segments


@pytest.mark.asyncio
async def test_content_interest_is_held_until_the_assignment_is_over():
    ps = ParameterServer(config(workers=["w1", "w2"]), MemNet().app())
    got = []
    far = now_ms() + 10_000
    ps.content.serve(names.Content("ps", "t1", "w1", 1), got.append, {"deadline": far})
    ps.content.serve(names.Content("ps", "t1", "w9", 0), got.append, {"deadline": far})
    assert got == [] and len(ps.content.held) == 1           # w9 is no candidate: not even held
    ps.prepare_content(["w1", "w2"])
    assert got == [ps.content.contents["w1"][1]]


# ---- step 4: registration ----------------------------------------------------------------------

@pytest.mark.asyncio
@pytest.mark.looptime       # register_timeout decides the retry: a fake clock, not the host's load
async def test_registration_is_retried_until_confirmed_and_removed_on_leaving():
    lost = []

    def drop(kind, name, app):                 # the first insert is lost
        if kind == "interest" and names.parse_insert(name) and not lost:
            lost.append(name)
            return True
        return False

    net = MemNet(drop)
    (w1,), tasks = await started(net, "w1")
    ps = ParameterServer(config(workers=["w1"], register_timeout=0.05), net.app())
    assert await ps.run() == 0
    await asyncio.wait_for(tasks[0], 5)
    assert lost and w1.job.counters.register_tries == 2
    assert ps.counters.registrations >= 1 and ps.counters.removes == 1
    key = tuple(bytes(c) for c in names.node("ps") + names.node("t1"))
    assert not net.ppit.get(key)                    # *remove* took w1 out again


@pytest.mark.asyncio
async def test_one_remove_after_the_end_means_every_worker_left():
    """Forwarders prune: a *remove* goes upstream only once no downstream is left, so the PS
    of a tree hears one per trunk, not one per worker.  One after the end ends the linger (it
    used to wait for one per worker, re-pushing the final version every second meanwhile)."""
    net = MemNet()
    apps = [net.app() for _ in range(3)]
    remove = names.remove("ps", "t1")
    insert = names.insert("ps", "t1")
    for app in apps:
        net.interest(app, insert, 1000, False)
    ps = ParameterServer(config(workers=["w1", "w2", "w3"], linger=30.0), net.app())
    ps.serving.attach()
    assert await ps.app.register(names.node("ps"))
    ps.prepare_content(["w1", "w2", "w3"])
    heard = ps.counters.removes
    net.interest(apps[0], remove, 1000, True)           # others still there: not forwarded
    net.interest(apps[1], remove, 1000, True)
    await asyncio.sleep(0.01)
    assert ps.counters.removes == heard and not ps.serving.all_left
    ps.done = True
    net.interest(apps[2], remove, 1000, True)           # the last one: the PS hears it
    await asyncio.wait_for(ps.finish(), 5)
    assert ps.counters.removes == heard + 1 and ps.serving.all_left
    assert ps.counters.final_repushes == 0


# ---- step 5: collect, held until the gradient is ready -----------------------------------------

def ready_job(**kw) -> Job:
    net = MemNet()
    ps = ParameterServer(config(workers=["w1"], **kw), net.app())
    ps.prepare_content(["w1"])
    worker = Worker("w1", KEY, net.app())
    job = Job(worker, "ps", "t1")
    job.setup(*content_of(ps, "w1"))
    return job


@pytest.mark.asyncio
async def test_both_ends_fetch_with_the_trainings_retransmission_suppression():
    job = ready_job(retx_suppression_ms=4, retx_suppression_max_ms=16, window=5)
    assert job.fetcher.suppression == 0.004 and job.fetcher.window == 5
    assert job.fetcher.suppression_max == 0.016
    ps = ParameterServer(config(retx_suppression_ms=4, retx_suppression_max_ms=16),
                         MemNet().app())
    assert (ps.fetcher.suppression, ps.fetcher.suppression_max) == (0.004, 0.016)


@pytest.mark.asyncio
async def test_both_ends_start_their_congestion_windows_at_the_trainings_initial_window():
    job = ready_job(initial_window=6, window=5)
    assert job.fetcher.windows("ps").cwnd == 5          # at most the cap
    job = ready_job(initial_window=3, ps_timeout=42.0)
    assert job.fetcher.windows("ps").cwnd == 3
    assert job.fetcher.patience == 42.0                 # the PS's ps_timeout, once set up
    ps = ParameterServer(config(initial_window=4), MemNet().app())
    assert ps.fetcher.windows("w1").cwnd == 4


@pytest.mark.asyncio
async def test_collect_is_held_then_answered_with_every_reexpression():
    job = ready_job()
    first, again, expired = [], [], []
    now = now_ms()
    c0 = names.Collect("w1", "ps", "t1", 0, 0)
    job.grads.answer_collect(c0, first.append, now + 2000)
    job.grads.answer_collect(c0, again.append, now + 2000)       # re-expressed, new PIT token
    job.grads.answer_collect(c0, expired.append, now - 1)        # its lifetime is over
    assert first == again == expired == []
    await job.grads.compute(0)
    assert first == again == [job.grads.store.get(0)[0]] and expired == []
    assert 0 in job.grads.sent_steps and job.timer.armed          # probe timer armed on sending
    late = []
    job.grads.answer_collect(names.Collect("w1", "ps", "t1", 0, 1), late.append, now + 2000)
    assert late == [job.grads.store.get(0)[1]]                # ready: answered at once
    g = messages.parse_gradient(b"".join(bytes(parse_data(w).content) for w in job.grads.store.get(0)),
                                job.n_params, 0)
    assert g.step == 0 and g.base_version == 0 and g.loss > 0
    job.timer.cancel()


@pytest.mark.asyncio
async def test_collect_for_a_missing_version_starts_a_probe():
    job = ready_job()
    job.push_mode, job.mode = "persistent", "sync"
    started_probes = []
    job.rx.spawn_probe = lambda v, why: started_probes.append((v, why)) or True
    job.grads.answer_collect(names.Collect("w1", "ps", "t1", 3, 0), lambda w: None,
                       now_ms() + 1000)
    assert started_probes == [(3, "collect")] and job.counters.collect_probes == 1


@pytest.mark.asyncio
async def test_collect_probe_waits_out_the_reordering_window_after_a_push_segment():
    # with link repair the window covers the link's own repair of the lost segment: a fetch
    # started at once would race it
    job = ready_job()
    job.push_mode, job.mode = "persistent", "sync"
    job.fetcher.reorder_floor = 0.03
    started_probes = []
    job.rx.spawn_probe = lambda v, why: started_probes.append((v, why)) or True
    for step in (3, 4):
        job.sub.last_push_at = job.now()                # a pushed segment just came
        job.grads.answer_collect(names.Collect("w1", "ps", "t1", step, 0), lambda w: None,
                           now_ms() + 1000)
    assert started_probes == [] and job.counters.collect_probes == 0
    job.newest = 3                                      # version 3 completed meanwhile
    await asyncio.sleep(0.1)
    assert started_probes == [(4, "collect")] and job.counters.collect_probes == 1


@pytest.mark.asyncio
async def test_async_rewind_to_the_step_being_awaited_computes_it_again():
    """A resumed PS whose checkpoint predates our last collected step k takes us back to k
    while we wait for a version holding k: k must be computed and collectable again (once,
    k + 1 was taken instead and the PS waited forever for k)."""
    job = ready_job(mode="async", probe_max=0.3, probe_initial=0.2)
    loop = asyncio.create_task(job.train_async())
    await until(lambda: job.grads.store.get(0) is not None)
    got = []
    job.grads.answer_collect(names.Collect("w1", "ps", "t1", 0, 0), got.append,
                       now_ms() + 2000)
    assert len(got) == 1 and 0 in job.grads.sent_steps
    await until(lambda: job.sub.expected is not None)   # now waiting for a version holding 0
    job.grads.answer_collect(names.Collect("w1", "ps", "t1", 50, 0), got.append,
                       now_ms() + 2000)
    assert job.step == 0                            # a step never computed moves nothing
    job.rewind(0, job.now() + 1)                    # as resync() does for a resumed PS
    assert job.grads.store.get(0) is None and job.step == 0
    await until(lambda: job.grads.store.get(0) is not None)
    again = []
    job.grads.answer_collect(names.Collect("w1", "ps", "t1", 0, 0), again.append,
                       now_ms() + 2000)
    assert len(again) == 1 and job.step == 0
    loop.cancel()
    await asyncio.gather(loop, return_exceptions=True)
    job.timer.cancel()


@pytest.mark.asyncio
async def test_ps_collect_sends_when_the_estimate_says_and_learns():
    net = MemNet()
    (w1,), tasks = await started(net, "w1")
    ps = ParameterServer(config(workers=["w1"], max_versions=6), net.app())
    assert await ps.run() == 0
    est = ps.workers[0].estimator
    # the first gradient came after the worker's start-up: not a sample of its steps
    assert est.stats.samples == 5 and est.expected is not None and est.expected < 1.0
    stop(*tasks)


@pytest.mark.asyncio
async def test_a_first_collect_lost_is_asked_again_soon_not_after_collect_lifetime():
    """No history yet: a lost collect Interest must not cost collect_lifetime (here longer than
    worker_timeout, which would drop a live worker)."""
    lost = []

    def drop(kind, name, app):
        c = names.parse_collect(name) if kind == "interest" else None
        if c is not None and c.step == 0 and not lost:
            lost.append(c)
            return True
        return False
    net = MemNet(drop)
    (w1,), tasks = await started(net, "w1")
    ps = ParameterServer(config(workers=["w1"], max_versions=2, collect_lifetime=10.0,
                                worker_timeout=2.0), net.app())
    assert await asyncio.wait_for(ps.run(), 20) == 0
    assert lost and ps.counters.workers_dropped == 0 and ps.version == 2
    stop(*tasks)


@pytest.mark.asyncio
async def test_a_worker_slower_than_the_first_lifetimes_is_still_learnt():
    """Without a history the first collect Interests expire early and are asked again: the
    Data that answers a later try still dates the gradient (the worker held that Interest),
    so the PS learns when to ask; without samples it would re-ask every version."""
    net = MemNet()
    worker = Worker("w1", KEY, net.app(), slowdown=400.0)     # ~0.1 s per gradient
    tasks = [asyncio.create_task(worker.run())]
    await asyncio.sleep(0)
    ps = ParameterServer(config(workers=["w1"], max_versions=5), net.app())
    assert await asyncio.wait_for(ps.run(), 30) == 0
    assert ps.workers[0].estimator.stats.samples == 4     # (the first: its start-up)
    stop(*tasks)


# ---- steps 6 and 9: pushes, gaps, probes ------------------------------------------------------

@pytest.mark.asyncio
async def test_push_segments_out_of_order_duplicated_or_corrupt_never_corrupt_the_model():
    job = ready_job(hidden=[256])
    job.knobs["gap_delay"] = 10.0              # keep the gap fetch out of this test
    blob = messages.params_blob(np.arange(job.n_params, dtype=np.float32), 1, False)
    from ndnps.ndn.conventions import segment
    parts = segment(blob)
    final = len(parts) - 1
    for s in reversed(range(1, len(parts))):
        job.rx.receive_segment(1, s, parts[s], final)
        job.rx.receive_segment(1, s, parts[s], final)          # duplicate
    assert job.newest == 0
    job.rx.receive_segment(1, 0, parts[0], final)
    assert job.newest == 1 and job.params[5] == 5.0
    # a version whose segments disagree on the FinalBlockId is dropped, counted
    job.rx.receive_segment(2, 0, parts[0], final)
    job.rx.receive_segment(2, 1, parts[1], final + 1)
    assert job.counters.malformed == 1 and job.sub.assemblies.get(("ps", 2)) is None
    # a version whose blob does not decode (truncated) is dropped, counted, not applied
    short = segment(blob[:-4])
    for s, p in enumerate(short):
        job.rx.receive_segment(3, s, p, len(short) - 1)
    assert job.counters.malformed == 2 and job.newest == 1
    # wrong version inside the blob
    other = segment(messages.params_blob(np.zeros(job.n_params, np.float32), 9, False))
    for s, p in enumerate(other):
        job.rx.receive_segment(4, s, p, len(other) - 1)
    assert job.counters.malformed == 3 and job.newest == 1
    # segments of two objects made under the same names (a PS restarted and made version 5
    # again differently): whole in shape, so counted apart from malformed ones, not applied
    first = segment(messages.params_blob(np.ones(job.n_params, np.float32), 5, False))
    again = segment(messages.params_blob(np.full(job.n_params, 2, np.float32), 5, False))
    mixed = first[:1] + again[1:]
    for s, p in enumerate(mixed):
        job.rx.receive_segment(5, s, p, len(mixed) - 1)
    assert job.counters.mixed_objects == 1 and job.counters.malformed == 3 and job.newest == 1
    # old versions are ignored
    job.rx.receive_segment(1, 0, parts[0], final)
    assert job.newest == 1


def probe_answers(job, version: int = 1):
    """Version `version`'s segments, and an `express` answering probes for them (recording
    which segments were asked)."""
    blob = messages.params_blob(np.ones(job.n_params, np.float32), version, False)
    from ndnps.ndn.conventions import segment
    from ndnps.client.segments import sign_segments
    parts = segment(blob)
    wires = sign_segments(blob, lambda s: names.distribute("ps", "t1", version, s),
                          job.sec.signer)
    asked = []

    async def express(name, validator, **kw):
        d = names.parse_distribute(name)
        asked.append(d.segment)
        await asyncio.sleep(0.001)
        return parse_data(wires[d.segment])
    job.fetcher.express = express
    return parts, asked


async def until(cond, timeout: float = 5.0) -> None:
    async def wait():
        while not cond():
            await asyncio.sleep(0.005)
    await asyncio.wait_for(wait(), timeout)


@pytest.mark.asyncio
async def test_holes_in_a_push_are_fetched_once_and_only_them():
    job = ready_job(hidden=[256])
    parts, asked = probe_answers(job)
    last = len(parts) - 1
    for s in range(len(parts)):
        if s not in (2, 5):
            job.rx.receive_segment(1, s, parts[s], last, pushed=True)
    job.rx.spawn_probe(1, "timer")                 # the timer too: no second request
    await until(lambda: job.newest == 1)
    assert sorted(asked) == [2, 5]
    assert job.counters.probe_segments == 2       # fetched: each hole once


@pytest.mark.asyncio
async def test_ps_answers_probes_for_kept_versions_only():
    ps = ParameterServer(config(workers=["w1"], keep_versions=2), MemNet().app())
    for v in (1, 2, 3):
        ps.version = v
        ps.serving.publish(v, False)
    got = []
    for v in (1, 3, 4):
        ps.serving.on_probe(names.distribute("ps", "t1", v, 0), None, got.append, {})
    assert got == [ps.serving.publisher.get(3)[0]]         # 1 evicted, 4 not produced yet
    assert ps.serving.publisher.probes_answered == 1


@pytest.mark.asyncio
@pytest.mark.looptime       # a timer decides it: the loop's clock is fake, however loaded the host
async def test_registration_is_refreshed_periodically():
    net = MemNet()
    (w1,), tasks = await started(net, "w1")
    # each step a 20 ms device: the training outlasts the 0.5 s (compute takes no fake time)
    ps = ParameterServer(config(workers=["w1"], register_interval=0.05, max_versions=400,
                                device_ms=20.0), net.app())
    run = asyncio.create_task(ps.run())
    await asyncio.sleep(0.5)
    assert ps.counters.removes == 0                # still training
    assert ps.counters.registrations >= 5          # one insert, then a refresh every 50 ms
    run.cancel()
    stop(*tasks, w1.job_task)


@pytest.mark.asyncio
async def test_worker_gives_up_when_the_ps_falls_silent(caplog):
    silent = []
    net = MemNet(lambda kind, name, app: bool(silent))      # then nothing gets through
    (w1,), tasks = await started(net, "w1")
    ps = ParameterServer(config(workers=["w1"], ps_timeout=0.3, max_versions=10_000), net.app())
    run = asyncio.create_task(ps.run())
    while w1.job is None or w1.job.newest < 3:
        await asyncio.sleep(0.01)
    silent.append(True)
    assert await asyncio.wait_for(tasks[0], 5) == 3
    assert "nothing from the PS for 0 s" in caplog.text
    run.cancel()


@pytest.mark.asyncio
async def test_a_stopped_ps_tells_the_workers_to_leave(caplog):
    net = MemNet()
    (w1,), tasks = await started(net, "w1")
    ps = ParameterServer(config(workers=["w1"], max_versions=10_000), net.app())
    run = asyncio.create_task(ps.run())
    while w1.job is None or w1.job.newest < 3:
        await asyncio.sleep(0.01)
    run.cancel()                                    # SIGTERM at the PS
    assert await asyncio.wait_for(tasks[0], 2) == 3
    assert "the PS aborted the training" in caplog.text


@pytest.mark.asyncio
async def test_a_malformed_gradient_is_counted_and_refetched():
    ps = ParameterServer(config(workers=["w1"]), MemNet().app())
    ps.prepare_content(["w1"])
    good = messages.gradient_blob(np.ones(ps.n_params, np.float32), 0, 0, 1.0, 0.0)
    answers = [[good[:-8]], [messages.gradient_blob(np.ones(3, np.float32), 0, 0, 1.0, 0.0)],
               [good[:100], good[100:]]]

    async def fetch_held(name_of, hint, *args, **kw):
        import time
        return answers.pop(0), time.monotonic(), 0.001
    ps.fetcher.fetch_held = fetch_held
    g = await ps.collect(ps.workers[0], 0, asyncio.get_running_loop().time())
    assert g is not None and ps.counters.malformed == 2 and float(g.vector[0]) == 1.0
    assert ps.workers[0].last_segment == 1


@pytest.mark.asyncio
async def test_a_gradient_of_two_workers_incarnations_is_counted_apart_and_refetched():
    """The segments of one worker's gradient and of its restarted self's, made differently
    under the same names: each signed, whole in shape, not one object."""
    ps = ParameterServer(config(workers=["w1"]), MemNet().app())
    ps.prepare_content(["w1"])
    first = messages.gradient_blob(np.ones(ps.n_params, np.float32), 0, 0, 1.0, 0.0)
    again = messages.gradient_blob(np.full(ps.n_params, 3, np.float32), 0, 0, 1.0, 0.0)
    answers = [[first[:100], again[100:]], [again[:100], again[100:]]]

    async def fetch_held(name_of, hint, *args, **kw):
        import time
        return answers.pop(0), time.monotonic(), 0.001
    ps.fetcher.fetch_held = fetch_held
    g = await ps.collect(ps.workers[0], 0, asyncio.get_running_loop().time())
    assert g is not None and float(g.vector[0]) == 3.0
    assert ps.counters.mixed_objects == 1 and ps.counters.malformed == 0


@pytest.mark.asyncio
async def test_a_push_quiet_short_of_its_end_fetches_the_tail_and_a_late_push_cancels():
    job = ready_job(hidden=[256])
    parts, asked = probe_answers(job)
    last = len(parts) - 1
    job.knobs["tail_delay"] = 0.1
    job.fetcher.rto.observe(0.02)               # the tail waits 2 round trips: 40 ms
    assert job.rx.sub.tail_wait() == pytest.approx(0.04 + job.fetcher.reorder_floor)
    for s in (0, 1, 3):
        job.rx.receive_segment(1, s, parts[s], last, pushed=True)
    await until(lambda: asked == [2])           # the gap at once
    assert job.newest == 0 and job.sub.counters.tail_fetches == 0
    await until(lambda: job.newest == 1)        # the tail once the push went quiet
    assert sorted(asked) == list(range(2, 3)) + list(range(4, last + 1))
    assert job.sub.counters.tail_fetches == 1


@pytest.mark.asyncio
async def test_a_pushed_segment_arriving_during_a_recovery_is_not_fetched_again():
    job = ready_job(hidden=[256])
    parts, asked = probe_answers(job)
    last = len(parts) - 1
    job.fetcher.window = 2                      # the last segments wait their turn
    job.rx.receive_segment(1, 0, parts[0], last, pushed=True)
    job.rx.recover(1, list(range(1, last + 1)))
    t = job.rx.recoveries.get(1)
    job.rx.receive_segment(1, last, parts[last], last, pushed=True)
    assert last not in t.wanted and last not in t.flights
    job.rx.receive_segment(1, 1, parts[1], last, pushed=True)   # asked: the answer, likely
    assert 1 in t.wanted
    await until(lambda: job.newest == 1)


@pytest.mark.asyncio
async def test_resync_content_made_before_a_newer_push_takes_nobody_back():
    """A resumed PS re-offers the task; the worker's content fetch takes a while (a lost
    Interest: 2 s), and a fast training has pushed it newer versions meanwhile.  The content,
    made when it accepted, says the checkpoint's version: rolling back to it dropped the
    gradients the PS was collecting, and the PS dropped a live worker (chaos).  Without such a
    push the same content does take it back."""
    for pushed_meanwhile in (True, False):
        net = MemNet()
        ps = ParameterServer(config(workers=["w1"]), net.app())
        ps.restarts, ps.version = 1, 2              # resumed from a checkpoint at version 2
        ps.prepare_content(["w1"])
        job = Job(Worker("w1", KEY, net.app()), "ps", "t1")
        job.setup(*content_of(ps, "w1"))
        job.mode, job.push_mode = "sync", "persistent"
        job.ps_restarts = 0                         # we trained with the PS before it
        job.newest, job.newest_at = 5, job.now() - 1.0
        await job.grads.compute(5)
        parts = [bytes(parse_data(w).content) for w in ps.content.contents["w1"]]

        async def fetch(*_a, **_k):
            if pushed_meanwhile:
                job.newest, job.newest_at = 6, job.now()
            return parts
        job.fetcher.fetch = fetch
        await job.resync()
        if pushed_meanwhile:
            assert job.newest == 6 and job.grads.store.get(5) is not None
            assert job.counters.resyncs == 0 and job.ps_restarts == 1
        else:
            assert job.newest == 2 and job.grads.store.get(5) is None
            assert job.counters.resyncs == 1 and job.counters.versions_rolled_back == 3
        if job.timer is not None:
            job.timer.cancel()


@pytest.mark.asyncio
async def test_a_collect_older_than_the_gradients_kept_is_held_for_the_rewind():
    """A PS resumed from a checkpoint 5 versions back asks for a step whose gradient we no
    longer keep (we keep 4): the Interest is held, and answered once the resync has taken us
    back and the step is computed again."""
    job = ready_job()
    job.push_mode, job.mode = "persistent", "sync"
    for step in range(6):
        await job.grads.compute(step)
    assert job.grads.store.get(1) is None
    got = []
    job.grads.answer_collect(names.Collect("w1", "ps", "t1", 1, 0), got.append,
                       now_ms() + 2000)
    assert got == []
    job.rewind(1, job.now() + 1)                    # as resync() does
    await job.grads.compute(1)
    assert got == [job.grads.store.get(1)[0]]
    job.timer.cancel()
