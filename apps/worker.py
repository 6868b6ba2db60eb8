"""A worker ("GPU"): ``python -m apps.worker --name w1 [--config scenario.toml] [flags]``.

Seed steps, from the worker's side (names in ndnps/protocol/names.py):

  2  on_task          /<gpu>/<ps>/<train>: accept, or decline when busy with another training
  3  fetch_content    /<ps>/<train>/<gpu>/<seg>: spec, hyper-parameters, shard, initial params
  4  register         /*insert*/<ps>/<train> until /*distribute*/<ps>/<train> confirms;
                      refreshed every register_interval (soft state); leave sends *remove*
  5  answer_collect   /<gpu>/<ps>/<train>/<step>/<seg>: answered at once, or held until the
                      gradient is ready (re-expressed Interests are held and answered too)
  6  on_push          /*distribute*/<ps>/<train>/<version>/<seg> pushed Data, assembled
  7  train_sync/async compute the next gradient on the new parameters
  9  probe            the probe timer (mean + k * dev of "gradient sent -> parameters received",
                      backed off) or a gap in the segments: fetch only the missing segments

The worker serves one training, then leaves and exits 0 when the PS's last version (marked
done) arrives.  Exit 3: the training failed (no content, no confirmation, PS silent for
ps_timeout); 1: other errors; 2: bad flags.

Fault injection for tests (--drop-pushes-prob, --forge-gradient-at): apps/faults.py.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np
from ndn.types import InterestCanceled, InterestNack, InterestTimeout, NetworkError, ValidationFailure

from ndnps.protocol import messages, names
from ndnps.protocol.codec import CodecError, MixedSegments, flatten, param_spec, unflatten
from ndnps.ml.data import load_dataset
from ndnps.ndn.rto import RtoEstimator
from ndnps.client.events import wait_event
from ndnps.client.fetcher import (MIN_RTO, TLP_FLOOR, FetchError, FetchStats, SegmentFetcher,
                           Transfer, reorder_floor)
from ndnps.lab.metrics import Delta, MetricsWriter
from ndnps.ml.models import build_model
from ndnps.ndn.conventions import segment_number
from ndnps.client.pending import HeldInterests
from ndnps.client.security import Security
from ndnps.client.wakeup import Wakeup
from ndnps.client.segments import sign_segments
from ndnps.exchanges.buffers import Recent
from ndnps.exchanges.subscriber import (Action, Complete, Corrupt, Fetch, Probe, Subscriber,
                                        SubscriberCounters)
from ndnps.ml.train import WorkerBatches
from ndnps.protocol.config import ConfigError, read_table

from .faults import FaultInjector, Faults
from .join import CONTENT_PATIENCE, JobFailed, fetch_content, refetch_content
from .launch import (EXIT_JOB_FAILED, EXIT_OK, EXIT_SIGNAL, EXIT_USAGE, app_parser,
                     limit_blas_threads, serve, setup_logging)
from .unicast import fetch_copy

log = logging.getLogger("worker")

REMOVE_TRIES = 8            # *remove* tries on leaving (each at most the RTO's ceiling)


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


class Job:
    """One accepted training, steps 3-9 from this worker's side."""

    def __init__(self, worker: "Worker", ps: str, train: str) -> None:
        self.worker, self.app = worker, worker.app
        self.gpu, self.ps, self.train = worker.gpu, ps, train
        self.sec = Security(worker.key, names.key(ps, train))
        self.counters = WorkerCounters()
        self.fetch_stats = FetchStats()
        self.fetcher = SegmentFetcher(self.app.express_future, self.sec.validator,
                                      stats=self.fetch_stats,
                                      reorder_floor=reorder_floor(self.app))
        self.knobs: dict = {}
        self.mode = self.push_mode = None           # known once the content is in
        self.held: HeldInterests[tuple[int, int]] = HeldInterests()    # (step, segment)
        self.gradients: Recent[int, list[bytes]] = Recent(4)      # step -> signed segments
        # the pushed versions: assembled, losses found (sans-I/O; made with the content)
        self.sub: Subscriber | None = None
        self.wake = Wakeup(self.now, self.on_wake)      # the subscriber's next timer
        self.recoveries: Recent[int, Transfer] = Recent(4)   # version -> its missing segments
        self.newest_at = 0.0                        # when a push (or probe) brought it
        self.applied = -1                           # async: our last step the PS has collected
        self.step = 0                               # async: the step we compute next
        self.rewinds = 0                            # async: times a PS took self.step back
        self.computed = -1                          # the highest step computed
        self.params: np.ndarray | None = None
        self.done = False
        self.aborted = False
        self.version_event = asyncio.Event()
        self.confirmed = asyncio.Event()
        self.sent_event = asyncio.Event()
        self.sent_steps: dict[int, float] = {}
        self.ready_at: dict[int, float] = {}
        self.received_after: float | None = None
        self.last_from_ps = self.now()
        self.delta = Delta()
        self.tasks: set[asyncio.Task] = set()
        self.faults = FaultInjector(worker.faults)
        self.resyncing = False

    @staticmethod
    def now() -> float:
        return time.monotonic()

    @property
    def newest(self) -> int:
        """The newest version of the parameters we hold (-1 before the content)."""
        return -1 if self.sub is None else self.sub.newest_of(self.ps)

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
                await self.register()
                self.spawn(self.refresh())
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
        self.model = build_model(info["model_spec"], int(info["seed"]))
        self.pspec = [(n, tuple(s)) for n, s in info["param_spec"]]
        if param_spec(self.model.params) != self.pspec:
            raise CodecError("parameter spec does not match the model spec")
        self.n_params = self.model.n_params
        ds = load_dataset(info["dataset"], int(info["seed"]), **info["dataset_kwargs"])
        self.batches = WorkerBatches(ds, int(info["workers"]), int(info["index"]),
                                     int(info["batch"]), int(info["seed"]))
        self.fetcher.window = int(k["window"])
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
        self.sub = Subscriber(self.fetcher, RtoEstimator(k["probe_initial"], k["probe_k"],
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
        """The PS offered our task again: it lost us (and took us back), or it was restarted
        from a checkpoint.  Its content says its current version: we go on from there, back
        in time after a PS restart (the versions after its checkpoint are redone; a gradient
        of step s is always computed on version s, so the redone ones are the same)."""
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
        if version < self.newest and self.newest_at > asked:
            # the PS pushed us a newer version after it offered the task: the content, made
            # when we accepted, is stale (a fast training moves on while the fetch goes on;
            # rolled back, we dropped gradients the PS was collecting and it dropped us)
            self.ps_restarts = restarts
            return
        if self.mode == "async" and step < self.step and restarts != self.ps_restarts:
            # a resumed PS: the steps after its checkpoint are computed again
            self.rewind(step, asked)
        if version == self.newest:
            return
        if restarts == self.ps_restarts and version < self.newest:
            return          # the same PS, content made before its last push: we are ahead
        self.ps_restarts = restarts
        self.counters.resyncs += 1
        if version < self.newest:
            self.counters.versions_rolled_back += self.newest - version
        log.info("resync: the PS is at version %d (we were at %d)", version, self.newest)
        self.worker.metrics.write({"event": "resync", "from": self.newest, "to": version})
        assert self.sub is not None
        self.sub.restart(self.ps, version)
        self.params = np.array(vec, np.float32)
        if self.mode == "sync":
            self.rewind(version, asked)
        self.last_from_ps = self.now()
        self.version_event.set()
        self.sent_event.set()

    def rewind(self, step: int, before: float) -> None:
        """Steps from `step` on are to be computed (and collected) again: forget those the
        old PS collected (sent before `before`)."""
        for s in [s for s, at in self.sent_steps.items() if s >= step and at < before]:
            del self.sent_steps[s]
        for s in [s for s in self.gradients.keys() if s >= step]:
            self.gradients.pop(s)
        self.applied = min(self.applied, step - 1)
        self.step = step
        # counted, not just compared: a rewind to the very step the loop is on must still
        # make it compute that step again
        self.rewinds += 1
        self.sent_event.set()
        self.version_event.set()                    # wait_params re-checks its condition

    # ---- step 4: registration, refresh, leave ----------------------------------------------

    def send_insert(self) -> None:
        self.app.express(names.insert(self.ps, self.train), self.sec.validator,
                         lifetime=int(self.knobs["register_timeout"] * 1000),
                         must_be_fresh=True, no_response=True)

    async def register(self) -> None:
        """Insert until the PS's confirmation comes back (it is a *distribute* Data, so it
        arrives through App.on_distribute, not as the answer to a pending Interest): every
        few round trips, for register_tries tries and ps_timeout at least (a PS restarting
        is silent for seconds, and tries a few round trips apart are over sooner)."""
        k = self.knobs
        give_up = self.now() + k["ps_timeout"]
        attempt = 0
        while attempt < int(k["register_tries"]) or self.now() < give_up:
            self.counters.register_tries += 1
            self.confirmed.clear()
            self.send_insert()
            wait = self.fetcher.bounded(k["register_timeout"] * min(2 ** attempt, 8))
            if await wait_event(self.confirmed, wait):
                return
            attempt += 1
        raise JobFailed(f"registration not confirmed after {attempt} tries in "
                        f"{k['ps_timeout']:g} s")

    async def refresh(self) -> None:
        while True:
            await asyncio.sleep(self.knobs["register_interval"])
            self.send_insert()

    async def leave(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        self.wake.cancel()
        self.end_recoveries(up_to=None)
        if getattr(self, "push_mode", None) != "persistent":
            return
        # the PS lingers until every worker has left: a lost *remove* would keep it for
        # `linger`, so a few tries, each a few round trips (a forwarder does not pass on the
        # *remove* of a worker that is not the last behind it: those never get an answer)
        for _ in range(REMOVE_TRIES):
            try:
                await self.app.express(names.remove(self.ps, self.train), self.sec.validator,
                                       lifetime=int(1000 * self.fetcher.bounded(0.3)),
                                       must_be_fresh=True)
                return
            except (InterestTimeout, InterestNack, ValidationFailure, NetworkError):
                continue
            except InterestCanceled:
                return

    # ---- step 5: gradients and the collect exchange ----------------------------------------------

    def compute(self, step: int) -> None:
        """The gradient of `step` on the newest parameters, published for the collect."""
        assert self.params is not None              # setup() made them before training
        base = self.newest
        self.computed = max(self.computed, step)
        started = time.time()
        t0 = time.perf_counter()
        self.model.load_params(unflatten(self.params, self.pspec))
        X, y = self.batches.for_step(step)
        loss, grads = self.model.loss_and_grad(X, y)
        vec = flatten(grads)
        compute = time.perf_counter() - t0
        if self.worker.slowdown > 1.0:           # a slower device: the same work takes longer
            until = t0 + compute * self.worker.slowdown
            if until - time.perf_counter() > 0.002:
                time.sleep(until - time.perf_counter() - 0.001)
            while time.perf_counter() < until:      # sleep overshoots by ~1 ms: spin the rest
                pass
            compute = time.perf_counter() - t0
        self.step_record = {"step": step, "base_version": base, "loss": loss, "compute": compute,
                            "compute_at": started}
        blob = messages.gradient_blob(vec, step, base, loss, compute)

        def name_of(s: int):
            return names.collect(self.gpu, self.ps, self.train, step, s)

        wires = sign_segments(blob, name_of, self.sec.signer)
        self.faults.gradient(step, vec, base, loss, compute, name_of, self.ps, self.train)
        self.gradients.put(step, wires)
        self.ready_at[step] = self.now()
        for key in [k for k in self.held.keys() if k[0] == step]:
            if key[1] < len(wires):
                if self.held.release(key, self.wire_for(step, key[1])) and key[1] == 0:
                    self.gradient_sent(step)

    def wire_for(self, step: int, seg: int) -> bytes:
        forged = self.faults.forged_wire(step, seg)
        if forged is not None:
            self.counters.forged_sent += 1
            return forged
        wires = self.gradients.get(step)
        assert wires is not None                    # asked only for a step whose gradient is held
        return wires[seg]

    def answer_collect(self, c: names.Collect, reply, deadline: int) -> None:
        self.last_from_ps = self.now()
        if self.mode == "async" and self.step < c.step <= self.computed + 1:
            # the PS has our step already (collected just before a resync took us back):
            # it wants the next one.  Never past what we computed: Interests are not signed,
            # a forged step must not make us skip the rest of the training
            self.step = c.step
            self.sent_event.set()
        wires = self.gradients.get(c.step)
        if wires is None:
            # not computed yet; or older than the gradients we keep, asked by a PS resumed
            # from its checkpoint: the resync its task offer starts takes us back there and
            # computes it again, and answers this.  (Ignored, the PS waited worker_timeout for
            # a live worker while the resync took its seconds, and dropped it: chaos)
            self.held.hold((c.step, c.segment), reply, deadline)
            if (self.mode == "sync" and self.push_mode == "persistent" and c.step > self.newest
                    and c.segment == 0):
                self.probe_for_collect(c.step)
            return
        if c.segment >= len(wires):
            return
        reply(self.wire_for(c.step, c.segment))
        if c.segment == 0:
            self.gradient_sent(c.step)

    def probe_for_collect(self, step: int) -> None:
        """The PS asks for a step whose parameters we lack: a push was lost (it pushes, then
        collects).  Fetched once the reordering window has passed since the last pushed
        segment came, as a hole is: with link repair on the path that window covers the
        link's own repair, which a fetch started at once would race (at 5 % loss on the link,
        0.7-1.2 such fetches per version, each asking again for what the link was repairing)."""
        assert self.sub is not None
        wait = self.sub.last_push_at + self.fetcher.reorder_floor - self.now()
        if wait > 0:
            asyncio.get_running_loop().call_later(wait, self.probe_for_collect, step)
        elif not self.done and step > self.newest and self.spawn_probe(step, "collect"):
            self.counters.collect_probes += 1

    def gradient_sent(self, step: int) -> None:
        if step in self.sent_steps:
            return
        self.sent_steps[step] = self.now()
        self.counters.gradients_sent += 1
        self.sent_event.set()
        if self.push_mode == "persistent" and self.sub is not None and not self.done:
            self.sub.sent(self.now(), self.ps)
            self.schedule()

    # ---- steps 6 and 9: receiving parameters --------------------------------------------------

    def on_push(self, name, meta_info, content, sig) -> None:
        """A *distribute* Data for this training (push, probe answer or confirmation)."""
        conf = names.parse_confirm(name)
        if conf is not None:
            if (conf.ps, conf.train) == (self.ps, self.train) and self.sec.verify(sig):
                self.last_from_ps = self.now()
                self.confirmed.set()
            return
        d = names.parse_distribute(name)
        if d is None or (d.ps, d.train) != (self.ps, self.train):
            return
        if self.faults.drop_push():
            self.counters.dropped_injected += 1
            return
        if not self.sec.verify(sig):
            self.counters.rejected += 1
            return
        self.counters.segments_pushed += 1
        self.receive_segment(d.version, d.segment, bytes(content or b""),
                             segment_number(meta_info.final_block_id), pushed=True)

    # the subscriber decides (ndnps.exchanges.subscriber); these do what it says

    def receive_segment(self, version: int, seg: int, content: bytes, final: int | None,
                        pushed: bool = False) -> None:
        if self.sub is None or self.params is None:
            return
        actions = self.sub.on_segment(self.now(), self.ps, version, seg, content, final, pushed)
        if pushed and version > self.newest and not any(isinstance(a, Corrupt) for a in actions):
            recovery = self.recoveries.get(version)
            if recovery is not None and seg not in recovery.flights:
                recovery.have(seg)                  # came by the push after all
        # (one asked for is likely the answer, seen here first: the fetch takes it next)
        self.act(actions)

    def act(self, actions: list[Action]) -> None:
        for a in actions:
            if isinstance(a, Complete):
                self.complete(a)
            elif isinstance(a, Corrupt):
                self.counters.malformed += 1
            elif isinstance(a, Fetch):
                self.recover(a.version, list(a.segments), a.whole)
            elif isinstance(a, Probe):
                self.spawn(self.probe(a.version, a.lifetime))
        self.schedule()

    def schedule(self) -> None:
        self.wake.at(self.sub.next_timer() if self.sub is not None else None)

    def on_wake(self) -> None:
        if self.sub is not None:
            self.act(self.sub.on_timer(self.now()))     # act() asks for the next wake-up

    def tail_wait(self) -> float:
        assert self.sub is not None
        return self.sub.tail_wait()

    def end_recoveries(self, up_to: int | None) -> None:
        """Stop the recoveries of versions up to `up_to` (None: all)."""
        for v in self.recoveries.keys():
            if up_to is None or v <= up_to:
                recovery = self.recoveries.pop(v)
                if recovery is not None:
                    recovery.close()

    def recover(self, version: int, segments: list[int], whole: bool = False) -> None:
        """Fetch `segments` of `version` by ordinary Interests (the nearest cache or the PS
        answers), adding them to the version's recovery under way if there is one; `whole`:
        and every other segment the first Data's FinalBlockId says exists."""
        if version <= self.newest or not segments:
            return
        t = self.recoveries.get(version)
        if t is None or t.finished:
            def name_of(s: int):
                return names.distribute(self.ps, self.train, version, s)

            def got(seg) -> None:
                self.receive_segment(version, seg.number, seg.content, seg.final)

            t = self.fetcher.transfer(name_of, fresh=True, on_segment=got, to_final=whole)
            self.recoveries.put(version, t)
            self.spawn(self.run_recovery(version, t))
        t.want(s for s in segments if s not in t.wanted)

    async def run_recovery(self, version: int, t: Transfer) -> None:
        try:
            await t.run()
        except FetchError:
            pass                                    # the probe timer fires again, backed off
        finally:
            self.counters.probe_segments += t.asked
            if self.recoveries.get(version) is t:
                self.recoveries.pop(version)

    def complete(self, got: Complete) -> None:
        assert self.sub is not None
        version = got.version
        try:
            p = messages.parse_params(got.blob, self.n_params, version)
        except CodecError as e:
            if isinstance(e, MixedSegments):
                self.counters.mixed_objects += 1
            else:
                self.counters.malformed += 1
            log.warning("parameters version %d malformed (%s); refetching", version, e)
            return
        expected = self.sub.expected
        waited = self.sub.accepted(self.now(), self.ps, version)
        if expected is not None and version >= expected[1]:
            self.received_after = waited
        self.end_recoveries(up_to=version)
        self.params, self.done = np.array(p.vector), p.done
        self.newest_at = self.now()
        self.aborted = p.aborted
        self.applied = max(self.applied, p.collected.get(self.gpu, -1))
        self.last_from_ps = self.now()
        self.version_event.set()
        self.sent_event.set()                       # wakes wait_sent when the run is done

    def spawn_probe(self, version: int, why: str) -> bool:
        """Version `version` is due and (partly) missing: fetch what we lack of it."""
        assert self.sub is not None
        actions = self.sub.want(self.ps, version, why)
        self.act(actions)
        return bool(actions)

    async def probe(self, version: int, lifetime: float) -> None:
        """Nothing of `version` is known: ask for segment 0 alone.  If the push is merely
        late, that Interest waits in the forwarder's PIT and the push brings the rest; the
        segment's FinalBlockId tells what else is missing (the tail timer fetches it)."""
        try:
            seg = await self.fetcher.fetch_one(
                names.distribute(self.ps, self.train, version, 0), lifetime, tries=1, fresh=True)
            self.counters.probe_segments += 1
            self.receive_segment(version, seg.number, seg.content, seg.final)
        except FetchError:
            pass                                    # the timer fires again, backed off
        finally:
            if self.sub is not None:
                self.sub.probe_done(self.ps, version)

    async def fetch_unicast(self, version: int) -> None:
        """Unicast baseline: our own copy of `version`, held by the PS until it exists."""
        try:
            parts = await fetch_copy(self.fetcher, self.ps, self.train, self.gpu, version,
                                     self.knobs["collect_lifetime"], self.knobs["ps_timeout"])
        except FetchError as e:
            raise JobFailed(f"no parameters version {version}: {e}") from None
        for i, part in enumerate(parts):
            self.receive_segment(version, i, part, len(parts) - 1)

    async def wait_params(self, until: Callable[[], bool], patience: float | None = None) -> None:
        """Wait for parameters until `until()` holds, expecting version newest+1 meanwhile (the
        probe timer runs; unicast: fetched version by version).  Fails after ps_timeout without
        a word from the PS; with `patience`, just returns after that long."""
        self.received_after = None
        give_up = None if patience is None else self.now() + patience
        try:
            while not until():
                if self.push_mode == "unicast":
                    await self.fetch_unicast(self.newest + 1)
                    continue
                assert self.sub is not None         # setup() made it with the content
                self.sub.expect(self.now(), self.ps, self.newest + 1)
                self.schedule()
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
        while (step not in self.sent_steps and not self.done and self.step == step
               and self.rewinds == rewinds):
            self.sent_event.clear()
            left = self.knobs["ps_timeout"] - (self.now() - self.last_from_ps)
            if left <= 0:
                raise JobFailed(f"the PS did not collect step {step} for "
                                f"{self.knobs['ps_timeout']:.0f} s")
            await wait_event(self.sent_event, left)

    # ---- step 7: the training loops ----------------------------------------------------------------

    async def train_sync(self) -> None:
        """Gradient of version v on batch for_step(v); wait for v+1; until a version says done."""
        while not self.done:
            v = self.newest
            if v < self.total_steps:
                self.compute(v)
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
                self.compute(k)
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
        sent = self.sent_steps.get(step)
        rec = dict(getattr(self, "step_record", {}))
        rec.update(version=self.newest, done=self.done,
                   wait_collect=(sent - self.ready_at[step]) if sent and step in self.ready_at else None,
                   distribute_latency=self.received_after,
                   probe_rto=self.timer.estimator.rto if self.timer else None,
                   segment_rto=self.fetcher.rto.rto)
        counters = {**self.app.traffic(), **asdict(self.counters), **asdict(self.fetch_stats),
                    **asdict(self.sub.counters if self.sub else SubscriberCounters())}
        self.worker.metrics.write({**rec, **self.delta.take(counters)})
        self.ready_at.pop(step - 8, None)
        self.sent_steps.pop(step - 8, None)


class Worker:
    """Serves /<gpu>: takes one training (declining others while busy), runs it, exits."""

    def __init__(self, gpu: str, key: bytes | None, app, metrics: MetricsWriter | None = None,
                 faults: Faults | None = None, slowdown: float = 1.0,
                 content_patience: float = CONTENT_PATIENCE) -> None:
        self.gpu, self.key, self.app = names.check_id(gpu, "worker name"), key, app
        self.content_patience = content_patience
        self.metrics = metrics or MetricsWriter(None)
        self.faults = faults or Faults()
        self.slowdown = slowdown
        self.job: Job | None = None
        self.job_task: asyncio.Task | None = None
        self.finished: asyncio.Future | None = None
        app.on_distribute = self.on_distribute
        app.on_reconnect = self.on_reconnect

    async def run(self) -> int:
        self.finished = asyncio.get_running_loop().create_future()
        self.app.attach_handler(names.node(self.gpu), self.on_interest)
        if not await self.app.register(names.node(self.gpu)):
            log.error("the forwarder refused to register /%s", self.gpu)
            return EXIT_JOB_FAILED
        log.info("worker %s ready (reordering floor %g ms)", self.gpu,
                 reorder_floor(self.app) * 1e3)
        try:
            return await self.finished
        except asyncio.CancelledError:              # SIGTERM: leave properly first
            if self.job_task is not None:
                self.job_task.cancel()
                await asyncio.gather(self.job_task, return_exceptions=True)
            raise

    def on_interest(self, name, _param, reply, ctx) -> None:
        t = names.parse_task(name)
        if t is not None and t.gpu == self.gpu:
            self.on_task(t, reply)
            return
        c = names.parse_collect(name)
        job = self.job
        if c is not None and c.gpu == self.gpu and job is not None and \
                (c.ps, c.train) == (job.ps, job.train):
            job.answer_collect(c, reply, ctx["deadline"])

    def on_task(self, t: names.Task, reply) -> None:
        """Step 2: accept (again, if the PS re-asks), or decline while busy elsewhere."""
        job = self.job
        fetching = False
        if job is None:
            self.job = job = Job(self, t.ps, t.train)
            self.job_task = asyncio.get_running_loop().create_task(self.run_job(job))
            accept, reason = True, ""
        elif (job.ps, job.train) == (t.ps, t.train):
            # re-asked: "already assigned" once we have the content (a PS that lost us takes
            # us back as we are); before that, a plain accept (it makes our content again)
            accept = True
            reason = messages.ALREADY_ASSIGNED if job.params is not None else ""
            if job.params is not None:
                job.spawn(job.resync())
            fetching = job.params is None
        else:
            accept, reason = False, f"busy with training /{job.ps}/{job.train}"
        sec = Security(self.key, names.key(t.ps, t.train))
        reply(self.app.make_data(names.task(self.gpu, t.ps, t.train),
                                 messages.task_reply(accept, reason), signer=sec.signer))
        log.info("task %s/%s: %s %s", t.ps, t.train, "accepted" if accept else "declined", reason)
        if fetching:
            # the PS is back (a restarted one re-offers the task): our content fetch asks
            # again now, not after the backoff its Nacks and timeouts built while it was gone
            # (a resumed PS waited worker_timeout for us and dropped us, chaos)
            job.fetcher.retry_now()

    async def run_job(self, job: Job) -> None:
        try:
            code = await job.run()
        except Exception:                   # a bug must end the process, not hang it
            log.exception("training %s/%s crashed", job.ps, job.train)
            code = 1
        except asyncio.CancelledError:
            code = EXIT_SIGNAL
        sub = job.sub.counters if job.sub is not None else SubscriberCounters()
        self.metrics.write({"event": "end", "code": code, "version": job.newest,
                            **asdict(job.counters), **asdict(sub), **asdict(job.fetch_stats),
                            **self.app.traffic(),
                           **self.app.link_events()})
        assert self.finished is not None            # run() made it before taking tasks
        if not self.finished.done():
            self.finished.set_result(code)

    def on_reconnect(self) -> None:
        """The forwarder came back (restarted): its persistent PIT entry is gone, insert again
        now rather than at the next refresh."""
        job = self.job
        if job is not None and job.push_mode == "persistent" and not job.done:
            job.counters.reinserts += 1
            job.send_insert()

    def on_distribute(self, name, meta_info, content, sig) -> None:
        if self.job is not None:
            self.job.on_push(name, meta_info, content, sig)


# ---- command line ---------------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = app_parser(
        "python -m apps.worker",
        "ndnps worker: registers /<name>, accepts one training from a PS, trains on its "
        "shard, answers the PS's collect Interests, receives pushed parameters (probing for "
        "lost ones), then leaves.",
        "0 done, 1 error, 2 bad flags, 3 the training failed", "one per step")
    p.add_argument("--name", required=True, help="this worker's name (one name component)")
    p.add_argument("--config", metavar="FILE", help="TOML file with a [training] table; "
                   "only its key and ps_timeout are used (the PS sends everything else)")
    p.add_argument("--content-patience", type=float, metavar="SECONDS",
                   help="how long to keep asking for the training content while the PS does "
                        "not answer (default: the config's ps_timeout, else "
                        f"{CONTENT_PATIENCE:.0f})")
    p.add_argument("--key", help="HMAC key of the training (overrides the config's)")
    p.add_argument("--slowdown", type=float, default=1.0, metavar="X",
                   help="emulate a device X times slower: each gradient takes X times its "
                        "compute time (stragglers, heterogeneous workers)")
    f = p.add_argument_group("fault injection (tests only)")
    f.add_argument("--drop-pushes-prob", type=float, default=0.0, metavar="P",
                   help="drop each received pushed segment with probability P, as if lost")
    f.add_argument("--forge-gradient-at", type=int, default=-1, metavar="STEP",
                   help="first answer each segment of STEP's gradient signed with a wrong key")
    f.add_argument("--fault-seed", type=int, help="seed of the fault injection")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    setup_logging(args.log_level, args.name)
    limit_blas_threads()
    try:
        names.check_id(args.name, "--name")
        key, patience = args.key, args.content_patience
        table = read_table(args.config) if args.config else {}
        if key is None and args.config:
            key = table.get("key", "")
            if not isinstance(key, str):
                raise ConfigError(f"training.key: expected a string, got {key!r}")
        if patience is None:
            patience = table.get("ps_timeout", CONTENT_PATIENCE)
            if isinstance(patience, bool) or not isinstance(patience, (int, float)):
                raise ConfigError(f"training.ps_timeout: expected seconds, got {patience!r}")
        if not patience > 0:
            raise ConfigError(f"--content-patience / training.ps_timeout: must be > 0, "
                              f"got {patience}")
        if not 0.0 <= args.drop_pushes_prob <= 1.0:
            raise ConfigError("--drop-pushes-prob: must be within [0, 1]")
        if args.slowdown < 1.0:
            raise ConfigError("--slowdown: must be >= 1")
    except (ConfigError, names.BadName) as e:
        print(f"worker: bad configuration: {e}", file=sys.stderr)
        return EXIT_USAGE
    faults = Faults(args.drop_pushes_prob, args.forge_gradient_at, args.fault_seed)
    # load_dataset imports scikit-learn (~1 s of CPU): do it before we say we are ready, not
    # between accepting a task and fetching its content
    import sklearn.datasets  # noqa: F401
    import sklearn.model_selection  # noqa: F401
    metrics = MetricsWriter(args.metrics, role="worker", name=args.name)
    return serve(args.transport, metrics,
                 lambda app: Worker(args.name, key.encode() if key else None, app, metrics,
                                    faults, args.slowdown, float(patience)).run(),
                 args.reconnect_timeout, args.lp_reliability, args.link_repair)


if __name__ == "__main__":
    sys.exit(main())
