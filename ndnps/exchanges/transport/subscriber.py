"""The subscriber's side of pushed versions, sans-I/O: segments of versions pushed by any
producer are assembled (keyed by producer and version), and losses are found three ways,
each with its own timer:

* a **hole** below the highest segment seen (one path delivers in order): fetched once the
  reordering window has passed (`gap_delay` at least);
* a **quiet tail**: a push that stops short of its FinalBlockId lost its last segments, taken
  as lost once nothing came for a few gaps between its segments (`tail_wait`) — and for
  longer than the producer has been seen to pause mid-push and go on: a producer on a busy
  host stalls tens of ms (descheduled, or serving something else), and a tail fetched then
  duplicates the rest of a push still on its way, which congests the very path it shares;
* the **probe timer**: armed when the subscriber asks for the next version (the worker sends
  its gradient), it fires when that version is overdue (mean + k * deviation of the past
  waits, RFC 6298's estimator, backed off but capped by a few round trips of the path), and
  takes a sample only when it did not fire (Karn's rule).

The subscriber decides; its owner does the I/O.  Every event takes `now` (seconds, any
monotonic clock) and returns actions: `Fetch` segments by ordinary Interests, `Probe` a
version of which nothing is known (its segment 0 alone: a push merely late satisfies the
Interest), `Complete` (the version's blob), `Corrupt` (its segments disagree: dropped).
`next_timer()` says when to call `on_timer(now)`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from ndnps.ndn.rto import RtoEstimator

from .buffers import Assembly, Recent
from .path import PathEstimates

KEEP_VERSIONS = 4           # versions being assembled at once, per subscriber (bounded)
SMOOTHING = 0.125           # of the gap between a push's segments (RFC 6298's alpha)
PAUSES_KEPT = 8             # pushes whose longest mid-push pause the tail wait remembers
PAUSE_MARGIN = 1.5          # a tail waits this x the longest pause a push went on after
IN_PUSH = 1.0               # s: segments of one push closer than this are one push's


@dataclass(frozen=True)
class Fetch:
    """Fetch `segments` of a version by ordinary Interests; `whole`: and every other segment
    the first Data's FinalBlockId says exists.  `why`: gap, tail, timer or collect."""
    producer: str
    version: int
    segments: tuple[int, ...]
    why: str
    whole: bool = False


@dataclass(frozen=True)
class Probe:
    """Nothing of `version` is known: ask for its segment 0 alone, living `lifetime`."""
    producer: str
    version: int
    lifetime: float


@dataclass(frozen=True)
class Complete:
    producer: str
    version: int
    blob: bytes


@dataclass(frozen=True)
class Corrupt:
    producer: str
    version: int


Action = Union[Fetch, Probe, Complete, Corrupt]
Key = tuple[str, int]                       # (producer, version)


@dataclass
class SubscriberCounters:
    probes: int = 0                  # probe timer expiries (not while a push was arriving)
    gap_fetches: int = 0             # fetches started by a gap in a push
    tail_fetches: int = 0            # fetches started by a push that went quiet short of its end


class ProbeTimer:
    """Armed when the next version is asked for; `satisfied(now)` when it is in.  Expired, it
    backs off and re-arms itself, waiting `cap` at most once it has fired (the version is
    overdue by then: a few round trips, not a doubled estimate).  Sans-I/O: `due` says when
    it expires, `expire(now)` is called then."""

    def __init__(self, estimator: RtoEstimator) -> None:
        self.estimator = estimator
        self.due: float | None = None
        self.armed_at: float | None = None
        self.fired = 0
        self._fired_since_arm = 0

    @property
    def armed(self) -> bool:
        return self.armed_at is not None

    def arm(self, now: float) -> None:
        self.armed_at, self._fired_since_arm = now, 0
        self.due = now + self.estimator.rto

    def satisfied(self, now: float) -> float | None:
        """The wait is over: sample it if the timer did not fire, disarm; the time waited."""
        if self.armed_at is None:
            return None
        waited = now - self.armed_at
        if self._fired_since_arm == 0:
            self.estimator.observe(waited)
        self.cancel()
        return waited

    def cancel(self) -> None:
        self.due = self.armed_at = None

    def expire(self, now: float, cap: float | None) -> None:
        """It fired at `now`: back off, re-arm for `interval(cap)`."""
        self.fired += 1
        self._fired_since_arm += 1
        self.estimator.backoff()
        self.due = now + self.interval(cap)

    def interval(self, cap: float | None) -> float:
        """How long the timer waits now (re-armed after an expiry: at most `cap`)."""
        rto = self.estimator.rto
        return rto if cap is None or not self._fired_since_arm else min(rto, cap)


class Subscriber:
    """Versions pushed by producers, assembled; the newest complete one per producer."""

    def __init__(self, path: PathEstimates, probe: RtoEstimator, *, gap_delay: float, tail_delay: float,
                 probe_min: float, probe_max: float, stall: float = 0.001,
                 keep: int = KEEP_VERSIONS) -> None:
        self.path = path
        self.stall = stall                      # a process may stall this long (no loss)
        self.counters = SubscriberCounters()
        self.gap_delay, self.tail_delay = gap_delay, tail_delay
        self.probe_min, self.probe_max = probe_min, probe_max
        self.timer = ProbeTimer(probe)
        self.newest: dict[str, int] = {}
        self.assemblies: Recent[Key, Assembly] = Recent(keep)
        self.gaps: dict[Key, float] = {}        # hole seen: fetch it at this instant
        self.tails: dict[Key, float] = {}       # quiet since: its tail is lost at this instant
        self.probing: set[Key] = set()          # a Probe under way (its owner says when done)
        self.expected: Key | None = None        # the version the probe timer waits for
        self.timer_producer: str | None = None  # whose next version the probe timer asks
        self.push_gap = 0.0                     # smoothed time between a push's segments
        self.pauses: Recent[Key, float] = Recent(PAUSES_KEPT)  # push -> its longest pause
        self.longest_pause = 0.0                # of those
        self.last_push: Key | None = None
        self.last_push_at = 0.0
        self.last_push_segment = -1

    def newest_of(self, producer: str) -> int:
        return self.newest.get(producer, -1)

    # ---- segments ------------------------------------------------------------------------

    def on_segment(self, now: float, producer: str, version: int, seg: int,
                   content: bytes | memoryview,
                   final: int | None, pushed: bool = False) -> list[Action]:
        """A segment of `version` came (pushed, or the answer to a fetch or probe)."""
        key = (producer, version)
        if pushed:
            gap = now - self.last_push_at
            if key == self.last_push and gap < IN_PUSH:
                # within one push: the gaps between versions (the training's step) made a tail
                # wait 8 of them, up to tail_delay, where a push's segments come 0.1 ms apart
                self.push_gap += SMOOTHING * (gap - self.push_gap)
                # the push went on after this pause: the next segment came, not a later one
                # (a gap with segments lost in it is a loss, which the tail wait must not learn)
                if seg == self.last_push_segment + 1 and gap > (self.pauses.get(key) or 0.0):
                    self.pauses.put(key, gap)
                    self.longest_pause = max(self.pauses.values())
            self.last_push, self.last_push_at, self.last_push_segment = key, now, seg
        if version <= self.newest_of(producer):
            return []
        asm = self.assemblies.get(key)
        if asm is None:
            asm = Assembly(key)
            self.assemblies.put(key, asm)
        asm.add(seg, content, final)
        if asm.corrupt:
            self.assemblies.pop(key)
            return [Corrupt(producer, version)]
        if asm.complete:
            self.assemblies.pop(key)
            for k in [k for k in self.tails if k[0] == producer and k[1] <= version]:
                del self.tails[k]
            return [Complete(producer, version, asm.blob())]
        if asm.has_gap and key not in self.gaps:
            self.gaps[key] = now + max(self.gap_delay, self.path.reorder_floor)
        self.tails[key] = now + self.tail_wait()
        return []

    def tail_wait(self) -> float:
        """How long a push may go quiet short of its end before its tail is taken as lost: 8
        gaps between its segments (a paced push), or 2 round trips of the path (a queue
        between) and the reordering window, or PAUSE_MARGIN x the longest pause the last
        pushes went on after (measured: how long this producer stalls without loss), at
        least a process's stall, at most tail_delay."""
        return min(self.tail_delay, max(8 * self.push_gap,
                                        2 * self.path.srtt() + self.path.reorder_floor,
                                        PAUSE_MARGIN * self.longest_pause, self.stall))

    def accepted(self, now: float, producer: str, version: int) -> float | None:
        """The owner decoded `version` (a Complete): older versions of the producer are
        forgotten.  Returns the probe timer's wait, if it was waiting for this version or an
        older one (the sample of "asked -> received")."""
        self.newest[producer] = version
        self.drop(producer, up_to=version)
        if self.expected is not None and self.expected[0] == producer and \
                version >= self.expected[1]:
            return self.timer.satisfied(now)
        return None

    def restart(self, producer: str, version: int) -> None:
        """The producer says it is at `version` (a resync, maybe back in time): what is being
        assembled of it is forgotten."""
        self.newest[producer] = version
        self.drop(producer)

    def drop(self, producer: str, up_to: int | None = None) -> None:
        for table in (self.gaps, self.tails):
            for k in [k for k in table if k[0] == producer and (up_to is None or k[1] <= up_to)]:
                del table[k]
        for k in self.assemblies.keys():
            if k[0] == producer and (up_to is None or k[1] < up_to):
                self.assemblies.pop(k)

    # ---- asking for versions -----------------------------------------------------------------

    def sent(self, now: float, producer: str) -> None:
        """The producer's next version was asked for (the worker's gradient went out): the
        probe timer starts."""
        self.timer_producer = producer
        self.timer.arm(now)

    def expect(self, now: float, producer: str, version: int) -> None:
        """The owner waits for `version` (the timer starts unless it runs already)."""
        self.expected = (producer, version)
        self.timer_producer = producer
        if not self.timer.armed:
            self.timer.arm(now)

    def stop_expecting(self, cancel: bool) -> None:
        self.expected = None
        if cancel:
            self.timer.cancel()

    def want(self, producer: str, version: int, why: str) -> list[Action]:
        """`version` is due and (partly) missing: what to fetch of it.  A collect for it says
        the producer has pushed all of it (the PS pushes, then collects): fetched as any
        object, from segment 0 on."""
        if version <= self.newest_of(producer):
            return []
        key = (producer, version)
        asm = self.assemblies.get(key)
        if asm is not None and asm.final is not None:
            return [Fetch(producer, version, tuple(asm.missing()), why)]
        if why == "collect":
            return [Fetch(producer, version, (0,), why, whole=True)]
        if key in self.probing:
            return []
        self.probing.add(key)
        # no longer than the timer's next expiry: a probe still pending blocks the next
        return [Probe(producer, version, self.timer.interval(self.cap()))]

    def probe_done(self, producer: str, version: int) -> None:
        self.probing.discard((producer, version))

    def cap(self) -> float:
        # once overdue the timer probes every few round trips of the path (probe_min at
        # least: it is the last resort, after holes, quiet tails and collects)
        return max(self.probe_min, self.path.bounded(self.probe_max))

    # ---- timers --------------------------------------------------------------------------------

    def next_timer(self) -> float | None:
        """When `on_timer` is next due (None: nothing pending)."""
        due = [t for t in (self.timer.due,) if t is not None]
        if self.gaps:
            due.append(min(self.gaps.values()))
        if self.tails:
            due.append(min(self.tails.values()))
        return min(due) if due else None

    def on_timer(self, now: float) -> list[Action]:
        actions: list[Action] = []
        for key in [k for k, at in self.gaps.items() if at <= now]:
            del self.gaps[key]
            asm = self.assemblies.get(key)
            if asm is not None and key[1] > self.newest_of(key[0]) and asm.has_gap:
                self.counters.gap_fetches += 1
                actions.append(Fetch(key[0], key[1], tuple(asm.holes()), "gap"))
        for key in [k for k, at in self.tails.items() if at <= now]:
            del self.tails[key]
            asm = self.assemblies.get(key)
            if asm is not None and key[1] > self.newest_of(key[0]) and \
                    asm.final is not None and not asm.complete:
                self.counters.tail_fetches += 1
                actions.append(Fetch(key[0], key[1], tuple(asm.missing()), "tail"))
        if self.timer.due is not None and self.timer.due <= now:
            self.timer.expire(now, self.cap())
            actions += self.on_probe_timer(now)
        return actions

    def on_probe_timer(self, now: float) -> list[Action]:
        if now - self.last_push_at < self.probe_min or self.timer_producer is None:
            return []               # a push is still arriving: not lost (yet); backed off
        self.counters.probes += 1
        producer = self.timer_producer
        version = self.expected[1] if self.expected else self.newest_of(producer) + 1
        return self.want(producer, version, "timer")
