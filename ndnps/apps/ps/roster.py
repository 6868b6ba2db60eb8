"""The PS's roster: the task's assignment (protocol step 2: /<gpu>/<ps>/<train> to each candidate,
accepted or declined with a reason) and the asyncio adapter around
ndnps.exchanges.ps.membership for workers lost and back.  Membership decides (states, offers'
times, the quorum's grace); ``Roster`` sends the offers, runs one rejoin task per lost worker,
records the events, and wakes the training loops through `changed` (a lost worker is back, or
given up on).  It reads the PS's progress (version, done) through ``Progress`` (the
ParameterServer), and (re)makes a worker's training content through content.py.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from ndnps.client.events import wait_event
from ndnps.client.fetcher import FetchError, SegmentFetcher
from ndnps.exchanges.ps.membership import Event, Member, Membership, State
from ndnps.lab.metrics import MetricsWriter
from ndnps.protocol import messages, names
from ndnps.protocol.codec import CodecError
from ndnps.protocol.config import PsConfig

from ..common.training import JobFailed, PsCounters
from .content import Content

log = logging.getLogger("ps")


class Progress(Protocol):
    """What the roster reads of the PS: the current version, and whether the training is over."""
    version: int
    done: bool


class Roster:
    def __init__(self, cfg: PsConfig, progress: Progress, membership: Membership,
                 fetcher: SegmentFetcher, content: Content, metrics: MetricsWriter,
                 counters: PsCounters) -> None:
        self.cfg, self.progress, self.membership = cfg, progress, membership
        self.fetcher, self.content = fetcher, content
        self.metrics, self.counters = metrics, counters
        self.changed = asyncio.Event()              # a lost worker is back, or given up on
        self.rejoin_tasks: dict[str, asyncio.Task] = {}
        self.last_dropped = ""

    @staticmethod
    def loop_time() -> float:
        return asyncio.get_running_loop().time()

    # ---- step 2: task assignment -----------------------------------------------------------

    async def offer_task(self, gpu: str, tries: int) -> tuple[bool, str]:
        """Offer the task to `gpu` (at most `tries` tries); (accepted, reason).  A worker
        answers at once, so its round trips are samples of the path's, and once one is
        measured no try waits more than the RTO's ceiling (before that, `task_timeout`
        doubling up to 16 times it)."""
        cfg = self.cfg
        try:
            seg = await self.fetcher.fetch_one(
                names.task(gpu, cfg.who.ps, cfg.who.train), lifetime=cfg.tasks.task_timeout,
                max_lifetime=16 * cfg.tasks.task_timeout, tries=tries, fresh=True, prompt=True)
        except FetchError as e:
            if e.rejected:
                # its acceptance failed our signature check: it signs with another key; its
                # content Interests get a refusal it cannot verify, and it says so
                self.content.refused[gpu] = "its answer to the task failed the PS's signature check"
            return False, str(e)
        try:
            return messages.parse_task_reply(bytes(seg.content))
        except CodecError as e:
            return False, f"malformed answer: {e}"

    async def assign_task(self, gpu: str) -> tuple[bool, str]:
        """Ask one candidate; (accepted, reason)."""
        return await self.offer_task(gpu, self.cfg.tasks.task_tries)

    async def assign_tasks(self) -> list[str]:
        """Every candidate asked at once; the ones that accepted, in configuration order."""
        cfg = self.cfg
        # after a restart (checkpoint), workers still in the job answer "already assigned" and
        # fetch their content again: the checkpoint's version and parameters
        answers = await asyncio.gather(*(self.assign_task(g) for g in cfg.who.workers))
        self.content.release_refused()          # their content Interests held meanwhile
        for gpu, (ok, reason) in zip(cfg.who.workers, answers):
            log.info("worker %s %s%s", gpu, "accepted" if ok else "declined",
                     f": {reason}" if reason else "")
            self.metrics.write({"event": "task", "worker": gpu, "accepted": ok, "reason": reason})
        accepted = [g for g, (ok, _) in zip(cfg.who.workers, answers) if ok]
        if len(accepted) < cfg.who.min_workers:
            declined = {g: r for g, (ok, r) in zip(cfg.who.workers, answers) if not ok}
            raise JobFailed(f"only {len(accepted)} of {len(cfg.who.workers)} workers accepted, "
                            f"min_workers = {cfg.who.min_workers}; declined: {declined}")
        return accepted

    # ---- loss and rejoin: exchanges.ps.membership decides, these wait and send -----------------

    def drop(self, w: Member, why: str) -> None:
        """Worker w is lost.  With rejoin_timeout > 0 the task is re-offered to it (rejoin)."""
        if w.state is not State.LIVE:
            return
        version = self.progress.version
        rejoin = self.membership.lose(w, self.loop_time(), version,
                                      rejoin=not self.progress.done)
        self.content.forget(w.gpu)
        self.counters.workers_dropped += 1
        self.counters.workers_lost += 1
        log.warning("dropping worker %s: %s", w.gpu, why)
        self.metrics.write({"event": "dropped", "worker": w.gpu, "reason": why,
                            "version": version})
        if rejoin and w.gpu not in self.rejoin_tasks:
            self.rejoin_tasks[w.gpu] = asyncio.get_running_loop().create_task(self.rejoin(w))
        if not rejoin and not self.membership.has_quorum():
            raise JobFailed(f"{len(self.membership.live)} live workers left, min_workers = "
                            f"{self.cfg.who.min_workers} (last dropped {w.gpu}: {why})")
        self.last_dropped = f"{w.gpu}: {why}"

    async def rejoin(self, w: Member) -> None:
        """Lost worker w: offer it the task when Membership says, until it is back or given up
        on.  A restarted worker accepts and fetches its content (the current parameters and
        version): then it is live again, collected from the next version on (or, with
        on_worker_loss = wait, for the version that lost it).  One that still runs the job
        (cut off, not killed) answers "already assigned" and is live at once."""
        m = self.membership
        try:
            while not self.progress.done and m.may_come_back(w):
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
                                self.cfg.tasks.rejoin_timeout)
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
            self.content.make(w)
            self.back(w, reason)
        elif ok:                                    # back once it has fetched its content
            self.membership.accepted(w, self.loop_time())
            self.content.make(w)
        else:
            self.membership.declined(w, self.loop_time())
            log.debug("worker %s not back (%s)", w.gpu, reason)

    def fetched(self, w: Member) -> None:
        """Rejoining worker w fetched all of its content: it is back."""
        self.membership.fetched(w)
        self.back(w, "")

    def back(self, w: Member, reason: str) -> None:
        version = self.progress.version
        self.counters.workers_rejoined += 1
        log.info("worker %s rejoined at version %d (lost at %s)%s", w.gpu, version,
                 w.lost_at, f": {reason}" if reason else "")
        self.metrics.write({"event": "rejoined", "worker": w.gpu, "version": version,
                            "lost_at": w.lost_at})
        self.changed.set()

    def cancel(self) -> None:
        """The end: no more offers."""
        for task in list(self.rejoin_tasks.values()):
            task.cancel()

    # ---- waiting for workers ----------------------------------------------------------------

    async def quorum(self) -> None:
        """At least min_workers live before going on, or a grace for lost ones to come back
        (exchanges.ps.membership): a worker dropped for silence may be alive (cut off, or its
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
            raise JobFailed(f"{len(m.live)} live workers left, min_workers = "
                            f"{m.min_workers}, none back within {m.grace:.0f} s (last dropped "
                            f"{self.last_dropped})")

    async def wait_rejoin(self, lost: list[Member]) -> None:
        """on_worker_loss = wait: until every worker in `lost` is live again."""
        while not all(w.state is State.LIVE for w in lost):
            if not any(self.membership.may_come_back(w) for w in lost):
                gone = [w.gpu for w in lost if w.state is not State.LIVE]
                raise JobFailed(f"on_worker_loss = wait: {', '.join(gone)} did not rejoin "
                                f"within rejoin_timeout = "
                                f"{self.cfg.tasks.rejoin_timeout:.0f} s")
            self.changed.clear()
            await self.changed.wait()

    async def back_or_gone(self, w: Member) -> bool:
        """Async: wait while lost worker w may rejoin; True once it is back."""
        while self.membership.may_come_back(w) and not self.progress.done:
            self.changed.clear()
            await self.changed.wait()
        return w.state is State.LIVE and not self.progress.done

