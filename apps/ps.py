"""The parameter server: ``python -m apps.ps [--config scenario.toml] [flags]``.

A composition: the sans-I/O exchanges of ndnps.exchanges decide, this module does their I/O.
Seed steps, from the PS's side (names in ndnps/protocol/names.py):

  2  assign_tasks   /<gpu>/<ps>/<train> to each candidate; accept, or decline with a reason
  3  serve_content  /<ps>/<train>/<gpu>/<seg>: spec, hyper-parameters, shard, initial params
  4  on_register    /*insert*/<ps>/<train> -> Data /*distribute*/<ps>/<train> (confirmation)
  5  collect        /<gpu>/<ps>/<train>/<step>/<seg>, sent when exchanges.collector says the
                    gradient will be ready; the worker holds it until then
  6  push           /*distribute*/<ps>/<train>/<version>/<seg>: exchanges.publisher's, paced
  9  on_probe       the publisher answers for its last few versions
     on_remove      /*remove*/<ps>/<train>: a worker leaves
     rejoin         a lost worker's task re-offered, as exchanges.membership's table says
     unicast        the baseline without persistent PIT: apps/unicast.py
     checkpoint     a restarted PS resumes: apps/checkpoint.py

The update rule (exchanges.update, pluggable: ``set_update_rule``) makes the next parameters:
sync mode averages all live workers' gradients of version v in worker-index order (the
arithmetic of ndnps.ml.train.train_sync_reference), steps SGD and pushes v+1; async mode
applies each gradient as it arrives (dropping those more than ``max_staleness`` versions old)
and pushes every new version.  The run ends after the configured epochs/versions or at the
target accuracy: the last version is pushed with ``done``; the model is saved (``--save``).
Exit 0: done; 2: bad configuration; 3: the training cannot go on (too few workers); 1: other.
"""
from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import sys
from dataclasses import asdict, dataclass

import numpy as np

from ndnps.ndn.rto import RtoEstimator
from ndnps.client.events import wait_event
from ndnps.client.fetcher import (MIN_RTO, TLP_FLOOR, FetchError, FetchStats, SegmentFetcher,
                                  reorder_floor)
from ndnps.client.pacer import Pacer
from ndnps.client.pending import HeldInterests
from ndnps.client.security import Security
from ndnps.client.segments import sign_segments
from ndnps.exchanges import collector
from ndnps.exchanges.membership import Event, Member, Membership, State
from ndnps.exchanges.publisher import Publisher
from ndnps.exchanges.update import Contribution, UpdateRule, rule_for
from ndnps.lab.metrics import Delta, MetricsWriter
from ndnps.ml.data import load_dataset
from ndnps.ml.models import SGD, build_model
from ndnps.ml.train import steps_per_epoch
from ndnps.ndn.conventions import segment
from ndnps.protocol import messages, names
from ndnps.protocol.codec import CodecError, MixedSegments, flatten, param_spec
from ndnps.protocol.config import ConfigError, TrainingConfig, add_arguments, load

from . import checkpoint
from .launch import (EXIT_JOB_FAILED, EXIT_OK, EXIT_USAGE, app_parser, limit_blas_threads,
                     serve, setup_logging)
from .unicast import ParamsServer

log = logging.getLogger("ps")

PUSH_FRESHNESS_MS = 10_000      # probes ask MustBeFresh: a cache answers only recent pushes
CONFIRM_FRESHNESS_MS = 1_000
CONTENT_KNOBS = ("window", "retx_suppression_ms", "retx_suppression_max_ms", "segment_timeout",
                 "max_tries", "probe_initial", "probe_k", "probe_min", "probe_max", "gap_delay",
                 "tail_delay", "register_interval", "register_timeout", "register_tries",
                 "collect_lifetime", "ps_timeout")


class JobFailed(Exception):
    """The training cannot go on (the message says why)."""


@dataclass
class PsCounters:
    registrations: int = 0
    removes: int = 0
    segments_pushed: int = 0
    gradients: int = 0
    malformed: int = 0
    mixed_objects: int = 0          # gradients made of two worker incarnations' segments
    stale_dropped: int = 0          # gradients the update rule did not apply (async)
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
                 save_path: str | None = None, update_rule: UpdateRule | None = None) -> None:
        self.cfg, self.app = cfg, app
        self.metrics = metrics or MetricsWriter(None)
        self.save_path = save_path
        self.sec = Security(cfg.key_bytes, names.key(cfg.ps, cfg.train))
        self.dataset = ds = load_dataset(cfg.dataset, cfg.seed, **cfg.dataset_kwargs())
        self.spec = {"n_in": ds.n_features, "n_classes": ds.n_classes, **cfg.model_spec()}
        self.model = build_model(self.spec, cfg.seed)          # = train_sync_reference's
        self.pspec = param_spec(self.model.params)
        self.n_params = self.model.n_params
        self.opt = SGD(cfg.lr, cfg.momentum, cfg.weight_decay)
        self.rule = update_rule or rule_for(cfg.mode, cfg.max_staleness)
        self.version = 0
        self.collected: dict[str, int] = {}         # async: last step collected per worker
        self.accuracy: float | None = None
        self.done = False
        self.membership = Membership(
            min_workers=cfg.min_workers, rejoin_interval=cfg.rejoin_interval,
            rejoin_timeout=cfg.rejoin_timeout,
            fetch_patience=max(cfg.rejoin_interval, 4 * cfg.segment_timeout))
        self.counters = PsCounters()
        self.fetch_stats = FetchStats()
        self.fetcher = SegmentFetcher(
            app.express_future, self.sec.validator, cfg.window,
            RtoEstimator(cfg.segment_timeout, min_rto=MIN_RTO, max_rto=4 * cfg.segment_timeout),
            cfg.max_tries, self.fetch_stats, reorder_floor=reorder_floor(app),
            suppression=cfg.retx_suppression_ms / 1000,
            suppression_max=cfg.retx_suppression_max_ms / 1000)
        self.held: HeldInterests[tuple[str, int]] = HeldInterests()     # content: gpu, segment
        self.contents: dict[str, list[bytes]] = {}
        self.refused: dict[str, str] = {}           # workers not taken, and why
        self.publisher = Publisher(self.sign_push, cfg.keep_versions)
        self.unicast = ParamsServer(cfg.ps, cfg.train, max(cfg.keep_versions,
                                                           4 * len(cfg.workers) + 4),
                                    functools.partial(app.make_data, signer=self.sec.signer))
        self.pacer = Pacer(cfg.push_rate_mbps, cfg.push_burst, app.drain)
        self.delta = Delta()
        self.removed = asyncio.Event()              # a *remove*, or a unicast final fetch
        self.all_left = False                       # a *remove* came after the end
        self.changed = asyncio.Event()              # a lost worker is back, or given up on
        self.new_version = asyncio.Event()          # async: a version to push
        self.stopped = asyncio.Event()              # async: the target accuracy is reached
        self.rejoin_tasks: dict[str, asyncio.Task] = {}
        self.resumed_from: int | None = None        # the checkpoint's version, if resumed
        self.restarts = 0                           # resumptions so far (the checkpoint's count)
        self.resumed_steps: dict[str, int] = {}     # async: each worker's next step, resumed
        self.last_dropped = ""

    def set_update_rule(self, rule: UpdateRule) -> None:
        """The rule that turns gradients into parameters (exchanges.update): before run()."""
        self.rule = rule

    @property
    def workers(self) -> list[Member]:
        return self.membership.members

    @property
    def live(self) -> list[Member]:
        return self.membership.live

    def loop_time(self) -> float:
        return asyncio.get_running_loop().time()

    # ---- life cycle ------------------------------------------------------------------------

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
                self.prepare_content(resumed)
                for w in [w for w in self.workers if w.gpu not in accepted]:
                    self.drop(w, "did not accept the resumed training")
                await self.push_resumed()
            else:
                self.prepare_content(accepted)
            await (self.run_sync() if cfg.mode == "sync" else self.run_async())
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
            for key in [k for k in self.held.keys() if k[0] == gpu]:
                self.held.release(key, self.refusal(gpu)[0])
        for gpu, (ok, reason) in zip(cfg.workers, answers):
            log.info("worker %s %s%s", gpu, "accepted" if ok else "declined",
                     f": {reason}" if reason else "")
            self.metrics.write({"event": "task", "worker": gpu, "accepted": ok, "reason": reason})
        accepted = [g for g, (ok, _) in zip(cfg.workers, answers) if ok]
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

    def prepare_content(self, gpus: list[str]) -> None:
        """The training's workers are `gpus`, in index order: each one's content is made."""
        cfg = self.cfg
        self.membership.admit(gpus, self.resumed_steps)
        vec = flatten(self.model.params)
        for w in self.workers:
            self.make_content(w, vec)
        segments = len(segment(messages.params_blob(vec, 0, False)))
        log.info("training %s/%s: %d workers, %d parameters (%d segments), %d steps, %s/%s",
                 cfg.ps, cfg.train, len(gpus), self.n_params, segments, self.total_steps,
                 cfg.mode, cfg.push_mode)
        self.metrics.write({"event": "start", "workers": gpus, "n_params": self.n_params,
                            "total_steps": self.total_steps, "mode": cfg.mode,
                            "push_mode": cfg.push_mode, "version": self.version,
                            "resumed_from": self.resumed_from, "restarts": self.restarts})

    def make_content(self, w: Member, vec: np.ndarray) -> None:
        """Worker w's training content: the current parameters and version (a worker that
        rejoins starts there), signed segments; Interests held meanwhile are answered."""
        cfg = self.cfg
        n = len(self.workers)
        info = {
            "ps": cfg.ps, "train": cfg.train, "workers": n, "mode": cfg.mode,
            "push_mode": cfg.push_mode, "model_spec": self.spec,
            "param_spec": [[k, list(s)] for k, s in self.pspec], "dataset": cfg.dataset,
            "dataset_kwargs": cfg.dataset_kwargs(), "seed": cfg.seed, "batch": cfg.batch,
            "steps_per_epoch": steps_per_epoch(len(self.dataset.X_train), n, cfg.batch),
            "total_steps": self.total_steps,
            "hyper": {"lr": cfg.lr, "momentum": cfg.momentum, "weight_decay": cfg.weight_decay,
                      "max_staleness": cfg.max_staleness},
            "knobs": {k: getattr(cfg, k) for k in CONTENT_KNOBS},
            "version": self.version,
            "step": w.steps_done,               # async: the step it computes next
            "restarts": self.restarts,          # a worker rolls back only for a new PS
            "gpu": w.gpu, "index": w.index}
        wires = self.contents[w.gpu] = sign_segments(
            messages.content_blob(vec, info),
            lambda s: names.content(cfg.ps, cfg.train, w.gpu, s), self.sec.signer)
        for key in [k for k in self.held.keys() if k[0] == w.gpu]:
            if key[1] < len(wires) and self.held.release(key, wires[key[1]]):
                self.content_served(w, key[1])

    def refusal(self, gpu: str) -> list[bytes]:
        """A worker not taken is answered this under its content name (signed, one
        segment)."""
        cfg = self.cfg
        return sign_segments(messages.refusal_blob(self.refused[gpu]),
                             lambda s: names.content(cfg.ps, cfg.train, gpu, s),
                             self.sec.signer)

    def content_served(self, w: Member, seg: int) -> None:
        if w.state is State.REJOINING and seg == len(self.contents[w.gpu]) - 1:
            self.membership.fetched(w)      # a restarted worker has its content: it is back
            self.back(w, "")

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
        w = self.membership.get(c.gpu)
        wires = self.contents.get(c.gpu)
        if wires is None:
            # held while the assignment is running, or while a lost worker's new content (the
            # current version) is not made yet
            if c.gpu in self.cfg.workers and (
                    not self.workers or (w is not None and self.membership.may_come_back(w))):
                self.held.hold((c.gpu, c.segment), reply, ctx["deadline"])
            return
        if c.segment < len(wires):
            reply(wires[c.segment])
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

    async def collect(self, w: Member, step: int, ref: float) -> messages.Gradient | None:
        """Worker w's gradient of `step`, asked for when its history says it will be ready
        (relative to `ref`: exchanges.collector's rules).  None: the worker was dropped
        (silent for worker_timeout)."""
        cfg = self.cfg
        delay = collector.send_at(w.estimator, ref) - self.loop_time()
        if delay > 0:
            await asyncio.sleep(delay)

        def name_of(s: int):
            return names.collect(w.gpu, cfg.ps, cfg.train, step, s)

        why = "malformed gradients"
        for attempt in range(3):
            sent = self.loop_time()
            reconnects = self.app.reconnects
            rtt = collector.round_trip(self.fetcher)
            lifetime = collector.held_lifetime(w.estimator, ref, sent, self.fetcher,
                                               cfg.collect_lifetime, TLP_FLOOR)
            try:
                # once the first Data is in, the fetcher's loss recovery takes over
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
                # whichever try brought it: without a history the first ones expire early,
                # and a sample from them alone would never come
                w.estimator.observe(arrived - ref, sent - ref,
                                    held=collector.was_held(waited, rtt))
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

    # ---- loss and rejoin: exchanges.membership decides, these wait and send -----------------

    def drop(self, w: Member, why: str) -> None:
        """Worker w is lost.  With rejoin_timeout > 0 the task is re-offered to it (rejoin)."""
        if w.state is not State.LIVE:
            return
        rejoin = self.membership.lose(w, self.loop_time(), self.version, rejoin=not self.done)
        self.contents.pop(w.gpu, None)      # stale: a restarted worker gets the current version
        self.counters.workers_dropped += 1
        self.counters.workers_lost += 1
        log.warning("dropping worker %s: %s", w.gpu, why)
        self.metrics.write({"event": "dropped", "worker": w.gpu, "reason": why,
                            "version": self.version})
        if rejoin and w.gpu not in self.rejoin_tasks:
            self.rejoin_tasks[w.gpu] = asyncio.get_running_loop().create_task(self.rejoin(w))
        if not rejoin and not self.membership.has_quorum():
            raise JobFailed(f"{len(self.live)} live workers left, min_workers = "
                            f"{self.cfg.min_workers} (last dropped {w.gpu}: {why})")
        self.last_dropped = f"{w.gpu}: {why}"

    async def rejoin(self, w: Member) -> None:
        """Lost worker w: offer it the task when Membership says, until it is back or given up
        on.  A restarted worker accepts and fetches its content (the current parameters and
        version): then it is live again, collected from the next version on (or, with
        on_worker_loss = wait, for the version that lost it).  One that still runs the job
        (cut off, not killed) answers "already assigned" and is live at once."""
        m = self.membership
        try:
            while not self.done and m.may_come_back(w):
                now = self.loop_time()
                wake = m.wake_at(w)
                assert wake is not None             # (OFFERED only while reoffer() awaits)
                if wake > now:
                    self.changed.clear()            # woken early when it is back
                    await wait_event(self.changed, wake - now)
                    continue
                event = m.on_timer(w, now)
                if event is Event.OFFER:
                    await self.reoffer(w)
                elif event is Event.GIVE_UP:
                    log.warning("worker %s did not come back within %.0f s", w.gpu,
                                self.cfg.rejoin_timeout)
                    self.metrics.write({"event": "rejoin_gave_up", "worker": w.gpu})
                    self.changed.set()              # a waiting sync loop rechecks and fails
        finally:
            self.rejoin_tasks.pop(w.gpu, None)

    async def reoffer(self, w: Member) -> None:
        self.counters.rejoin_offers += 1
        ok, reason = await self.offer_task(w.gpu, 1)
        if ok and reason == messages.ALREADY_ASSIGNED:
            # it still runs the job: it refetches its content and goes on from there
            self.membership.already_assigned(w)
            self.make_content(w, flatten(self.model.params))
            self.back(w, reason)
        elif ok:                                    # back once it has fetched its content
            self.membership.accepted(w, self.loop_time())
            self.make_content(w, flatten(self.model.params))
        else:
            self.membership.declined(w, self.loop_time())
            log.debug("worker %s not back (%s)", w.gpu, reason)

    def back(self, w: Member, reason: str) -> None:
        self.counters.workers_rejoined += 1
        log.info("worker %s rejoined at version %d (lost at %s)%s", w.gpu, self.version,
                 w.lost_at, f": {reason}" if reason else "")
        self.metrics.write({"event": "rejoined", "worker": w.gpu, "version": self.version,
                            "lost_at": w.lost_at})
        self.changed.set()

    async def quorum(self) -> None:
        """At least min_workers live before going on, or a grace for lost ones to come back
        (exchanges.membership): a worker dropped for silence may be alive (cut off, or its
        push lost) and answers the re-offer of its task within a rejoin_interval or two."""
        m = self.membership
        if m.has_quorum():
            return
        deadline = m.quorum_deadline(self.loop_time())
        while not m.has_quorum() and self.loop_time() < deadline:
            self.changed.clear()
            if not await wait_event(self.changed, deadline - self.loop_time()):
                break
        if not m.has_quorum():
            raise JobFailed(f"{len(self.live)} live workers left, min_workers = "
                            f"{m.min_workers}, none back within {m.grace:.0f} s (last dropped "
                            f"{self.last_dropped})")

    async def wait_rejoin(self, lost: list[Member]) -> None:
        """on_worker_loss = wait: until every worker in `lost` is live again."""
        while not all(w.state is State.LIVE for w in lost):
            if not any(self.membership.may_come_back(w) for w in lost):
                gone = [w.gpu for w in lost if w.state is not State.LIVE]
                raise JobFailed(f"on_worker_loss = wait: {', '.join(gone)} did not rejoin "
                                f"within rejoin_timeout = {self.cfg.rejoin_timeout:.0f} s")
            self.changed.clear()
            await self.changed.wait()

    async def back_or_gone(self, w: Member) -> bool:
        """Async: wait while lost worker w may rejoin; True once it is back."""
        while self.membership.may_come_back(w) and not self.done:
            self.changed.clear()
            await self.changed.wait()
        return w.state is State.LIVE and not self.done

    # ---- steps 6 and 9: push, probes; the unicast baseline ------------------------------------

    def sign_push(self, version: int, blob: bytes) -> list[bytes]:
        cfg = self.cfg
        return sign_segments(blob, lambda s: names.distribute(cfg.ps, cfg.train, version, s),
                             self.sec.signer, PUSH_FRESHNESS_MS)

    def publish(self, version: int, done: bool, aborted: bool = False) -> list[bytes] | None:
        """Parameters `version` as Data: the publisher's signed push segments, or in unicast
        mode kept for each worker's copy.  Returns the push segments (None in unicast mode)."""
        collected = self.collected if self.cfg.mode == "async" else None
        blob = messages.params_blob(flatten(self.model.params), version, done, collected, aborted)
        if self.cfg.push_mode == "unicast":
            self.unicast.publish(version, blob)
            return None
        return self.publisher.publish(version, blob)

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
        wire = self.publisher.answer(d.version, d.segment)
        if wire is not None:
            reply(wire)

    def serve_params(self, p: names.Params, reply, ctx) -> None:
        if self.membership.get(p.gpu) is None:
            return
        if self.unicast.serve(p, reply, ctx["deadline"], self.version, self.done) and all(
                self.unicast.fetched_final(w.gpu) for w in self.live):
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
        """Steps 5-7, sync: all live workers' gradients of v, the update rule (averaged in
        worker-index order, one SGD step), push v+1."""
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
            self.rule.apply(self.model.params, self.opt, v,
                            [Contribution(w.index, g) for w, g in got])
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

    async def serve_worker_async(self, w: Member) -> None:
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

    def apply_async(self, w: Member, g: messages.Gradient) -> None:
        t0 = self.loop_time()
        out = self.rule.apply(self.model.params, self.opt, self.version,
                              [Contribution(w.index, g)])
        if not out.applied:
            self.counters.stale_dropped += 1
            self.record(worker=w.gpu, step=g.step, staleness=out.staleness, applied=False,
                        loss=g.loss, version_unchanged=True)
            return
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
        self.record(worker=w.gpu, step=g.step, staleness=out.staleness, applied=True,
                    loss=g.loss, compute=g.compute, apply=self.loop_time() - t0,
                    accuracy=accuracy)

    async def pusher(self) -> None:
        while not self.done:
            await self.new_version.wait()
            self.new_version.clear()
            if self.done:
                return
            await self.push(self.version, False)

    # ---- end -------------------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """The PS's counters, its publisher's and its unicast server's (metrics names)."""
        return {**asdict(self.counters), "probes_answered": self.publisher.probes_answered,
                "params_served": self.unicast.served}

    def record(self, **fields) -> None:
        counters = {**self.app.traffic(), **self.counts(), **asdict(self.fetch_stats)}
        self.metrics.write({"version": self.version, "workers": len(self.live), **fields,
                            "segment_rto": self.fetcher.rto.rto, **self.delta.take(counters)})

    async def finish(self) -> None:
        cfg = self.cfg
        if self.accuracy is None:
            self.evaluate(force=True)
        log.info("training %s/%s done: version %d, test accuracy %.4f", cfg.ps, cfg.train,
                 self.version, self.accuracy)
        if self.save_path:
            checkpoint.save_model(self.save_path, {
                "ps": cfg.ps, "train": cfg.train, "version": self.version,
                "accuracy": self.accuracy, "model_spec": self.spec, "mode": cfg.mode},
                self.model.params)
            log.info("model saved to %s", self.save_path)
        # Stay for late probes (and unicast fetches) until every worker left, or `linger`.
        # The final version is pushed again every second meanwhile, for workers below a
        # forwarder restarted since the push (one that still caches it drops the same bytes:
        # its workers' probes find it in the cache).
        deadline = self.loop_time() + cfg.linger
        while self.loop_time() < deadline:
            if cfg.push_mode == "persistent" and self.all_left:
                break
            if cfg.push_mode == "unicast" and all(self.unicast.fetched_final(w.gpu)
                                                  for w in self.live):
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
                            "lost": [w.gpu for w in self.workers if w.state is not State.LIVE],
                            "resumed_from": self.resumed_from, "restarts": self.restarts,
                            **self.counts(), **asdict(self.fetch_stats), **self.app.traffic(),
                            **self.app.link_events()})

    # ---- checkpoint (PS restart): apps/checkpoint.py ------------------------------------------

    def write_checkpoint(self, path: str) -> None:
        progress = checkpoint.Progress(
            self.version, self.done, [w.gpu for w in self.workers], self.restarts,
            self.accuracy, {w.gpu: w.steps_done for w in self.workers}, dict(self.collected))
        checkpoint.write(path, checkpoint.fingerprint(self.cfg, self.spec), progress,
                         self.model.params, self.opt.state_dict())
        self.counters.checkpoints += 1

    def resume(self) -> list[str] | None:
        """Load the checkpoint if there is one: version, parameters, optimizer state.  Returns
        its workers (in index order), or None when starting afresh."""
        path = self.cfg.checkpoint
        try:
            got = checkpoint.load(path, checkpoint.fingerprint(self.cfg, self.spec),
                                  self.cfg.workers, list(self.model.params))
        except checkpoint.CheckpointError as e:
            raise JobFailed(str(e)) from None
        if got is None:
            return None
        p = got.progress
        self.model.load_params(got.params)
        self.opt.load_state_dict(got.optimizer)
        self.version = self.resumed_from = p.version
        self.resumed_steps, self.collected, self.restarts = p.steps, p.collected, p.restarts
        log.info("resumed from checkpoint %s: version %d (restart %d)", path, self.version,
                 self.restarts)
        self.metrics.write({"event": "resumed", "version": self.version, "path": path,
                            "restarts": self.restarts})
        return p.workers


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
