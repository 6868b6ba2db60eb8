"""Every node of a job deciding the same for the same round (issue 26; the `001_…` method's
claims 5–7), sans-I/O: the share controller's side (`Coordinator`) and a node's (`Participant`).
Messages are values; the I/O (NDN Interests and Data with per-node names, freshness zero) is the
caller's. Both sides take events and a `now` and return what to send; `next_wake()` says when to
call `tick(now)`.

When the shared state changes (a new holder of the aggregators, a new order of use), the
coordinator sends PREPARE to every node of the jobs concerned; a node takes its local lock and
answers LOCKED with the round number it is at. When every node has answered and, within each
job, all report the same round, the coordinator sends UPDATE (the new state, for the round
after that one); each node applies it, releases its lock and answers APPLIED. If a job's nodes
disagree, or an answer does not come within `timeout`, the coordinator sends ABORT to the nodes
it locked and tries again after `backoff` (doubling), `tries` times at most, then gives up
(FAILED: the jobs go on the ordinary way). A node whose lock is not followed by UPDATE or ABORT
within `lock_timeout` (a dead controller) releases it by itself.

The coordinator's states, one table (h11's style):

    any        --start-->             PREPARING (a newer state replaces one under way)
    PREPARING  --all locked, agree--> UPDATING
    PREPARING  --disagree/timeout-->  BACKOFF   (ABORT sent)   or FAILED after `tries`
    UPDATING   --all applied-->       IDLE      (done)
    UPDATING   --timeout-->           BACKOFF   (ABORT sent)   or FAILED after `tries`
    BACKOFF    --backoff over-->      PREPARING
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class Kind(Enum):
    PREPARE = "prepare"
    LOCKED = "locked"
    UPDATE = "update"
    APPLIED = "applied"
    ABORT = "abort"


@dataclass(frozen=True)
class Message:
    kind: Kind
    seq: int                        # the attempt it belongs to
    round: int | None = None        # LOCKED: the node's round; UPDATE: the round it applies from
    state: Any = None               # UPDATE: the new shared state


@dataclass(frozen=True)
class Send:
    node: str
    message: Message


class Phase(Enum):
    IDLE = "idle"
    PREPARING = "preparing"
    UPDATING = "updating"
    BACKOFF = "backoff"
    FAILED = "failed"


_NEXT = {                          # (phase, event) -> phase; anything else is ignored
    (Phase.PREPARING, "agreed"): Phase.UPDATING,
    (Phase.PREPARING, "abort"): Phase.BACKOFF,
    (Phase.UPDATING, "applied"): Phase.IDLE,
    (Phase.UPDATING, "abort"): Phase.BACKOFF,
    (Phase.BACKOFF, "retry"): Phase.PREPARING,
    (Phase.BACKOFF, "give up"): Phase.FAILED,
}


@dataclass
class Coordinator:
    """`jobs`: each job's nodes (names)."""
    jobs: dict[str, list[str]]
    timeout: float = 1.0
    backoff: float = 0.2
    tries: int = 5
    phase: Phase = Phase.IDLE
    seq: int = 0
    attempts: int = 0
    aborts: int = 0
    _state: Any = None
    _rounds: dict[str, int] = field(default_factory=dict)
    _applied: set[str] = field(default_factory=set)
    _deadline: float | None = None

    def _go(self, event: str) -> None:
        self.phase = _NEXT[(self.phase, event)]

    @property
    def nodes(self) -> list[str]:
        return [n for ns in self.jobs.values() for n in ns]

    def start(self, state: Any, now: float) -> list[Send]:
        """Agree on `state` (again, if an agreement is under way: the newer state wins)."""
        self._state, self.attempts = state, 0
        self.phase = Phase.PREPARING                    # from any phase: a fresh attempt
        return self._prepare(now)

    def _prepare(self, now: float) -> list[Send]:
        self.seq += 1
        self.attempts += 1
        self._rounds.clear()
        self._applied.clear()
        self._deadline = now + self.timeout
        return [Send(n, Message(Kind.PREPARE, self.seq)) for n in self.nodes]

    def on_message(self, node: str, m: Message, now: float) -> list[Send]:
        if m.seq != self.seq or node not in self.nodes:
            return []                                   # an earlier attempt's, or a stranger
        if self.phase is Phase.PREPARING and m.kind is Kind.LOCKED and m.round is not None:
            self._rounds[node] = m.round
            if len(self._rounds) < len(self.nodes):
                return []
            agreed = {job: {self._rounds[n] for n in ns} for job, ns in self.jobs.items()}
            if any(len(rounds) != 1 for rounds in agreed.values()):
                return self._abort(now)
            self._go("agreed")
            self._deadline = now + self.timeout
            return [Send(n, Message(Kind.UPDATE, self.seq, next(iter(agreed[job])) + 1,
                                    self._state))
                    for job, ns in self.jobs.items() for n in ns]
        if self.phase is Phase.UPDATING and m.kind is Kind.APPLIED:
            self._applied.add(node)
            if len(self._applied) == len(self.nodes):
                self._go("applied")
                self._deadline = None
        return []

    def _abort(self, now: float) -> list[Send]:
        self.aborts += 1
        sends = [Send(n, Message(Kind.ABORT, self.seq)) for n in self.nodes]
        self._go("abort")
        if self.attempts >= self.tries:
            self._go("give up")
            self._deadline = None
        else:
            self._deadline = now + self.backoff * 2 ** (self.attempts - 1)
        return sends

    def next_wake(self) -> float | None:
        return self._deadline

    def tick(self, now: float) -> list[Send]:
        if self._deadline is None or now < self._deadline:
            return []
        if self.phase in (Phase.PREPARING, Phase.UPDATING):
            return self._abort(now)                     # an answer did not come
        if self.phase is Phase.BACKOFF:
            self._go("retry")
            return self._prepare(now)
        return []


@dataclass
class Participant:
    """A node of a job: `round` is the round it is at (the caller keeps it current)."""
    node: str
    lock_timeout: float = 3.0
    round: int = 0
    locked_seq: int | None = None
    state: Any = None               # the shared state applied last
    from_round: int | None = None   # ... from this round on
    expired_locks: int = 0
    _until: float | None = None

    @property
    def locked(self) -> bool:
        return self.locked_seq is not None

    def on_message(self, m: Message, now: float) -> Message | None:
        """The answer to send the coordinator, if any."""
        if m.kind is Kind.PREPARE:
            self.locked_seq, self._until = m.seq, now + self.lock_timeout
            return Message(Kind.LOCKED, m.seq, self.round)
        if m.kind is Kind.UPDATE and m.seq == self.locked_seq:
            self.state, self.from_round = m.state, m.round
            self._release()
            return Message(Kind.APPLIED, m.seq)
        if m.kind is Kind.ABORT and m.seq == self.locked_seq:
            self._release()
        return None

    def _release(self) -> None:
        self.locked_seq, self._until = None, None

    def next_wake(self) -> float | None:
        return self._until

    def tick(self, now: float) -> None:
        if self._until is not None and now >= self._until:     # the controller is gone
            self.expired_locks += 1
            self._release()
