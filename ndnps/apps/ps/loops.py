"""The PS's training loops (protocol steps 5-7, docs/design.md), one per mode; the update rule
(exchanges.ps.update) makes the next parameters, the PS pushes them.

* sync (``run_sync``): all live workers' gradients of version v, averaged in worker-index order
  (the arithmetic of ndnps.ml.train.train_sync_reference), one SGD step, push v+1; with
  on_worker_loss = continue it waits for a quorum, with wait it collects again from the lost
  workers once they are back.
* async (``AsyncTraining``): each worker served in its own task, each gradient applied as it
  arrives (the rule drops those more than max_staleness versions old), every new version
  pushed by a pusher that coalesces versions made while a push is under way.

The loops drive the ParameterServer through ``Server``: they advance its version, done and
accuracy, and use its collect, roster, push and records.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

import numpy as np

from ndnps.exchanges.ps.membership import Member
from ndnps.exchanges.ps.update import Contribution, UpdateRule
from ndnps.protocol import messages
from ndnps.protocol.config import PsConfig

from ..common.aggregate import Aggregate
from ..common.share import Share
from ..common.training import JobFailed, PsCounters
from .collect import Collect
from .roster import Roster
from .serving import Serving

log = logging.getLogger("ps")


class Server(Protocol):
    """What the loops use of the PS."""
    cfg: PsConfig
    version: int
    done: bool
    accuracy: float | None
    collected: dict[str, int]
    model: Any
    opt: Any
    rule: UpdateRule
    counters: PsCounters
    roster: Roster
    collect: Collect
    aggregate: Aggregate | None
    share: Share
    serving: Serving

    @property
    def live(self) -> list[Member]: ...
    @property
    def workers(self) -> list[Member]: ...
    @property
    def total_steps(self) -> int: ...
    def loop_time(self) -> float: ...
    def evaluate(self, force: bool = False) -> float | None: ...
    def is_done(self, accuracy: float | None) -> bool: ...
    def record(self, **fields) -> None: ...
    def write_checkpoint(self, path: str) -> None: ...


async def run_sync(ps: Server) -> None:
    """Steps 5-7, sync: all live workers' gradients of v, the update rule (averaged in
    worker-index order, one SGD step), push v+1."""
    cfg = ps.cfg
    total = ps.total_steps
    ref = ps.loop_time()
    collecting = 0.0                        # how long the last version's gradients took
    while not ps.done:
        if cfg.tasks.on_worker_loss == "continue":
            await ps.roster.quorum()
        v = ps.version
        t0 = ps.loop_time()
        if ps.aggregate is not None:        # answered as the gradients are in
            ps.share.ask_early(v, collecting)
        live = ps.live
        # with in-network aggregation, each worker's gradient header; the values' sums after
        collect: Any = ps.collect if ps.aggregate is None else ps.collect.meta
        grads = await asyncio.gather(*(collect(w, v, ref) for w in live))
        got = [(w, g) for w, g in zip(live, grads) if g is not None]
        lost = [w for w, g in zip(live, grads) if g is None]
        while cfg.tasks.on_worker_loss == "wait" and lost:
            # the version waits for them: collected again once they are back
            log.info("version %d: waiting for %s to rejoin", v, ", ".join(w.gpu for w in lost))
            await ps.roster.wait_rejoin(lost)
            ps.counters.collects_redone += len(lost)
            ref = ps.loop_time()
            grads = await asyncio.gather(*(collect(w, v, ref) for w in lost))
            got += [(w, g) for w, g in zip(lost, grads) if g is not None]
            lost = [w for w, g in zip(lost, grads) if g is None]
        got.sort(key=lambda wg: wg[0].index)
        if not got:
            raise JobFailed("no gradient arrived")
        if len(got) < len(ps.workers):
            ps.counters.short_versions += 1
        ta = ps.loop_time()
        collecting = ta - t0
        shared: dict = {}
        if ps.aggregate is not None:
            # the network's sums (if the share controller says so); the average as
            # the reference's, one SGD step
            decision = await ps.share.ask(v)
            shared = decision.record()
            summed, counts = await ps.aggregate(v, [w for w, _ in got], got[0][1].segments,
                                                network=decision.use)
            ps.share.done(v, ps.aggregate.clean)
            mean = messages.Gradient(v, got[0][1].base_version, summed / counts, 0.0, 0.0)
            contributions = [Contribution(0, mean)]
        else:
            contributions = [Contribution(w.index, g) for w, g in got]
        t1 = ps.loop_time()
        ps.rule.apply(ps.model.params, ps.opt, v, contributions)
        ps.version = v + 1
        accuracy = ps.evaluate(force=ps.version >= total)
        ps.done = ps.version >= total or ps.is_done(accuracy)
        t2 = ps.loop_time()
        ref = t2
        push_time = await ps.serving.push(ps.version, ps.done)
        ps.record(collect_wait=t1 - t0, aggregate=t1 - ta, apply=t2 - t1, push=push_time,
                  loss=float(np.mean([g.loss for _, g in got])),
                  compute=float(np.mean([g.compute for _, g in got])),
                  gradients=len(got), accuracy=accuracy, **shared)
        # after the version's record (a PS killed during the push leaves no checkpoint
        # ahead of its records) and off the workers' path (they compute meanwhile)
        ckpt = cfg.checkpointing
        if ckpt.checkpoint and (ps.version % ckpt.checkpoint_every == 0 or ps.done):
            ps.write_checkpoint(ckpt.checkpoint)


class AsyncTraining:
    """Async: each gradient is applied as it arrives and every new version pushed (a pusher
    coalesces versions produced while a push is under way)."""

    def __init__(self, ps: Server) -> None:
        self.ps = ps
        self.new_version = asyncio.Event()          # a version to push
        self.stopped = asyncio.Event()              # the target accuracy is reached

    async def run(self) -> None:
        ps = self.ps
        pusher = asyncio.create_task(self.pusher())
        stop = asyncio.create_task(self.stopped.wait())
        pending: set[asyncio.Task[object]] = {
            asyncio.create_task(self.serve_worker(w)) for w in ps.workers}
        loops = set(pending)
        try:
            while pending and not ps.done:
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
        ps.done = True
        self.new_version.set()
        await pusher
        # the closing version: the same parameters, marked done, under a fresh version number
        ps.version += 1
        ps.evaluate(force=True)
        if ps.cfg.checkpointing.checkpoint:
            ps.write_checkpoint(ps.cfg.checkpointing.checkpoint)
        push_time = await ps.serving.push(ps.version, True)
        ps.record(push=push_time, accuracy=ps.accuracy, closing=True)

    async def serve_worker(self, w: Member) -> None:
        """Worker w's gradients, step after step; a lost worker is served again once it
        rejoins (from the step it had reached: its content says which)."""
        ps = self.ps
        total = ps.total_steps
        ref = ps.loop_time()
        while not ps.done and w.steps_done < total:
            await ps.roster.quorum()
            g = await ps.collect(w, w.steps_done, ref)
            ref = ps.loop_time()
            if ps.done:                         # the target was reached meanwhile
                return
            if g is None:
                if not await ps.roster.back_or_gone(w):
                    return
                ref = ps.loop_time()
                continue
            w.steps_done += 1
            ps.collected[w.gpu] = g.step
            self.apply(w, g)

    def apply(self, w: Member, g: messages.Gradient) -> None:
        ps = self.ps
        t0 = ps.loop_time()
        out = ps.rule.apply(ps.model.params, ps.opt, ps.version, [Contribution(w.index, g)])
        if not out.applied:
            ps.counters.stale_dropped += 1
            ps.record(worker=w.gpu, step=g.step, staleness=out.staleness, applied=False,
                      loss=g.loss, version_unchanged=True)
            return
        ps.version += 1
        accuracy = ps.evaluate()
        if ps.is_done(accuracy):
            ps.done = True
            self.stopped.set()
        ckpt = ps.cfg.checkpointing
        if ckpt.checkpoint and ps.version % ckpt.checkpoint_every == 0:
            ps.write_checkpoint(ckpt.checkpoint)
        if ps.cfg.push.push_mode == "unicast":
            ps.serving.publish(ps.version, False)
        else:
            self.new_version.set()
        ps.record(worker=w.gpu, step=g.step, staleness=out.staleness, applied=True,
                  loss=g.loss, compute=g.compute, apply=ps.loop_time() - t0,
                  accuracy=accuracy)

    async def pusher(self) -> None:
        ps = self.ps
        while not ps.done:
            await self.new_version.wait()
            self.new_version.clear()
            if ps.done:
                return
            await ps.serving.push(ps.version, False)
