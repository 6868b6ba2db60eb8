"""Time-division sharing of a forwarder's aggregators among jobs (docs/sharing.md), sans-I/O: the
decision a share controller makes when a job's round is about to start.
(ndnps.exchanges.sharing.agreement applies it once every node of the job has asked for the round;
ndnps.apps.controller is its process.)

The rule (s1–s3 below, as docs/sharing.md numbers them), for job J's round about to start at `now`:

1. another job holds the aggregators now → J runs its round the ordinary way;
2. else, no other job's round is expected to start while J's runs (each job's next start is
   its last start plus its measured step period, give or take twice the period's deviation;
   J's round lasts its measured round time; a round expected already but not started yet —
   late by less than its period — is about to arrive) → J uses them;
3. else J and the jobs whose rounds are expected meanwhile are scored (`Score`); J uses the
   aggregators only if its score is the highest (ties go to J, whose round is here now).

A round that does not get the aggregators never waits for them: it runs the ordinary way at once.

`Score` is pluggable; two ship. `time_saved` — the seconds a round saves by being aggregated
in the network (its measured ordinary round time minus its aggregated one) per second it holds
the aggregators: the aggregators are the scarce thing, and a job's completion time is what a
saved second shortens. An ageing term that grows with the time since the job last had them (in
its own periods) is added, so that no job starves — not even one measured once as gaining
nothing. A job not yet measured
aggregated scores highest (it is measured once); not yet measured the ordinary way, its saving
is taken as one second per second. `shortest_round` — the round that frees the aggregators
soonest goes first (SRPT), with the same ageing.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from ndnps.protocol.sharing import SHORTEST_ROUND, TIME_SAVED


@dataclass(frozen=True)
class JobState:
    """What the controller has measured of one job."""
    job: str
    round_seconds: float            # an aggregated round's duration (0: not measured yet)
    period: float                   # between the starts of its rounds (0: not measured yet)
    last_start: float | None        # when its last round started (None: none yet)
    ordinary_seconds: float = 0.0   # a round's duration the ordinary way (0: not measured)
    last_granted: float | None = None   # when it last had the aggregators (None: never)
    period_dev: float = 0.0         # how much its period varies (mean deviation)

    def next_start(self) -> float | None:
        """When its next round is expected to start (None: nothing measured yet)."""
        if self.last_start is None or self.period <= 0:
            return None
        return self.last_start + self.period

    def may_start(self, begin: float, end: float) -> bool:
        """Whether its next round may start within [begin, end): its expected start, give or
        take twice its period's deviation, falls there — or it is overdue at `begin`."""
        start = self.next_start()
        if start is None:
            return False
        margin = SPREAD * self.period_dev
        return start - margin < end and (start + margin >= begin or self.overdue(begin))

    def overdue(self, now: float) -> bool:
        """Its next round was expected before `now` and has not started: late by less than a
        period, it is about to (later than that, the job is taken as gone or paused)."""
        start = self.next_start()
        return start is not None and start < now < start + self.period

    def age(self, now: float) -> float:
        """Periods since it last had the aggregators (since its first round, if never)."""
        since = self.last_granted if self.last_granted is not None else self.last_start
        if since is None or self.period <= 0:
            return 0.0
        return max(0.0, (now - since) / self.period)


Score = Callable[[JobState, float], float]

AGEING = 0.2        # score gained per period without the aggregators
SPREAD = 2.0        # a round may start this many deviations of its period from the expected


UNMEASURED = 1e9     # a job never measured aggregated: it goes first, once


def time_saved(job: JobState, now: float) -> float:
    """Seconds saved per second of aggregator time, aged."""
    if job.round_seconds <= 0:
        return UNMEASURED
    saved = (job.ordinary_seconds - job.round_seconds if job.ordinary_seconds > 0
             else job.round_seconds)
    # ageing added, not multiplied: a job measured once as gaining nothing (a slow first
    # round) still gets the aggregators again after a while, and is measured again
    return max(saved, 0.0) / job.round_seconds + AGEING * job.age(now)


def shortest_round(job: JobState, now: float) -> float:
    """The round that frees the aggregators soonest, aged."""
    return (1.0 + AGEING * job.age(now)) / max(job.round_seconds, 1e-9)


def decide(job: JobState, others: Sequence[JobState], holder: str | None, now: float,
           score: Score = time_saved) -> bool:
    """Whether `job`'s round, starting at `now`, uses the aggregators. `holder`: the job
    holding them now (None: free); `others`: every other job sharing them."""
    if holder is not None and holder != job.job:
        return False                                        # s1
    ends = now + job.round_seconds                          # (unmeasured: nobody arrives)
    arriving = [o for o in others if o.job != job.job and o.may_start(now, ends)]
    if not arriving:
        return True                                         # s2
    mine = score(job, now)                                  # s3
    return all(mine >= score(o, now) for o in arriving)


# the scores by the names [share] gives them (ndnps.protocol.sharing.SCORE_NAMES)
SCORES: dict[str, Score] = {TIME_SAVED: time_saved, SHORTEST_ROUND: shortest_round}
