"""The parameter server: ``python -m apps.ps [--config scenario.toml] [flags]``.

Seed steps, from the PS's side (names in ndnps/protocol/names.py):

  2  assign_task      /<gpu>/<ps>/<train> to each candidate; accept, or decline with a reason
  3  serve_content    /<ps>/<train>/<gpu>/<seg>: spec, hyper-parameters, shard, initial params
  4  on_register      /*insert*/<ps>/<train> -> Data /*distribute*/<ps>/<train> (confirmation)
  5  collect          /<gpu>/<ps>/<train>/<step>/<seg>, sent when the worker's history says its
                      gradient will be ready; the worker holds it until then
  6  push             /*distribute*/<ps>/<train>/<version>/<seg>, paced
  9  on_probe         answers probes for the last few versions (the forwarder's CS may first)
     on_remove        /*remove*/<ps>/<train>: a worker leaves
     serve_params     unicast baseline: /<ps>/<train>/<gpu>/params/<version>/<seg>

Sync mode averages all live workers' gradients of version v in worker-index order (the same
arithmetic as ndnps.ml.train.train_sync_reference), steps SGD and pushes v+1.  Async mode applies
each gradient as it arrives (dropping those more than ``max_staleness`` versions old) and pushes
every new version.  The run ends after the configured epochs/versions or at the target accuracy:
the last version is pushed with ``done``; the model is saved (``--save``, .npz); exit 0.
Exit 2: bad configuration; 3: the training cannot go on (too few workers); 1: other errors.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from ndnps.protocol import messages, names
from ndnps.protocol.codec import CodecError, MixedSegments, flatten, param_spec, unflatten
from ndnps.ml.data import load_dataset
from ndnps.client.estimator import FinishTimeEstimator, RtoEstimator
from ndnps.client.events import wait_event
from ndnps.client.fetcher import (MIN_RTO, TLP_FLOOR, FetchError, FetchStats, SegmentFetcher,
                           reorder_floor)
from ndnps.lab.metrics import Delta, MetricsWriter
from ndnps.ml.models import SGD, build_model
from ndnps.client.pacer import Pacer
from ndnps.ndn.conventions import segment, segment_component
from ndnps.client.pending import HeldInterests
from ndnps.client.security import Security
from ndnps.client.segments import sign_segments
from ndnps.exchanges.buffers import Recent
from ndnps.ml.train import average_grads, steps_per_epoch
from ndnps.protocol.config import ConfigError, TrainingConfig, add_arguments, load

from .launch import (EXIT_JOB_FAILED, EXIT_OK, EXIT_USAGE, app_parser, limit_blas_threads,
                     serve, setup_logging)

log = logging.getLogger("ps")

PUSH_FRESHNESS_MS = 10_000      # probes ask MustBeFresh: a cache answers only recent pushes
CONFIRM_FRESHNESS_MS = 1_000


ALREADY_ASSIGNED = messages.ALREADY_ASSIGNED

# the keys of the Interests the PS holds
ContentKey = tuple[Literal["content"], str, int]            # gpu, segment
ParamsKey = tuple[Literal["params"], str, int, int]         # gpu, version, segment (unicast)


class JobFailed(Exception):
    """The training cannot go on (the message says why)."""


@dataclass
class WorkerState:
    gpu: str
    index: int
    estimator: FinishTimeEstimator = field(default_factory=FinishTimeEstimator)
    live: bool = True
    steps_done: int = 0
    last_segment: int | None = None     # of its last gradient: ask that many at once
    final_fetched: bool = False         # unicast: every segment of the last version served
    final_served: set[int] = field(default_factory=set)
    lost_at: int | None = None          # version at which it was lost (None: not lost)
    losses: int = 0
    rejoining: asyncio.Event | None = None      # set when its rejoin content was fetched


@dataclass
class PsCounters:
    registrations: int = 0
    removes: int = 0
    probes_answered: int = 0
    segments_pushed: int = 0
    params_served: int = 0          # unicast baseline segments
    gradients: int = 0
    malformed: int = 0
    mixed_objects: int = 0          # gradients made of two worker incarnations' segments
    stale_dropped: int = 0
    workers_dropped: int = 0
    workers_lost: int = 0           # dropped for silence (worker_timeout): may rejoin
    workers_rejoined: int = 0       # lost workers back (task accepted again)
    rejoin_offers: int = 0          # task Interests re-sent to lost workers
    short_versions: int = 0         # sync versions applied with fewer gradients than workers
    collects_redone: int = 0        # on_worker_loss = wait: gradients collected again
    checkpoints: int = 0            # checkpoint files written
    final_repushes: int = 0         # the final version pushed again while workers stayed


class ParameterServer:
    def __init__(self, cfg: TrainingConfig, app, metrics: MetricsWriter | None = None,
                 save_path: str | None = None) -> None:
        self.cfg, self.app = cfg, app
        self.metrics = metrics or MetricsWriter(None)
        self.save_path = save_path
        self.sec = Security(cfg.key_bytes, names.key(cfg.ps, cfg.train))
        self.dataset = load_dataset(cfg.dataset, cfg.seed, **cfg.dataset_kwargs())
        ds = self.dataset
        self.spec = {"n_in": ds.n_features, "n_classes": ds.n_classes, **cfg.model_spec()}
        self.model = build_model(self.spec, cfg.seed)          # = train_sync_reference's
        self.pspec = param_spec(self.model.params)
        self.n_params = self.model.n_params
        self.opt = SGD(cfg.lr, cfg.momentum, cfg.weight_decay)
        self.version = 0
        self.collected: dict[str, int] = {}         # async: last step collected per worker
        self.accuracy: float | None = None
        self.done = False
        self.workers: list[WorkerState] = []
        self.counters = PsCounters()
        self.fetch_stats = FetchStats()
        self.fetcher = SegmentFetcher(
            app.express_future, self.sec.validator, cfg.window,
            RtoEstimator(cfg.segment_timeout, min_rto=MIN_RTO, max_rto=4 * cfg.segment_timeout),
            cfg.max_tries, self.fetch_stats, reorder_floor=reorder_floor(app),
            suppression=cfg.retx_suppression_ms / 1000,
            suppression_max=cfg.retx_suppression_max_ms / 1000)
        self.held: HeldInterests[ContentKey | ParamsKey] = HeldInterests()
        self.contents: dict[str, list[bytes]] = {}
        self.refused: dict[str, str] = {}           # workers not taken, and why
        self.pushed: Recent[int, list[bytes]] = Recent(cfg.keep_versions)      # signed pushes
        self.blobs: Recent[int, list[bytes]] = Recent(max(cfg.keep_versions,   # unicast
                                                           4 * len(cfg.workers) + 4))
        self.pacer = Pacer(cfg.push_rate_mbps, cfg.push_burst, app.drain)
        self.delta = Delta()
        self.loop_time = lambda: asyncio.get_running_loop().time()
        self.removed = asyncio.Event()
        self.all_left = False                   # a *remove* came after the end
        self.rejoin_tasks: dict[str, asyncio.Task] = {}
        self.resumed_from: int | None = None        # the checkpoint's version, if resumed
        self.restarts = 0                           # resumptions so far (the checkpoint's count)
        self.resumed_steps: dict[str, int] = {}     # async: each worker's next step, resumed
        self.rejoined = asyncio.Event()         # a lost worker is back
        self.last_dropped = ""

    # ---- life cycle ------------------------------------------------------------------------

    @property
    def live(self) -> list[WorkerState]:
        return [w for w in self.workers if w.live]

    def attach(self) -> None:
        """The PS answers under /<ps>; the marker names reach it by the stripped name's route,
        so their handlers are attached without registering them."""
        ps = self.cfg.ps
        self.app.attach_handler(names.node(ps), self.on_interest)
        self.app.attach_handler(names.insert_prefix(ps), self.on_register)
        self.app.attach_handler(names.remove_prefix(ps), self.on_remove)
        self.app.attach_handler(names.distribute_prefix(ps), self.on_probe)

    async def run(self) -> int:
        cfg = self.cfg
        self.attach()
        try:
            if not await self.app.register(names.node(cfg.ps)):
                raise JobFailed(f"the forwarder refused to register /{cfg.ps}")
            resumed = self.resume() if cfg.checkpoint else None
            accepted = await self.assign_tasks()
            if resumed is not None:
                # the workers of the checkpoint, in its order (shards and averaging as before);
                # those that did not accept now are lost, and re-offered the task
                missing = [g for g in resumed if g not in accepted]
                self.prepare_content(resumed)
                for w in self.workers:
                    if w.gpu in missing:
                        self.drop(w, "did not accept the resumed training")
                await self.push_resumed()
            else:
                self.prepare_content(accepted)
            if cfg.mode == "sync":
                await self.run_sync()
            else:
                await self.run_async()
        except JobFailed as e:
            log.error("training %s/%s cannot go on: %s", cfg.ps, cfg.train, e)
            self.metrics.write({"event": "failed", "reason": str(e)})
            await self.abort()
            return EXIT_JOB_FAILED
        except asyncio.CancelledError:
            log.warning("stopped: telling the workers the training is aborted")
            await self.abort()
            raise
        except Exception:
            await self.abort()                 # a bug: the workers need not wait ps_timeout
            raise
        await self.finish()
        return EXIT_OK

    async def abort(self) -> None:
        """Best effort: one more version marked aborted, so workers leave now instead of
        waiting ps_timeout for a PS that is gone."""
        if not self.workers or self.done:
            return
        self.done = True
        try:
            await asyncio.wait_for(self.push(self.version + 1, True, aborted=True), 1.0)
            await asyncio.sleep(0.05)             # let the socket flush before we go
        except (asyncio.TimeoutError, OSError, ConnectionError):
            pass

    # ---- step 2: task assignment -----------------------------------------------------------

    async def offer_task(self, gpu: str, tries: int) -> tuple[bool, str]:
        """Offer the task to `gpu` (at most `tries` tries); (accepted, reason).  A worker
        answers at once, so its round trips are samples of the path's, and once one is
        measured no try waits more than the RTO's ceiling (before that, `task_timeout`
        doubling up to 16 times it)."""
        cfg = self.cfg
        try:
            seg = await self.fetcher.fetch_one(
                names.task(gpu, cfg.ps, cfg.train), lifetime=cfg.task_timeout,
                max_lifetime=16 * cfg.task_timeout, tries=tries, fresh=True, prompt=True)
        except FetchError as e:
            if e.rejected:
                # its acceptance failed our signature check: it signs with another key; its
                # content Interests get a refusal it cannot verify, and it says so
                self.refused[gpu] = "its answer to the task failed the PS's signature check"
            return False, str(e)
        try:
            return messages.parse_task_reply(seg.content)
        except CodecError as e:
            return False, f"malformed answer: {e}"

    async def assign_task(self, gpu: str) -> tuple[bool, str]:
        """Ask one candidate; (accepted, reason)."""
        return await self.offer_task(gpu, self.cfg.task_tries)

    async def assign_tasks(self) -> list[str]:
        cfg = self.cfg
        # after a restart (checkpoint), workers still in the job answer "already assigned" and
        # fetch their content again: the checkpoint's version and parameters
        answers = await asyncio.gather(*(self.assign_task(g) for g in cfg.workers))
        for gpu in self.refused:                # their content Interests held meanwhile
            for key in [k for k in self.held.keys() if k[0] == "content" and k[1] == gpu]:
                self.held.release(key, self.refusal(gpu)[0])
        accepted = []
        for gpu, (ok, reason) in zip(cfg.workers, answers):
            log.info("worker %s %s%s", gpu, "accepted" if ok else "declined",
                     f": {reason}" if reason else "")
            self.metrics.write({"event": "task", "worker": gpu, "accepted": ok, "reason": reason})
            if ok:
                accepted.append(gpu)
        if len(accepted) < cfg.min_workers:
            declined = {g: r for g, (ok, r) in zip(cfg.workers, answers) if not ok}
            raise JobFailed(f"only {len(accepted)} of {len(cfg.workers)} workers accepted, "
                            f"min_workers = {cfg.min_workers}; declined: {declined}")
        return accepted

    # ---- step 3: training content ----------------------------------------------------------

    @property
    def total_steps(self) -> int:
        """Steps (sync: versions) per worker: epochs over the shard, capped by max_versions."""
        spe = steps_per_epoch(len(self.dataset.X_train), len(self.workers), self.cfg.batch)
        if spe < 1:
            raise JobFailed(f"{len(self.dataset.X_train)} samples over {len(self.workers)} "
                            f"workers give no full batch of {self.cfg.batch}")
        total = self.cfg.epochs * spe
        if self.cfg.max_versions:
            total = min(total, self.cfg.max_versions)
        return total

    def prepare_content(self, accepted: list[str]) -> None:
        cfg = self.cfg
        self.workers = [WorkerState(g, i, steps_done=self.resumed_steps.get(g, 0))
                        for i, g in enumerate(accepted)]
        n = len(self.workers)
        vec = flatten(self.model.params)
        for w in self.workers:
            self.make_content(w, vec)
        segments = len(segment(messages.params_blob(vec, 0, False)))
        log.info("training %s/%s: %d workers, %d parameters (%d segments), %d steps, %s/%s",
                 cfg.ps, cfg.train, n, self.n_params, segments, self.total_steps, cfg.mode,
                 cfg.push_mode)
        self.metrics.write({"event": "start", "workers": accepted, "n_params": self.n_params,
                            "total_steps": self.total_steps, "mode": cfg.mode,
                            "push_mode": cfg.push_mode, "version": self.version,
                            "resumed_from": self.resumed_from, "restarts": self.restarts})

    def make_content(self, w: WorkerState, vec: np.ndarray) -> None:
        """Worker w's training content: the current parameters and version (a worker that
        rejoins starts there), signed segments; Interests held meanwhile are answered."""
        cfg = self.cfg
        n = len(self.workers)
        common = {
            "ps": cfg.ps, "train": cfg.train, "workers": n, "mode": cfg.mode,
            "push_mode": cfg.push_mode, "model_spec": self.spec,
            "param_spec": [[k, list(s)] for k, s in self.pspec], "dataset": cfg.dataset,
            "dataset_kwargs": cfg.dataset_kwargs(), "seed": cfg.seed, "batch": cfg.batch,
            "steps_per_epoch": steps_per_epoch(len(self.dataset.X_train), n, cfg.batch),
            "total_steps": self.total_steps,
            "hyper": {"lr": cfg.lr, "momentum": cfg.momentum, "weight_decay": cfg.weight_decay,
                      "max_staleness": cfg.max_staleness},
            "knobs": {k: getattr(cfg, k) for k in (
                "window", "retx_suppression_ms", "retx_suppression_max_ms", "segment_timeout",
                "max_tries",
                "probe_initial", "probe_k", "probe_min", "probe_max", "gap_delay", "tail_delay",
                "register_interval", "register_timeout", "register_tries", "collect_lifetime",
                "ps_timeout")},
            "version": self.version,
            "step": w.steps_done,               # async: the step it computes next
            "restarts": self.restarts,          # a worker rolls back only for a new PS
        }
        blob = messages.content_blob(vec, {**common, "gpu": w.gpu, "index": w.index})
        self.contents[w.gpu] = sign_segments(
            blob, lambda s: names.content(cfg.ps, cfg.train, w.gpu, s), self.sec.signer)
        wires = self.contents[w.gpu]
        for key in [k for k in self.held.keys() if k[0] == "content" and k[1] == w.gpu]:
            if key[2] < len(wires) and self.held.release(key, wires[key[2]]):
                self.content_served(w, key[2])

    def refusal(self, gpu: str) -> list[bytes]:
        """A worker not taken is answered this under its content name (signed, one
        segment)."""
        cfg = self.cfg
        return sign_segments(messages.refusal_blob(self.refused[gpu]),
                             lambda s: names.content(cfg.ps, cfg.train, gpu, s),
                             self.sec.signer)

    def content_served(self, w: WorkerState, seg: int) -> None:
        if w.rejoining is not None and seg == len(self.contents[w.gpu]) - 1:
            w.rejoining.set()               # a restarted worker has its content: it is back

    def on_interest(self, name, _param, reply, ctx) -> None:
        """Everything under /<ps>: training content, and the unicast baseline's parameters."""
        cfg = self.cfg
        c = names.parse_content(name)
        if c is not None and (c.ps, c.train) == (cfg.ps, cfg.train):
            self.serve_content(c, reply, ctx)
            return
        p = names.parse_params(name)
        if p is not None and (p.ps, p.train) == (cfg.ps, cfg.train):
            self.serve_params(p, reply, ctx)

    def serve_content(self, c: names.Content, reply, ctx) -> None:
        if c.gpu in self.refused and c.gpu not in self.contents:
            reply(self.refusal(c.gpu)[0])
            return
        wires = self.contents.get(c.gpu)
        if wires is None:
            # held while the assignment is running, or while a lost worker's new content (the
            # current version) is not made yet
            if c.gpu in self.cfg.workers and (not self.workers or c.gpu in self.rejoin_tasks):
                self.held.hold(("content", c.gpu, c.segment), reply, ctx["deadline"])
            return
        if c.segment < len(wires):
            reply(wires[c.segment])
            w = next((x for x in self.workers if x.gpu == c.gpu), None)
            if w is not None:
                self.content_served(w, c.segment)

    # ---- step 4: registration, and leaving ---------------------------------------------------

    def on_register(self, name, _param, reply, _ctx) -> None:
        t = names.parse_insert(name)
        if t is None or (t.ps, t.train) != (self.cfg.ps, self.cfg.train):
            return
        self.counters.registrations += 1
        reply(self.app.make_data(names.confirm(t.ps, t.train), b"", signer=self.sec.signer,
                                 freshness_period=CONFIRM_FRESHNESS_MS))

    def on_remove(self, name, _param, reply, _ctx) -> None:
        t = names.parse_remove(name)
        if t is None or (t.ps, t.train) != (self.cfg.ps, self.cfg.train):
            return
        self.counters.removes += 1
        if self.done:
            # forwarders pass a *remove* upstream only once no downstream is left (a prune):
            # one that reaches us after the end says every worker has left
            self.all_left = True
        self.removed.set()
        reply(self.app.make_data(name, b"", signer=self.sec.signer))

    # ---- step 5: collect -----------------------------------------------------------------------

    async def collect(self, w: WorkerState, step: int, ref: float) -> messages.Gradient | None:
        """Worker w's gradient of `step`, asked for when its history says it will be ready
        (relative to `ref`).  None: the worker was dropped (silent for worker_timeout)."""
        cfg = self.cfg
        delay = ref + w.estimator.send_delay() - self.loop_time()
        if delay > 0:
            await asyncio.sleep(delay)

        def name_of(s: int):
            return names.collect(w.gpu, cfg.ps, cfg.train, step, s)

        why = "malformed gradients"
        for attempt in range(3):
            sent = self.loop_time()
            reconnects = self.app.reconnects
            # The first Interests live until shortly after the expected finish (2 deviations:
            # at loss, how soon a worker has the version varies, and one that expired as its
            # gradient came was a round lost), so a lost one costs little; re-expressed, they
            # live a few round trips (the RTO's ceiling, at
            # most collect_lifetime), for worker_timeout at most: the worker is due, and one
            # held Interest or its gradient lost must cost a round trip, not a backoff (they
            # doubled up to 2 s: at 20 % loss versions waited seconds).  Without a history
            # (the first version, a restarted PS) they start from a few round trips.  Once
            # the first Data is in, the fetcher's loss recovery takes over.
            rtt = self.fetcher.min_rtt or 0.01
            est = w.estimator
            expected = 0.0 if est.expected is None else max(
                0.0, ref + est.expected + 2 * est.stats.dev - sent)
            srtt = self.fetcher.rto.stats.mean or rtt
            margin = self.fetcher.bounded(max(0.05, 4 * srtt + TLP_FLOOR))
            lifetime = min(cfg.collect_lifetime, margin + expected)
            try:
                parts, arrived, waited = await self.fetcher.fetch_held(
                    name_of, w.last_segment, lifetime, cfg.collect_lifetime,
                    sent + cfg.worker_timeout)
            except FetchError as e:
                why = f"silent for {cfg.worker_timeout:.0f} s ({e})"
                if self.app.reconnects == reconnects and self.app.connected:
                    break
                # our own face was down meanwhile, or is (a forwarder restart): the worker was
                # not silent, we could not hear it; it gets worker_timeout again
                log.info("collect from %s: asking again after our reconnect", w.gpu)
                continue
            if attempt == 0:
                # the Interest that brought the first Data waited well over a round trip: the
                # worker held it, and became ready about when it came (whichever try it was:
                # without a history the first ones expire early, and a sample from them alone
                # would never come); else the gradient was ready before it was asked for
                est.observe(arrived - ref, sent - ref, held=waited > 2 * rtt + 0.002)
            w.last_segment = len(parts) - 1
            try:
                grad = messages.parse_gradient(b"".join(parts), self.n_params, step)
            except CodecError as e:
                if isinstance(e, MixedSegments):
                    self.counters.mixed_objects += 1
                else:
                    self.counters.malformed += 1
                log.warning("malformed gradient from %s, step %d: %s; refetching", w.gpu, step, e)
                continue
            self.counters.gradients += 1
            return grad
        self.drop(w, why)
        return None

    def drop(self, w: WorkerState, why: str) -> None:
        """Worker w is lost.  With rejoin_timeout > 0 the task is re-offered to it every
        rejoin_interval (a restarted worker of that name takes it again)."""
        if not w.live:
            return
        cfg = self.cfg
        w.live = False
        w.lost_at = self.version
        w.losses += 1
        self.contents.pop(w.gpu, None)      # stale: a restarted worker gets the current version
        self.counters.workers_dropped += 1
        self.counters.workers_lost += 1
        log.warning("dropping worker %s: %s", w.gpu, why)
        self.metrics.write({"event": "dropped", "worker": w.gpu, "reason": why,
                            "version": self.version})
        rejoin = cfg.rejoin_timeout > 0 and not self.done
        if rejoin and w.gpu not in self.rejoin_tasks:
            self.rejoin_tasks[w.gpu] = asyncio.get_running_loop().create_task(self.rejoin(w))
        if len(self.live) < cfg.min_workers and not rejoin:
            raise JobFailed(f"{len(self.live)} live workers left, min_workers = "
                            f"{cfg.min_workers} (last dropped {w.gpu}: {why})")
        self.last_dropped = f"{w.gpu}: {why}"

    async def quorum(self) -> None:
        """At least min_workers live before going on.  A worker dropped for silence may be
        alive (cut off, or its push lost): it answers the re-offer of its task within a
        rejoin_interval or two, so the job fails only if too few are back after a grace of
        max(10 s, 4 x rejoin_interval) (rejoin_timeout at most)."""
        cfg = self.cfg
        if len(self.live) >= cfg.min_workers:
            return
        grace = min(max(10.0, 4 * cfg.rejoin_interval), cfg.rejoin_timeout)
        deadline = self.loop_time() + grace
        while len(self.live) < cfg.min_workers and self.loop_time() < deadline:
            self.rejoined.clear()
            if not await wait_event(self.rejoined, deadline - self.loop_time()):
                break
        if len(self.live) < cfg.min_workers:
            raise JobFailed(f"{len(self.live)} live workers left, min_workers = "
                            f"{cfg.min_workers}, none back within {grace:.0f} s (last dropped "
                            f"{self.last_dropped})")

    async def rejoin(self, w: WorkerState) -> None:
        """Re-offer the task to lost worker w every rejoin_interval (the first time after
        rejoin_interval x 2^(losses-1)), for rejoin_timeout at most.  A restarted worker accepts and fetches its content (the current parameters and
        version): then it is live again, collected from the next version on (or, with
        on_worker_loss = wait, for the version that lost it).  A worker that still runs the
        job (it was cut off, not killed) answers "already assigned" and is live at once."""
        cfg = self.cfg
        deadline = self.loop_time() + cfg.rejoin_timeout
        try:
            # the first offer after rejoin_interval, doubled for each earlier loss: a worker
            # that answers tasks but not collects cannot make every version wait for it
            await asyncio.sleep(min(cfg.rejoin_interval * 2 ** (w.losses - 1), 60.0))
            while not self.done and self.loop_time() < deadline:
                self.counters.rejoin_offers += 1
                ok, reason = await self.offer_task(w.gpu, 1)
                if ok and reason == ALREADY_ASSIGNED:
                    # it still runs the job: it refetches its content and goes on from there
                    self.make_content(w, flatten(self.model.params))
                elif ok:
                    w.rejoining = asyncio.Event()
                    self.make_content(w, flatten(self.model.params))
                    # accepted, but never fetched: ask again
                    ok = await wait_event(w.rejoining, max(cfg.rejoin_interval,
                                                           4 * cfg.segment_timeout))
                    w.rejoining = None
                if ok:
                    self.back(w, reason)
                    return
                log.debug("worker %s not back (%s)", w.gpu, reason)
                await asyncio.sleep(cfg.rejoin_interval)
            if not self.done:
                log.warning("worker %s did not come back within %.0f s", w.gpu,
                            cfg.rejoin_timeout)
                self.metrics.write({"event": "rejoin_gave_up", "worker": w.gpu})
                self.rejoined.set()                 # a waiting sync loop rechecks and fails
        finally:
            self.rejoin_tasks.pop(w.gpu, None)

    def back(self, w: WorkerState, reason: str) -> None:
        w.live = True
        w.estimator = FinishTimeEstimator()         # a new process: no history
        self.counters.workers_rejoined += 1
        log.info("worker %s rejoined at version %d (lost at %s)%s", w.gpu, self.version,
                 w.lost_at, f": {reason}" if reason else "")
        self.metrics.write({"event": "rejoined", "worker": w.gpu, "version": self.version,
                            "lost_at": w.lost_at})
        w.lost_at = None
        self.rejoined.set()

    async def wait_rejoin(self, lost: list[WorkerState]) -> None:
        """on_worker_loss = wait: until every worker in `lost` is live again."""
        while not all(w.live for w in lost):
            if not any(w.gpu in self.rejoin_tasks for w in lost if not w.live):
                gone = [w.gpu for w in lost if not w.live]
                raise JobFailed(f"on_worker_loss = wait: {', '.join(gone)} did not rejoin "
                                f"within rejoin_timeout = {self.cfg.rejoin_timeout:.0f} s")
            self.rejoined.clear()
            await self.rejoined.wait()

    # ---- steps 6 and 9: push, probes, unicast baseline ---------------------------------------

    def publish(self, version: int, done: bool, aborted: bool = False) -> list[bytes] | None:
        """Parameters `version` as Data: signed push segments (kept for probes), or in unicast
        mode the raw segments each worker's copy is signed from (Interests held until now are
        answered).  Returns the push segments (None in unicast mode)."""
        cfg = self.cfg
        collected = self.collected if cfg.mode == "async" else None
        blob = messages.params_blob(flatten(self.model.params), version, done, collected, aborted)
        if cfg.push_mode == "unicast":
            parts = segment(blob)
            self.blobs.put(version, parts)
            for key in [k for k in self.held.keys() if k[0] == "params" and k[2] == version]:
                _, gpu, _, seg = key
                if seg < len(parts):
                    n = self.held.release(key, self.unicast_wire(gpu, version, seg, parts))
                    self.counters.params_served += n
            return None
        wires = sign_segments(blob, lambda s: names.distribute(cfg.ps, cfg.train, version, s),
                              self.sec.signer, PUSH_FRESHNESS_MS)
        self.pushed.put(version, wires)
        return wires

    async def push_resumed(self) -> None:
        """A resumed PS pushes its checkpoint's version again, as the PS before it did (the
        same bytes): a worker that lacks it (restarted just before the kill, or the push cut
        short) has it at once, and probes for it are answered.  Before, such a worker asked
        in vain until dropped: nobody held that version any more."""
        await self.push(self.version, False)

    async def push(self, version: int, done: bool, aborted: bool = False) -> float:
        """Step 6: publish `version` and push it along the persistent PIT entry, paced.
        Returns the seconds spent."""
        t0 = self.loop_time()
        wires = self.publish(version, done, aborted)
        if wires is not None:
            self.counters.segments_pushed += await self.pacer.send_all(wires, self.app.send_data)
        return self.loop_time() - t0

    def on_probe(self, name, _param, reply, _ctx) -> None:
        """Step 9: a worker missed segments of a push.  Versions not produced yet are not
        answered: the forwarder keeps the probe's PIT entry and the push satisfies it."""
        d = names.parse_distribute(name)
        if d is None or (d.ps, d.train) != (self.cfg.ps, self.cfg.train):
            return
        wires = self.pushed.get(d.version)
        if wires is not None and d.segment < len(wires):
            self.counters.probes_answered += 1
            reply(wires[d.segment])

    def unicast_wire(self, gpu: str, version: int, seg: int, parts: list[bytes]) -> bytes:
        cfg = self.cfg
        return bytes(self.app.make_data(
            names.params(cfg.ps, cfg.train, gpu, version, seg), parts[seg], signer=self.sec.signer,
            final_block_id=segment_component(len(parts) - 1)))

    def serve_params(self, p: names.Params, reply, ctx) -> None:
        w = next((w for w in self.workers if w.gpu == p.gpu), None)
        if w is None:
            return
        parts = self.blobs.get(p.version)
        if parts is None:
            if p.version > self.version:
                self.held.hold(("params", p.gpu, p.version, p.segment), reply, ctx["deadline"])
            return
        if p.segment < len(parts):
            self.counters.params_served += 1
            reply(self.unicast_wire(p.gpu, p.version, p.segment, parts))
            if self.done and p.version == self.version:
                w.final_served.add(p.segment)
                w.final_fetched = len(w.final_served) == len(parts)
                if all(x.final_fetched for x in self.live):
                    self.removed.set()

    # ---- training modes ------------------------------------------------------------------------

    def evaluate(self, force: bool = False) -> float | None:
        if force or self.version % self.cfg.eval_every == 0:
            ds = self.dataset
            self.accuracy = self.model.accuracy(ds.X_test, ds.y_test)
            return self.accuracy
        return None

    def is_done(self, accuracy: float | None) -> bool:
        target = self.cfg.target_accuracy
        return bool(target and accuracy is not None and accuracy >= target)

    async def run_sync(self) -> None:
        """Steps 5-7, sync: all live workers' gradients of v, averaged in worker-index order,
        one SGD step, push v+1."""
        total = self.total_steps
        ref = self.loop_time()
        while not self.done:
            if self.cfg.on_worker_loss == "continue":
                await self.quorum()
            v = self.version
            t0 = self.loop_time()
            live = self.live
            grads = await asyncio.gather(*(self.collect(w, v, ref) for w in live))
            got = [(w, g) for w, g in zip(live, grads) if g is not None]
            lost = [w for w, g in zip(live, grads) if g is None]
            while self.cfg.on_worker_loss == "wait" and lost:
                # the version waits for them: collected again once they are back
                log.info("version %d: waiting for %s to rejoin", v, ", ".join(w.gpu for w in lost))
                await self.wait_rejoin(lost)
                self.counters.collects_redone += len(lost)
                ref = self.loop_time()
                grads = await asyncio.gather(*(self.collect(w, v, ref) for w in lost))
                got += [(w, g) for w, g in zip(lost, grads) if g is not None]
                lost = [w for w, g in zip(lost, grads) if g is None]
            got.sort(key=lambda wg: wg[0].index)
            if not got:
                raise JobFailed("no gradient arrived")
            if len(got) < len(self.workers):
                self.counters.short_versions += 1
            t1 = self.loop_time()
            avg = average_grads([unflatten(g.vector, self.pspec) for _, g in got])
            self.opt.step(self.model.params, avg)
            self.version = v + 1
            accuracy = self.evaluate(force=self.version >= total)
            self.done = self.version >= total or self.is_done(accuracy)
            t2 = self.loop_time()
            ref = t2
            push_time = await self.push(self.version, self.done)
            self.record(collect_wait=t1 - t0, apply=t2 - t1, push=push_time,
                        loss=float(np.mean([g.loss for _, g in got])),
                        compute=float(np.mean([g.compute for _, g in got])),
                        gradients=len(got), accuracy=accuracy)
            # after the version's record (a PS killed during the push leaves no checkpoint
            # ahead of its records) and off the workers' path (they compute meanwhile)
            if self.cfg.checkpoint and (self.version % self.cfg.checkpoint_every == 0
                                        or self.done):
                self.write_checkpoint(self.cfg.checkpoint)

    async def run_async(self) -> None:
        """Async: each gradient is applied as it arrives and every new version pushed (a
        pusher coalesces versions produced while a push is under way)."""
        self.new_version = asyncio.Event()
        self.stopped = asyncio.Event()
        pusher = asyncio.create_task(self.pusher())
        stop = asyncio.create_task(self.stopped.wait())
        pending: set[asyncio.Task[object]] = {
            asyncio.create_task(self.serve_worker_async(w)) for w in self.workers}
        loops = set(pending)
        try:
            while pending and not self.done:
                finished, pending = await asyncio.wait(pending | {stop},
                                                       return_when=asyncio.FIRST_COMPLETED)
                pending.discard(stop)
                for t in finished - {stop}:
                    exc = t.exception()
                    if exc is not None:
                        raise exc
        finally:
            for t in loops | {stop}:
                t.cancel()
            await asyncio.gather(*loops, stop, return_exceptions=True)
        self.done = True
        self.new_version.set()
        await pusher
        # the closing version: the same parameters, marked done, under a fresh version number
        self.version += 1
        self.evaluate(force=True)
        if self.cfg.checkpoint:
            self.write_checkpoint(self.cfg.checkpoint)
        push_time = await self.push(self.version, True)
        self.record(push=push_time, accuracy=self.accuracy, closing=True)

    async def serve_worker_async(self, w: WorkerState) -> None:
        """Worker w's gradients, step after step; a lost worker is served again once it
        rejoins (from the step it had reached: its content says which)."""
        total = self.total_steps
        ref = self.loop_time()
        while not self.done and w.steps_done < total:
            await self.quorum()
            g = await self.collect(w, w.steps_done, ref)
            ref = self.loop_time()
            if self.done:                       # the target was reached meanwhile
                return
            if g is None:
                if not await self.back_or_gone(w):
                    return
                ref = self.loop_time()
                continue
            w.steps_done += 1
            self.collected[w.gpu] = g.step
            self.apply_async(w, g)

    async def back_or_gone(self, w: WorkerState) -> bool:
        """Async: wait while lost worker w may rejoin; True once it is back."""
        while not w.live and w.gpu in self.rejoin_tasks and not self.done:
            self.rejoined.clear()
            await self.rejoined.wait()
        return w.live and not self.done

    def apply_async(self, w: WorkerState, g: messages.Gradient) -> None:
        staleness = self.version - g.base_version
        if staleness > self.cfg.max_staleness or staleness < 0:
            self.counters.stale_dropped += 1
            self.record(worker=w.gpu, step=g.step, staleness=staleness, applied=False,
                        loss=g.loss, version_unchanged=True)
            return
        t0 = self.loop_time()
        self.opt.step(self.model.params, unflatten(g.vector, self.pspec))
        self.version += 1
        accuracy = self.evaluate()
        if self.is_done(accuracy):
            self.done = True
            self.stopped.set()
        if self.cfg.checkpoint and self.version % self.cfg.checkpoint_every == 0:
            self.write_checkpoint(self.cfg.checkpoint)
        if self.cfg.push_mode == "unicast":
            self.publish(self.version, False)
        else:
            self.new_version.set()
        self.record(worker=w.gpu, step=g.step, staleness=staleness, applied=True, loss=g.loss,
                    compute=g.compute, apply=self.loop_time() - t0, accuracy=accuracy)

    async def pusher(self) -> None:
        while not self.done:
            await self.new_version.wait()
            self.new_version.clear()
            if self.done:
                return
            await self.push(self.version, False)

    # ---- end -------------------------------------------------------------------------------------

    def record(self, **fields) -> None:
        counters = {**self.app.traffic(), **asdict(self.counters), **asdict(self.fetch_stats)}
        self.metrics.write({"version": self.version, "workers": len(self.live), **fields,
                            "segment_rto": self.fetcher.rto.rto, **self.delta.take(counters)})

    async def finish(self) -> None:
        cfg = self.cfg
        if self.accuracy is None:
            self.evaluate(force=True)
        log.info("training %s/%s done: version %d, test accuracy %.4f", cfg.ps, cfg.train,
                 self.version, self.accuracy)
        if self.save_path:
            self.save(self.save_path)
        # Stay for late probes (and unicast fetches) until every worker left, or `linger`.
        # The final version is pushed again every second meanwhile, for workers below a
        # forwarder restarted since the push (one that still caches it drops the same bytes:
        # its workers' probes find it in the cache).
        deadline = self.loop_time() + cfg.linger
        while self.loop_time() < deadline:
            if cfg.push_mode == "persistent" and self.all_left:
                break
            if cfg.push_mode == "unicast" and all(w.final_fetched for w in self.live):
                break
            self.removed.clear()
            if not await wait_event(self.removed, min(1.0, deadline - self.loop_time())):
                if cfg.push_mode == "persistent" and self.loop_time() < deadline:
                    self.counters.final_repushes += 1
                    await self.push(self.version, True)
        for task in list(self.rejoin_tasks.values()):
            task.cancel()
        self.metrics.write({"event": "end", "version": self.version, "accuracy": self.accuracy,
                            "workers": [w.gpu for w in self.live],
                            "lost": [w.gpu for w in self.workers if not w.live],
                            "resumed_from": self.resumed_from, "restarts": self.restarts,
                            **asdict(self.counters),
                            **asdict(self.fetch_stats), **self.app.traffic(),
                            **self.app.link_events()})

    # ---- checkpoint (PS restart) ------------------------------------------------------------

    def fingerprint(self) -> dict:
        """What must match for a checkpoint to be resumed by this configuration."""
        cfg = self.cfg
        return {"ps": cfg.ps, "train": cfg.train, "mode": cfg.mode, "model_spec": self.spec,
                "dataset": cfg.dataset, "dataset_kwargs": cfg.dataset_kwargs(),
                "seed": cfg.seed, "batch": cfg.batch}

    def write_checkpoint(self, path: str) -> None:
        """Parameters, optimizer state (momentum), version and workers, atomically: a PS
        killed while writing leaves the previous checkpoint whole (tmp file + os.replace)."""
        meta = {**self.fingerprint(), "version": self.version, "done": self.done,
                "workers": [w.gpu for w in self.workers], "restarts": self.restarts,
                "accuracy": self.accuracy,
                # async: where each worker is, and what each version says was collected
                "steps": {w.gpu: w.steps_done for w in self.workers},
                "collected": dict(self.collected)}
        state = self.opt.state_dict()
        meta["opt"] = {k: state[k] for k in ("lr", "momentum", "weight_decay")}
        # Any, not ndarray: mypy would match an unpacked dict[str, ndarray] against savez's
        # allow_pickle (it cannot know the keys never say "allow_pickle")
        arrays: dict[str, Any] = {f"p:{k}": v for k, v in self.model.params.items()}
        arrays.update({f"v:{k}": v for k, v in state["velocity"].items()})
        tmp = f"{path}.tmp"
        with open(tmp, "wb") as f:
            np.savez(f, **arrays, __meta__=np.array(json.dumps(meta)))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        self.counters.checkpoints += 1

    def resume(self) -> list[str] | None:
        """Load the checkpoint if there is one: version, parameters, optimizer state.  Returns
        its workers (in index order), or None when starting afresh."""
        path = self.cfg.checkpoint
        if not os.path.exists(path):
            return None
        try:
            with np.load(path) as z:
                meta = json.loads(str(z["__meta__"]))
                params = {k[2:]: z[k] for k in z.files if k.startswith("p:")}
                velocity = {k[2:]: z[k] for k in z.files if k.startswith("v:")}
        except (OSError, ValueError, KeyError) as e:
            raise JobFailed(f"checkpoint {path} unreadable: {e}") from None
        fp = self.fingerprint()
        for key, value in fp.items():
            if json.loads(json.dumps(meta.get(key))) != json.loads(json.dumps(value)):
                raise JobFailed(f"checkpoint {path} is of another training ({key}: "
                                f"{meta.get(key)!r} here {value!r})")
        if meta.get("done"):
            raise JobFailed(f"checkpoint {path}: that training is finished (version "
                            f"{meta['version']}); remove it to start again")
        unknown = [g for g in meta["workers"] if g not in self.cfg.workers]
        if unknown or set(params) != set(self.model.params):
            raise JobFailed(f"checkpoint {path} does not fit this configuration "
                            f"(workers {unknown} unknown, or another model)")
        self.model.load_params({k: params[k] for k in self.model.params})
        self.opt.load_state_dict({**meta["opt"], "velocity": velocity})
        self.version = self.resumed_from = int(meta["version"])
        self.resumed_steps = {str(g): int(n) for g, n in meta.get("steps", {}).items()}
        self.collected = {str(g): int(n) for g, n in meta.get("collected", {}).items()}
        self.restarts = int(meta.get("restarts", 0)) + 1
        log.info("resumed from checkpoint %s: version %d (restart %d)", path, self.version,
                 self.restarts)
        self.metrics.write({"event": "resumed", "version": self.version, "path": path,
                            "restarts": self.restarts})
        return list(meta["workers"])

    def save(self, path: str) -> None:
        meta = {"ps": self.cfg.ps, "train": self.cfg.train, "version": self.version,
                "accuracy": self.accuracy, "model_spec": self.spec, "mode": self.cfg.mode}
        arrays: dict[str, Any] = self.model.params      # Any: as in write_checkpoint
        with open(path, "wb") as f:       # keeps the exact file name (np.savez appends .npz)
            np.savez(f, **arrays, __meta__=np.array(json.dumps(meta)))
        log.info("model saved to %s", path)


# ---- command line ---------------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = app_parser(
        "python -m apps.ps",
        "ndnps parameter server: assigns the training to workers, serves the training "
        "content, collects gradients, pushes parameters along the persistent PIT (or serves "
        "them per worker in unicast mode).",
        "0 done, 1 error, 2 bad configuration, 3 the training cannot go on",
        "one per version")
    p.add_argument("--config", metavar="FILE", help="TOML file with a [training] table "
                   "(the scenario file); flags override it")
    p.add_argument("--save", metavar="FILE.npz", help="save the final model here")
    add_arguments(p)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    setup_logging(args.log_level, "ps")
    limit_blas_threads()
    try:
        cfg = load(args.config, args)
    except ConfigError as e:
        print(f"ps: bad configuration: {e}", file=sys.stderr)
        return EXIT_USAGE
    metrics = MetricsWriter(args.metrics, role="ps", name=cfg.ps, train=cfg.train)
    metrics.write({"event": "launched"})        # the PS's start, for its start-to-end time
    return serve(args.transport, metrics,
                 lambda app: ParameterServer(cfg, app, metrics, args.save).run(),
                 args.reconnect_timeout, args.lp_reliability, args.link_repair)


if __name__ == "__main__":
    sys.exit(main())
