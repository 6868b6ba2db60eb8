"""The share controller and a job's nodes agreeing on each round (time-division sharing of the
aggregators, docs/sharing.md: the decision rule s1–s3 and the prepare/lock/confirm agreement),
sans-I/O: `Controller` (the controller's side) and `Asker` (a node's). The I/O — Interests with
per-node names, freshness-zero Data: ndnps.apps.controller and ndnps/apps/common/share.py — is the
callers'. Both take events and a `now`, return what to answer or send, and say when to wake them
(`next_wake`, then `tick(now)`).

A round of job J, the agreement run over Interest/Data:

* **prepare + lock**: before round r each node of J asks the controller (its ask names the
  node and r). A node that has asked does not start r until it has the answer: its lock. The
  ask carries its round number: the confirmation that all nodes mean the same round.
* **check**: the controller holds the asks until every node of J has asked. Same round from all: it
  decides (ndnps.exchanges.sharing.decision, s1–s3; or FIFO for "always-wait") and answers them all
  alike — the update. Different rounds, or not all within `timeout`: it aborts (RETRY, after
  `backoff` doubling) and they ask again; after `tries` aborts the round is decided the ordinary
  way. Either way the decision is recorded, and a node asking for that round later (a
  retransmission, a late node) gets the recorded one: one decision per round, whoever asks.
* **apply + release**: the nodes run the round as decided and say done (their confirmation);
  once all have, the round's duration is measured and the aggregators, if J held them, are
  free again — at once when every sum came back, or after `slot_timeout` when some did not
  (their slots may still be held in the forwarder until their deadline). A node's ask for the
  next round says it is done with this one. A holder that never finishes is released after
  `hold_limit`.

A node that hears nothing for `patience` runs its round the ordinary way (recorded
"unreachable"); the controller never decides "aggregate" for a round some node never asked
for, so a node cut off from it and the others agree.

A job's agreement, one table (h11's style; anything else is ignored). A decided round then
runs (`_Run`) until every node has said done, while the next round's agreement may begin:

    IDLE        --ask-->      COLLECTING   (the first ask of a round)
    COLLECTING  --agreed-->   IDLE         (decided, answered: the round runs)
    COLLECTING  --wait-->     QUEUED       (always-wait: another job holds the aggregators)
    QUEUED      --granted-->  IDLE         (decided, answered: the round runs)
    COLLECTING  --abort-->    IDLE         (RETRY answered; asked again after a backoff)
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from enum import Enum

from ndnps.protocol.sharing import CONTROLLED_POLICIES

from .decision import SCORES, JobState, Score, decide

DECISIONS_KEPT = 256              # per job: rounds whose decision a late ask may still need


class Verdict(Enum):
    AGGREGATE = "aggregate"
    ORDINARY = "ordinary"
    RETRY = "retry"


@dataclass(frozen=True)
class Answer:
    job: str
    node: str
    round: int
    verdict: Verdict
    retry_after: float = 0.0


class Phase(Enum):
    IDLE = "idle"
    COLLECTING = "collecting"
    QUEUED = "queued"


_NEXT = {
    (Phase.IDLE, "ask"): Phase.COLLECTING,
    (Phase.COLLECTING, "agreed"): Phase.IDLE,
    (Phase.COLLECTING, "wait"): Phase.QUEUED,
    (Phase.QUEUED, "granted"): Phase.IDLE,
    (Phase.COLLECTING, "abort"): Phase.IDLE,
}


class Mean:
    """An exponentially weighted mean (0 until the first sample)."""

    def __init__(self, weight: float = 0.3) -> None:
        self.weight, self.value, self.n = weight, 0.0, 0
        self.dev = 0.0                      # the mean deviation, weighted alike (RTTVAR's way)
        self.at = 0.0                       # when the last sample came

    def add(self, x: float, now: float) -> None:
        if self.n:
            self.dev += self.weight * (abs(x - self.value) - self.dev)
        self.value = x if self.n == 0 else self.value + self.weight * (x - self.value)
        self.n += 1
        self.at = now

    def fresh(self, now: float, horizon: float) -> float:
        """The mean, or 0 (not measured) when its last sample is older than `horizon`."""
        return self.value if self.n and now - self.at <= horizon else 0.0


# A round's duration the ordinary way not measured again for this many of the job's periods is
# taken as not measured (its saving is then one second per second:
# ndnps.exchanges.sharing.decision). A job that always wins the aggregators never runs a round the
# ordinary way, and one measured the ordinary way at a bad moment (a PS job's first rounds under
# contention: 0.21 s against 0.05 s later) kept the saving it never had for the rest of the run,
# winning every round against jobs that save more. (Its aggregated duration does not expire: a job
# not measured aggregated goes first, and an expired one would take the aggregators every few
# periods.)
STALE_PERIODS = 5


@dataclass
class JobStats:
    rounds: int = 0
    aggregated: int = 0
    ordinary: int = 0
    aborts: int = 0               # agreements aborted (RETRY answered)
    gave_up: int = 0              # rounds decided the ordinary way after `tries` aborts
    queued: int = 0               # always-wait: rounds that waited for the holder
    released_late: int = 0        # holds ended by hold_limit (a node never said done)


@dataclass
class _Run:
    """A decided round, until every node has said done."""
    round: int
    started: float
    aggregated: bool
    done: set[str] = field(default_factory=set)
    clean: bool = True            # every node's sums came back (its slots are free)


@dataclass
class _Job:
    name: str
    nodes: tuple[str, ...]
    phase: Phase = Phase.IDLE
    round: int = -1               # the round being agreed (or last agreed)
    asked: set[str] = field(default_factory=set)
    deadline: float | None = None  # COLLECTING: every node's ask is due by then
    attempts: int = 0             # aborts of this round so far
    run: _Run | None = None
    decisions: OrderedDict[int, bool] = field(default_factory=OrderedDict)
    round_s: Mean = field(default_factory=Mean)
    ordinary_s: Mean = field(default_factory=Mean)
    period: Mean = field(default_factory=Mean)
    last_start: float | None = None
    last_granted: float | None = None
    stats: JobStats = field(default_factory=JobStats)

    def go(self, event: str) -> None:
        self.phase = _NEXT[(self.phase, event)]

    def state(self, now: float) -> JobState:
        horizon = STALE_PERIODS * self.period.value if self.period.n else float("inf")
        return JobState(self.name, self.round_s.value, self.period.value, self.last_start,
                        self.ordinary_s.fresh(now, horizon), self.last_granted,
                        self.period.dev)

    def record(self, r: int, use: bool) -> None:
        self.decisions[r] = use
        while len(self.decisions) > DECISIONS_KEPT:
            self.decisions.popitem(last=False)


class Controller:
    """`jobs`: each job's nodes. `policy`: "time-division" (s1–s3 with `score`) or
    "always-wait" (a FIFO lock: a round waits for the aggregators)."""

    def __init__(self, jobs: dict[str, list[str]], policy: str = "time-division",
                 score: str | Score = "time-saved", timeout: float = 1.0,
                 backoff: float = 0.05, tries: int = 4, slot_timeout: float = 2.0,
                 hold_limit: float = 30.0) -> None:
        if policy not in CONTROLLED_POLICIES:
            raise ValueError(f"policy must be one of {', '.join(CONTROLLED_POLICIES)}, got "
                             f"{policy!r}")
        if isinstance(score, str) and score not in SCORES:
            raise ValueError(f"score must be one of {', '.join(SCORES)}, got {score!r}")
        if not jobs or any(not nodes or len(set(nodes)) != len(nodes)
                           for nodes in jobs.values()):
            raise ValueError("every job needs its distinct nodes")
        self.jobs = {j: _Job(j, tuple(nodes)) for j, nodes in jobs.items()}
        self.policy = policy
        self.score: Score = SCORES[score] if isinstance(score, str) else score
        self.timeout, self.backoff, self.tries = timeout, backoff, tries
        self.slot_timeout, self.hold_limit = slot_timeout, hold_limit
        self.holder: str | None = None
        self.held_since = 0.0
        self.free_at: float | None = None   # held after an unclean round until then
        self.busy_seconds = 0.0
        self.queue: list[str] = []          # always-wait: jobs waiting, first come first
        self.strangers = 0                  # asks naming no job or node of ours

    # ---- events ---------------------------------------------------------------------------

    def ask(self, job: str, node: str, r: int, now: float) -> list[Answer]:
        """`node` of `job` is about to start round `r`."""
        j = self.jobs.get(job)
        if j is None or node not in j.nodes or r < 0:
            self.strangers += 1
            return []
        out = self._expire(now)
        if r in j.decisions:                            # decided: the same for everyone
            return out + [self._answer(j, node, r, j.decisions[r])]
        if j.run is not None and r > j.run.round:      # at the next round: done with this
            out += self._done(j, node, True, now)
        if j.phase is Phase.QUEUED:
            return out                                  # answered when granted
        if j.phase is Phase.COLLECTING and r != j.round:
            return out + self._abort(j, now, also=(node, r))     # they disagree
        if j.phase is Phase.IDLE:
            if j.decisions and r < next(reversed(j.decisions)):
                return out + [self._answer(j, node, r, False)]  # older than kept: forgotten
            if r != j.round:
                j.round, j.attempts = r, 0
            j.go("ask")
            j.deadline, j.asked = now + self.timeout, set()
        j.asked.add(node)
        if j.asked >= set(j.nodes):
            out += self._decide(j, now)
        return out

    def done(self, job: str, node: str, r: int, clean: bool, now: float) -> list[Answer]:
        """`node` finished round `r` (`clean`: every sum it asked the network for came)."""
        j = self.jobs.get(job)
        if j is None or node not in j.nodes:
            self.strangers += 1
            return []
        out = self._expire(now)
        if j.run is not None and r == j.run.round:
            out += self._done(j, node, clean, now)
        return out

    def _done(self, j: _Job, node: str, clean: bool, now: float) -> list[Answer]:
        assert j.run is not None
        j.run.done.add(node)
        j.run.clean &= clean
        return self._finish(j, now) if j.run.done >= set(j.nodes) else []

    def tick(self, now: float) -> list[Answer]:
        out = self._expire(now)
        for j in self.jobs.values():
            if j.phase is Phase.COLLECTING and j.deadline is not None and now >= j.deadline:
                out += self._abort(j, now)              # a node's ask did not come in time
        return out

    def next_wake(self) -> float | None:
        times = [j.deadline for j in self.jobs.values()
                 if j.phase is Phase.COLLECTING and j.deadline is not None]
        if self.free_at is not None:
            times.append(self.free_at)
        elif (limit := self._hold_limit()) is not None:
            times.append(limit)
        return min(times, default=None)

    def _hold_limit(self) -> float | None:
        """When the holder's round in progress is taken as never to finish."""
        run = self.jobs[self.holder].run if self.holder is not None else None
        return run.started + self.hold_limit if run is not None and run.aggregated else None

    # ---- inside ---------------------------------------------------------------------------

    def _answer(self, j: _Job, node: str, r: int, use: bool) -> Answer:
        return Answer(j.name, node, r, Verdict.AGGREGATE if use else Verdict.ORDINARY)

    def _decide(self, j: _Job, now: float) -> list[Answer]:
        others = [o for o in self.jobs.values() if o is not j]
        if self.policy == "always-wait":
            if self.holder not in (None, j.name):
                j.go("wait")
                j.stats.queued += 1
                self.queue.append(j.name)
                return []
            use = True
        else:
            use = decide(j.state(now), [o.state(now) for o in others], self.holder, now,
                         self.score)
        j.go("agreed")
        return self._run(j, use, now)

    def _run(self, j: _Job, use: bool, now: float) -> list[Answer]:
        out: list[Answer] = []
        if j.run is not None:                           # a node never finished it (gone)
            j.run.clean = False
            out = self._finish(j, now)
        j.record(j.round, use)
        j.run, j.deadline = _Run(j.round, now, use), None
        if j.last_start is not None:
            j.period.add(now - j.last_start, now)
        j.last_start = now
        j.stats.rounds += 1
        if use:
            j.stats.aggregated += 1
            j.last_granted = now
            if self.holder != j.name:
                self.holder, self.held_since = j.name, now
            self.free_at = None                         # held on: an earlier round's wait ends
        else:
            j.stats.ordinary += 1
        return out + [self._answer(j, n, j.round, use) for n in sorted(j.asked)]

    def _abort(self, j: _Job, now: float, also: tuple[str, int] | None = None) -> list[Answer]:
        """The job's nodes did not all ask for the same round in time: RETRY them all (and
        `also`, the one that disagreed); after `tries` aborts, the round goes the ordinary way."""
        j.stats.aborts += 1
        j.attempts += 1
        if j.attempts > self.tries:
            j.stats.gave_up += 1
            j.go("agreed")
            out = self._run(j, False, now)
            if also is not None:
                out.append(self._answer(j, also[0], also[1], False) if also[1] == j.round
                           else Answer(j.name, also[0], also[1], Verdict.RETRY, self.backoff))
            return out
        wait = self.backoff * 2 ** (j.attempts - 1)
        out = [Answer(j.name, n, j.round, Verdict.RETRY, wait) for n in sorted(j.asked)]
        if also is not None:
            out.append(Answer(j.name, also[0], also[1], Verdict.RETRY, wait))
        j.asked, j.deadline = set(), None
        j.go("abort")
        return out

    def _finish(self, j: _Job, now: float) -> list[Answer]:
        """Every node of `j` finished its round: measured; the aggregators freed."""
        run, j.run = j.run, None
        assert run is not None
        (j.round_s if run.aggregated else j.ordinary_s).add(now - run.started, now)
        if self.holder != j.name or not run.aggregated:
            return []
        if run.clean:
            return self._release(now)
        self.free_at = now + self.slot_timeout          # its slots may be held until then
        return []

    def _expire(self, now: float) -> list[Answer]:
        """Release a hold whose time is up (an unclean round's, or one never finished)."""
        if self.holder is None:
            return []
        if self.free_at is not None and now >= self.free_at:
            return self._release(now)
        limit = self._hold_limit()
        if limit is not None and now >= limit:
            self.jobs[self.holder].stats.released_late += 1
            return self._release(now)
        return []

    def _release(self, now: float) -> list[Answer]:
        self.busy_seconds += now - self.held_since
        self.holder, self.free_at = None, None
        while self.queue:                               # always-wait: the next in line
            j = self.jobs[self.queue.pop(0)]
            if j.phase is Phase.QUEUED:
                j.go("granted")
                return self._run(j, True, now)
        return []

    def status(self, now: float) -> dict:
        busy = self.busy_seconds + (now - self.held_since if self.holder else 0.0)
        return {"policy": self.policy, "holder": self.holder, "busy_seconds": round(busy, 3),
                "strangers": self.strangers,
                "jobs": {j.name: {**vars(j.stats), "phase": j.phase.value,
                                  "round_seconds": round(j.round_s.value, 4),
                                  "ordinary_seconds": round(j.ordinary_s.value, 4),
                                  "period": round(j.period.value, 4)}
                         for j in self.jobs.values()}}


class Asker:
    """A node asking for round `round`'s decision: each Interest lives `lifetime`, a RETRY is
    asked again after its backoff, and after `patience` without a decision the round goes the
    ordinary way ("unreachable"). `send()` says whether to express an ask now."""

    def __init__(self, round: int, now: float, lifetime: float = 0.5,
                 patience: float = 5.0) -> None:
        self.round = round
        self.started = now
        self.lifetime, self.patience = lifetime, patience
        self.until = now + patience
        self.next_send: float | None = now
        self.expressed = 0
        self.retries = 0
        self.decision: bool | None = None
        self.why = ""

    @property
    def finished(self) -> bool:
        return self.decision is not None

    def send(self, now: float) -> bool:
        """Whether an ask goes out now (then the caller expresses it, `lifetime`)."""
        if self.finished or self.next_send is None or now < self.next_send:
            return False
        self.expressed += 1
        self.next_send = None                   # until its answer, or its lifetime is over
        return True

    def on_answer(self, verdict: Verdict, retry_after: float, now: float) -> None:
        if self.finished:
            return
        if verdict is Verdict.RETRY:
            self.retries += 1
            self.next_send = now + retry_after
        else:
            self.decision, self.why = verdict is Verdict.AGGREGATE, verdict.value

    def on_timeout(self, now: float) -> None:
        """The ask's Interest timed out or was Nacked: ask again."""
        if not self.finished:
            self.next_send = now

    def next_wake(self) -> float | None:
        if self.finished:
            return None
        return self.until if self.next_send is None else min(self.next_send, self.until)

    def tick(self, now: float) -> None:
        if not self.finished and now >= self.until:
            self.decision, self.why = False, "unreachable"

    def wait(self, now: float) -> float:
        return now - self.started
