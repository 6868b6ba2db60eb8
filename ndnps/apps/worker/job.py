"""One accepted training, steps 3-9 from a worker's side: the training content (join.py)
sets up the model, the data shard and the exchanges; registration (registration.py);
the gradients and the collect exchange (gradients.py); the pushed versions
(receiver.py over ndnps.exchanges.transport.subscriber); and the training loops here, sync (one
gradient per version) and async (step after step, on the newest version held).  A PS that
re-offers the task (it lost us, or it was restarted from a checkpoint) is followed: `resync`
fetches its content again and, after a restart, takes us back to its version."""
from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Protocol

import numpy as np

from ndnps.client.events import wait_event
from ndnps.client.fetcher import (MIN_RTO, TLP_FLOOR, FetchError, FetchStats, SegmentFetcher,
                                  reorder_floor)
from ndnps.client.security import Security
from ndnps.client.wire import Data
from ndnps.exchanges.ps.membership import follow
from ndnps.exchanges.transport.push_rate import PushMeter
from ndnps.exchanges.transport.subscriber import Subscriber
from ndnps.lab.metrics import Delta, MetricsWriter
from ndnps.ml.data import load_dataset
from ndnps.ml.models import build_model
from ndnps.ml.train import WorkerBatches
from ndnps.ndn.clock import monotonic
from ndnps.ndn.conventions import segment_number
from ndnps.ndn.rto import RtoEstimator
from ndnps.protocol import messages, names
from ndnps.protocol.codec import CodecError, param_spec

from ..common.launch import EXIT_JOB_FAILED, EXIT_OK
from .faults import Faults
from .gradients import Gradients
from .join import JobFailed, fetch_content, refetch_content
from .receiver import Receiver
from .registration import Registration


log = logging.getLogger("worker")


@dataclass
class WorkerCounters:
    segments_pushed: int = 0         # pushed segments accepted
    collect_probes: int = 0          # fetches started by a collect for a version we lack
    probe_segments: int = 0          # segments asked for by probes and recoveries
    rejected: int = 0                # pushed Data failing the signature check
    malformed: int = 0               # assembled versions that failed to decode
    mixed_objects: int = 0           # ... made of two objects' segments (a PS restarted)
    dropped_injected: int = 0        # fault injection
    forged_sent: int = 0             # fault injection
    register_tries: int = 0
    gradients_sent: int = 0
    reinserts: int = 0               # *insert* sent again after a forwarder reconnect
    resyncs: int = 0                 # the PS re-offered the task: content fetched again
    content_retries: int = 0         # the content fetch failed (PS gone?) and was started again
    versions_rolled_back: int = 0    # a resumed PS (checkpoint) restarted from an older version


class Host(Protocol):
    """What a job reads of the worker program that took it (ndnps.apps.worker)."""

    @property
    def app(self) -> Any: ...
    @property
    def gpu(self) -> str: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def faults(self) -> Faults: ...
    @property
    def slowdown(self) -> float: ...
    @property
    def synthetic(self) -> bool: ...
    @property
    def metrics(self) -> MetricsWriter: ...
    @property
    def content_patience(self) -> float: ...


class Job:
    """One accepted training, steps 3-9 from this worker's side."""

    def __init__(self, worker: Host, ps: str, train: str) -> None:
        self.worker, self.app = worker, worker.app
        self.gpu, self.ps, self.train = worker.gpu, ps, train
        self.sec = Security(worker.key, names.key(ps, train))
        self.counters = WorkerCounters()
        self.fetch_stats = FetchStats()
        self.fetcher = SegmentFetcher(self.app.express_future, self.sec.validator,
                                      stats=self.fetch_stats,
                                      reorder_floor=reorder_floor(self.app),
                                      patience=worker.content_patience)   # its ps_timeout
        self.knobs: dict = {}
        self.mode: str | None = None                # known once the content is in
        self.push_mode: str | None = None
        self.grads = Gradients(self, worker.faults, worker.slowdown,   # answering collects
                               worker.synthetic)
        self.rx = Receiver(self)                    # the pushed versions: receiver.py
        self.push_meter = PushMeter()               # what came by each push, for the PS's pacer
        self.newest_at = 0.0                        # when a push (or probe) brought it
        self.applied = -1                           # async: our last step the PS has collected
        self.step = 0                               # async: the step we compute next
        self.rewinds = 0                            # async: times a PS took self.step back
        self.params: np.ndarray | None = None
        self.model: Any = None                      # made with the content (setup)
        self.batches: WorkerBatches | None = None
        self.batch = 0
        self.done = False
        self.aborted = False
        self.version_event = asyncio.Event()
        self.reg = Registration(self)               # *insert*, refresh, *remove*
        self.sent_event = asyncio.Event()
        self.received_after: float | None = None
        self.last_from_ps = self.now()
        self.delta = Delta()
        self.tasks: set[asyncio.Task] = set()
        self.resyncing = False

    @staticmethod
    def now() -> float:
        return monotonic()

    @property
    def sub(self) -> Subscriber | None:
        """The receiver's subscriber (made with the content)."""
        return self.rx.sub

    @property
    def newest(self) -> int:
        """The newest version of the parameters we hold (-1 before the content)."""
        return self.rx.newest

    @newest.setter
    def newest(self, version: int) -> None:
        assert self.sub is not None                 # made with the content
        self.sub.newest[self.ps] = version

    @property
    def timer(self):
        """The probe timer (the subscriber's), once the content is in."""
        return None if self.sub is None else self.sub.timer

    def spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # ---- the whole job -------------------------------------------------------------------------

    async def run(self) -> int:
        try:
            await self.fetch_content()
            if self.push_mode == "persistent":
                await self.reg.register()
                self.spawn(self.reg.refresh())
            if self.mode == "sync":
                await self.train_sync()
            else:
                await self.train_async()
            if self.aborted:
                raise JobFailed("the PS aborted the training")
            log.info("training %s/%s done at version %d", self.ps, self.train, self.newest)
            return EXIT_OK
        except JobFailed as e:
            log.error("training %s/%s failed: %s", self.ps, self.train, e)
            self.worker.metrics.write({"event": "failed", "reason": str(e)})
            return EXIT_JOB_FAILED
        finally:
            await self.leave()

    # ---- step 3: training content --------------------------------------------------------------

    async def fetch_content(self) -> None:
        await fetch_content(self.fetcher, self.ps, self.train, self.gpu,
                            self.worker.content_patience, self.counters, self.setup)

    def setup(self, vec: np.ndarray, info: dict) -> None:
        self.info = info
        self.mode, self.push_mode = info["mode"], info["push_mode"]
        self.total_steps = int(info["total_steps"])
        self.knobs = k = info["knobs"]
        self.pspec = [(n, tuple(s)) for n, s in info["param_spec"]]
        self.batch = int(info["batch"])
        if self.grads.synthetic:
            # synthetic gradients need only the parameters' count: neither the model (its
            # own copy of the parameters) nor the data shard
            self.model = self.batches = None
            self.n_params = sum(math.prod(shape) for _, shape in self.pspec)
            if vec.size != self.n_params:
                raise CodecError("the parameters do not match their spec")
        else:
            self.model = build_model(info["model_spec"], int(info["seed"]))
            if param_spec(self.model.params) != self.pspec:
                raise CodecError("parameter spec does not match the model spec")
            self.n_params = self.model.n_params
            ds = load_dataset(info["dataset"], int(info["seed"]), **info["dataset_kwargs"])
            self.batches = WorkerBatches(ds, int(info["workers"]), int(info["index"]),
                                         self.batch, int(info["seed"]))
        self.fetcher.window = int(k["window"])
        if "initial_window" in k:           # (a PS of an older ndnps: the default)
            self.fetcher.windows.initial = float(k["initial_window"])
        # from now on the job's patience is the PS's ps_timeout (before the content came,
        # the worker's own: --content-patience)
        self.fetcher.patience = float(k["ps_timeout"])
        self.fetcher.max_tries = int(k["max_tries"])
        if "retx_suppression_ms" in k:      # (a PS of an older ndnps: NFD's, the default)
            self.fetcher.suppression = k["retx_suppression_ms"] / 1000
        if "retx_suppression_max_ms" in k:
            self.fetcher.suppression_max = k["retx_suppression_max_ms"] / 1000
        # the same estimator as the content fetch: its round trips are samples too
        rto = self.fetcher.rto
        rto.initial, rto.min_rto, rto.max_rto = (k["segment_timeout"], MIN_RTO,
                                                 4 * k["segment_timeout"])
        # the probe timer's base is the wait for a push (the slowest worker's compute
        # included); the subscriber caps it once overdue
        self.rx.sub = Subscriber(self.fetcher, RtoEstimator(k["probe_initial"], k["probe_k"],
                                                         k["probe_min"], k["probe_max"]),
                              gap_delay=k["gap_delay"], tail_delay=k["tail_delay"],
                              probe_min=k["probe_min"], probe_max=k["probe_max"],
                              stall=TLP_FLOOR)
        self.params = np.array(vec, np.float32)
        # a worker that (re)joins a training under way starts at the PS's current version
        self.newest = int(info.get("version", 0))
        self.step = int(info.get("step", 0))
        self.ps_restarts = int(info.get("restarts", 0))
        log.info("worker %s is %d of %d in %s/%s (%s, %s): %d parameters, %d steps, from "
                 "version %d", self.gpu, info["index"], info["workers"], self.ps, self.train,
                 self.mode, self.push_mode, self.n_params, self.total_steps, self.newest)

    async def resync(self) -> None:
        """The PS offered our task again: its content says where it is, and
        ndnps.exchanges.ps.membership.follow what we do about it."""
        if self.resyncing or self.params is None:
            return
        self.resyncing = True
        asked = self.now()          # what the new PS collects from now on stays collected
        try:
            vec, info = await refetch_content(self.fetcher, self.ps, self.train, self.gpu)
            version = int(info.get("version", 0))
            restarts = int(info.get("restarts", 0))
            step = int(info.get("step", self.step))
        except (FetchError, CodecError, ValueError, TypeError) as e:
            log.warning("resync: no training content (%s); going on as we are", e)
            return
        finally:
            self.resyncing = False
        if vec.size != self.n_params:
            return
        plan = follow(mode=str(self.mode), newest=self.newest, newest_at=self.newest_at,
                      asked=asked, step=self.step, ps_restarts=self.ps_restarts,
                      version=version, restarts=restarts, content_step=step)
        self.ps_restarts = plan.ps_restarts
        if plan.adopt:
            self.counters.resyncs += 1
            if version < self.newest:
                self.counters.versions_rolled_back += self.newest - version
            log.info("resync: the PS is at version %d (we were at %d)", version, self.newest)
            self.worker.metrics.write({"event": "resync", "from": self.newest, "to": version})
            assert self.sub is not None
            self.sub.restart(self.ps, version)
            self.params = np.array(vec, np.float32)
        if plan.rewind_to is not None:
            self.rewind(plan.rewind_to, asked)
        if plan.adopt:
            self.last_from_ps = self.now()
            self.version_event.set()
            self.sent_event.set()

    def rewind(self, step: int, before: float) -> None:
        """Steps from `step` on are to be computed (and collected) again: forget those the
        old PS collected (sent before `before`)."""
        self.grads.forget_from(step, before)
        self.applied = min(self.applied, step - 1)
        self.step = step
        # counted, not just compared: a rewind to the very step the loop is on must still
        # make it compute that step again
        self.rewinds += 1
        self.sent_event.set()
        self.version_event.set()                    # wait_params re-checks its condition

    async def leave(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        self.rx.close()
        if getattr(self, "push_mode", None) == "persistent":
            await self.reg.leave()

    # ---- steps 6 and 9: receiving parameters --------------------------------------------------

    def on_push(self, data: Data) -> None:
        """A *distribute* Data for this training (push, probe answer or confirmation)."""
        name = data.name
        conf = names.parse_confirm(name)
        if conf is not None:
            self.reg.on_confirm(conf, data)
            return
        d = names.parse_distribute(name)
        if d is None or (d.ps, d.train) != (self.ps, self.train):
            return
        if self.grads.faults.drop_push():
            self.counters.dropped_injected += 1
            return
        if not self.sec.verify(data):
            self.counters.rejected += 1
            return
        self.counters.segments_pushed += 1
        final = segment_number(data.final_block_id)
        content = data.content              # a view of the packet: the assembly joins them
        if not self.rx.asked(d.version, d.segment):     # (the answer to a recovery: not pushed)
            self.push_meter.on_pushed(self.now(), d.version, d.segment, len(content),
                                      bool(data.mark), final)
        self.rx.receive_segment(d.version, d.segment, content, final, pushed=True)

    def on_version(self, p: messages.Params) -> None:
        """A new version of the parameters, decoded (the receiver calls this)."""
        # the decoded view of the joined segments (read-only): the model loads copies of it
        self.params, self.done = p.vector, p.done
        self.newest_at = self.now()
        self.aborted = p.aborted
        self.applied = max(self.applied, p.collected.get(self.gpu, -1))
        self.last_from_ps = self.now()
        self.version_event.set()
        self.sent_event.set()                       # wakes wait_sent when the run is done

    async def wait_params(self, until: Callable[[], bool], patience: float | None = None) -> None:
        """Wait for parameters until `until()` holds, expecting version newest+1 meanwhile (the
        probe timer runs; unicast: fetched version by version).  Fails after ps_timeout without
        a word from the PS; with `patience`, just returns after that long."""
        self.received_after = None
        give_up = None if patience is None else self.now() + patience
        try:
            while not until():
                if self.push_mode == "unicast":
                    await self.rx.fetch_unicast(self.newest + 1)
                    continue
                assert self.sub is not None         # setup() made it with the content
                self.sub.expect(self.now(), self.ps, self.newest + 1)
                self.rx.schedule()
                self.version_event.clear()
                left = self.knobs["ps_timeout"] - (self.now() - self.last_from_ps)
                if left <= 0:
                    raise JobFailed(f"nothing from the PS for {self.knobs['ps_timeout']:.0f} s "
                                    f"(waiting for version {self.newest + 1})")
                if give_up is not None:
                    if self.now() >= give_up:
                        return
                    left = min(left, give_up - self.now())
                await wait_event(self.version_event, left)
        finally:
            if self.sub is not None:
                self.sub.stop_expecting(cancel=until() or patience is None)

    async def wait_sent(self, step: int, rewinds: int) -> None:
        """Until the PS has collected `step` (or the run is over, or the PS moved us: it
        wants a later step, or a resumed PS took us back); fails after ps_timeout."""
        while (step not in self.grads.sent_steps and not self.done and self.step == step
               and self.rewinds == rewinds):
            self.sent_event.clear()
            left = self.knobs["ps_timeout"] - (self.now() - self.last_from_ps)
            if left <= 0:
                raise JobFailed(f"the PS did not collect step {step} for "
                                f"{self.knobs['ps_timeout']:.0f} s")
            await wait_event(self.sent_event, left)

    # ---- step 7: the training loops ----------------------------------------------------------------

    async def device_time(self) -> None:
        """training.device_ms: an accelerator's step, emulated (the CPU free meanwhile)."""
        device = self.knobs.get("device_ms", 0.0)
        if device:
            await asyncio.sleep(device / 1000)

    async def train_sync(self) -> None:
        """Gradient of version v on batch for_step(v); wait for v+1; until a version says done."""
        while not self.done:
            v = self.newest
            if v < self.total_steps:
                await self.device_time()
                await self.grads.compute(v)
            # != : a resync may take us back to an older version (a resumed PS)
            await self.wait_params(lambda: self.newest != v or self.done)
            self.record(v)

    async def train_async(self) -> None:
        """Step k on the newest parameters held; once the PS has collected it, wait (boundedly)
        for a version that includes it, then go on (from where a resumed PS says, if one
        took us back meanwhile)."""
        while not self.done:
            k, rewinds = self.step, self.rewinds
            if k < self.total_steps:
                await self.device_time()
                await self.grads.compute(k)
                await self.wait_sent(k, rewinds)
                if self.step != k or self.rewinds != rewinds:
                    continue                        # moved on, or back (maybe to k itself)
                await self.wait_params(lambda: self.applied >= k or self.done
                                       or self.rewinds != rewinds,
                                       patience=self.knobs["probe_max"])
                if self.rewinds != rewinds:
                    continue                        # k is to be computed again
                self.record(k)
                if self.step == k:                  # else the PS already asks a later step
                    self.step = k + 1
            else:
                await self.wait_params(lambda: self.done or self.rewinds != rewinds)

    def record(self, step: int) -> None:
        g = self.grads
        sent = g.sent_steps.get(step)
        rec = dict(g.step_record)
        rec.update(version=self.newest, done=self.done,
                   wait_collect=(sent - g.ready_at[step]) if sent and step in g.ready_at else None,
                   distribute_latency=self.received_after,
                   probe_rto=self.timer.estimator.rto if self.timer else None,
                   segment_rto=self.fetcher.base_rto())
        counters = {**self.app.traffic(), **asdict(self.counters), **asdict(self.fetch_stats),
                    **asdict(self.rx.counters)}
        self.worker.metrics.write({**rec, **self.delta.take(counters)})
        g.ready_at.pop(step - 8, None)
        g.sent_steps.pop(step - 8, None)
