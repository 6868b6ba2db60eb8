"""The workers of a training, sans-I/O: who is in it, in which state, and when each lost one
is next offered the task again or given up on; one explicit transition table (h11's
_state.py style): an event a state has no row for raises ``MembershipError``.

    state      event             next       why
    LIVE       LOSE              LOST       silent for worker_timeout (or a checkpoint's worker
                                            that did not take the resumed training)
    LOST       OFFER             OFFERED    its next offer is due: the task is sent again
    OFFERED    DECLINE           LOST       declined, or no answer: offered again later
    OFFERED    ACCEPT            REJOINING  a restarted worker took it: it fetches its content
    OFFERED    ALREADY_ASSIGNED  LIVE       it still runs the job (cut off, not killed)
    REJOINING  FETCHED           LIVE       its content (current parameters, version) fetched
    REJOINING  NOT_FETCHED       LOST       accepted but never fetched: offered again later
    LOST       GIVE_UP           GONE       rejoin_timeout over (at once without rejoin)

The first offer comes rejoin_interval x 2^(losses-1) after the loss (60 s at most): a worker
that answers tasks but not collects cannot make every version wait for it; later ones
rejoin_interval after the previous failed.  A worker back has a new estimator (a new process:
no history).  The quorum: at least min_workers LIVE; a training short of it waits a grace of
min(max(10 s, 4 x rejoin_interval), rejoin_timeout) for lost workers to come back (one cut
off answers the re-offer within an interval or two).

The owner does the I/O: it sends the offers ``on_timer`` asks for, reports the answers, and
sleeps until ``wake_at``.  Every event takes `now` (seconds, any monotonic clock).

The worker's side: ``follow`` decides what a worker does when a PS offers it the task again
(it lost the worker, or it was restarted from a checkpoint): take the PS's version, go back
to it, or keep its own.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

from .collector import FinishTimeEstimator

MAX_FIRST_OFFER = 60.0      # s: the longest wait, after a loss, before the first re-offer
MIN_GRACE = 10.0            # s: a quorum's grace, at least (rejoin_timeout permitting)


class State(enum.Enum):
    LIVE = "live"
    LOST = "lost"
    OFFERED = "offered"
    REJOINING = "rejoining"
    GONE = "gone"


class Event(enum.Enum):
    LOSE = "lose"
    OFFER = "offer"
    DECLINE = "decline"
    ACCEPT = "accept"
    ALREADY_ASSIGNED = "already assigned"
    FETCHED = "fetched"
    NOT_FETCHED = "not fetched"
    GIVE_UP = "give up"


TRANSITIONS: dict[tuple[State, Event], State] = {
    (State.LIVE, Event.LOSE): State.LOST,
    (State.LOST, Event.OFFER): State.OFFERED,
    (State.OFFERED, Event.DECLINE): State.LOST,
    (State.OFFERED, Event.ACCEPT): State.REJOINING,
    (State.OFFERED, Event.ALREADY_ASSIGNED): State.LIVE,
    (State.REJOINING, Event.FETCHED): State.LIVE,
    (State.REJOINING, Event.NOT_FETCHED): State.LOST,
    (State.LOST, Event.GIVE_UP): State.GONE,
}

# lost, but it may yet come back (its task is being re-offered)
MAY_COME_BACK = frozenset({State.LOST, State.OFFERED, State.REJOINING})


class MembershipError(Exception):
    """An event the worker's state has no transition for (a bug in the owner)."""


@dataclass
class Member:
    gpu: str
    index: int                          # its place: shards, and the order gradients are summed
    state: State = State.LIVE
    estimator: FinishTimeEstimator = field(default_factory=FinishTimeEstimator)
    steps_done: int = 0                 # async: the steps collected from it
    last_segment: int | None = None     # of its last gradient: ask that many at once
    losses: int = 0
    lost_at: int | None = None          # the version at which it was last lost
    give_up_at: float | None = None     # lost: given up on then, unless back
    next_offer_at: float | None = None  # lost: the task is offered again then
    fetch_by: float | None = None       # rejoining: its content fetched by then, or offered again


class Membership:
    def __init__(self, *, min_workers: int, rejoin_interval: float, rejoin_timeout: float,
                 fetch_patience: float) -> None:
        """`fetch_patience`: how long a worker that accepted again has to fetch its content."""
        self.min_workers = min_workers
        self.rejoin_interval = rejoin_interval
        self.rejoin_timeout = rejoin_timeout
        self.fetch_patience = fetch_patience
        self.members: list[Member] = []

    # ---- who ------------------------------------------------------------------------------

    def admit(self, gpus: list[str], steps: dict[str, int] | None = None) -> list[Member]:
        """The training's workers, LIVE, indexed in this order; `steps`: each one's steps
        done (a resumed async training)."""
        steps = steps or {}
        self.members = [Member(g, i, steps_done=steps.get(g, 0)) for i, g in enumerate(gpus)]
        return self.members

    def get(self, gpu: str) -> Member | None:
        return next((m for m in self.members if m.gpu == gpu), None)

    @property
    def live(self) -> list[Member]:
        return [m for m in self.members if m.state is State.LIVE]

    @staticmethod
    def may_come_back(m: Member) -> bool:
        return m.state in MAY_COME_BACK

    # ---- transitions ------------------------------------------------------------------------

    def _fire(self, m: Member, event: Event) -> None:
        try:
            m.state = TRANSITIONS[(m.state, event)]
        except KeyError:
            raise MembershipError(f"worker {m.gpu}: no transition for {event.value!r} in state "
                                  f"{m.state.name}") from None

    def lose(self, m: Member, now: float, version: int, rejoin: bool = True) -> bool:
        """m fell silent at `version`.  It is offered the task again (True) if rejoin_timeout
        > 0 and `rejoin` (the training is not over); else it is GONE at once (False)."""
        self._fire(m, Event.LOSE)
        m.losses += 1
        m.lost_at = version
        m.give_up_at = now + self.rejoin_timeout
        m.next_offer_at = now + min(self.rejoin_interval * 2 ** (m.losses - 1), MAX_FIRST_OFFER)
        if rejoin and self.rejoin_timeout > 0:
            return True
        self._fire(m, Event.GIVE_UP)
        return False

    def declined(self, m: Member, now: float) -> None:
        self._fire(m, Event.DECLINE)
        m.next_offer_at = now + self.rejoin_interval

    def accepted(self, m: Member, now: float) -> None:
        self._fire(m, Event.ACCEPT)
        m.fetch_by = now + self.fetch_patience

    def already_assigned(self, m: Member) -> None:
        self._fire(m, Event.ALREADY_ASSIGNED)
        self._back(m)

    def fetched(self, m: Member) -> None:
        self._fire(m, Event.FETCHED)
        self._back(m)

    def _back(self, m: Member) -> None:
        m.estimator = FinishTimeEstimator()         # a new process (or a new path): no history
        m.give_up_at = m.next_offer_at = m.fetch_by = None

    # ---- timers -----------------------------------------------------------------------------

    def wake_at(self, m: Member) -> float | None:
        """When the owner next calls on_timer(m): its next offer (lost), the end of its
        content fetch's patience (rejoining); None: nothing is due (live, offered, gone)."""
        if m.state is State.LOST:
            return m.next_offer_at
        if m.state is State.REJOINING:
            return m.fetch_by
        return None

    def on_timer(self, m: Member, now: float) -> Event | None:
        """What is due for m at `now`, done: OFFER (send the task; report the answer with
        declined/accepted/already_assigned), GIVE_UP (rejoin_timeout is over), NOT_FETCHED
        (it is LOST again, offered later); None: nothing yet."""
        due = self.wake_at(m)
        if due is None or now < due:
            return None
        if m.state is State.REJOINING:
            self._fire(m, Event.NOT_FETCHED)
            m.next_offer_at = now + self.rejoin_interval
            return Event.NOT_FETCHED
        assert m.give_up_at is not None
        event = Event.GIVE_UP if now >= m.give_up_at else Event.OFFER
        self._fire(m, event)
        return event

    # ---- the quorum -------------------------------------------------------------------------

    def has_quorum(self) -> bool:
        return len(self.live) >= self.min_workers

    @property
    def grace(self) -> float:
        """How long a training short of its quorum waits for lost workers to come back."""
        return min(max(MIN_GRACE, 4 * self.rejoin_interval), self.rejoin_timeout)

    def quorum_deadline(self, now: float) -> float:
        """Short of the quorum at `now`: the training fails unless it is met by then."""
        return now + self.grace


# ---- the worker's side: following a PS that re-offers the task ---------------------------------

@dataclass(frozen=True)
class Resync:
    """What a worker does with the content of a PS that offered its task again."""
    adopt: bool                 # take the content's version and parameters
    rewind_to: int | None       # steps from this one on are computed (and collected) again
    ps_restarts: int            # the PS incarnation followed from now on


def follow(*, mode: str, newest: int, newest_at: float, asked: float, step: int,
           ps_restarts: int, version: int, restarts: int, content_step: int) -> Resync:
    """The PS re-offered our task (it lost us and took us back, or it was restarted from a
    checkpoint) and its content says it is at `version`, restart `restarts`, our next step
    `content_step`; we hold `newest` (received at `newest_at`), compute `step`, and asked for
    the content at `asked`.  We go on from the PS's version, back in time after a restart
    (the versions after its checkpoint are redone; a gradient of step s is always computed on
    version s, so the redone ones are the same)."""
    if version < newest and newest_at > asked:
        # the PS pushed us a newer version after it offered the task: the content, made when
        # we accepted, is stale (a fast training moves on while the fetch goes on; rolled
        # back, we dropped gradients the PS was collecting and it dropped us)
        return Resync(False, None, restarts)
    # async, a resumed PS: the steps after its checkpoint are computed again
    rewind = content_step if mode == "async" and content_step < step \
        and restarts != ps_restarts else None
    if version == newest or (restarts == ps_restarts and version < newest):
        # the same version; or the same PS, its content made before its last push: we are
        # ahead
        return Resync(False, rewind, ps_restarts)
    return Resync(True, version if mode == "sync" else rewind, restarts)
