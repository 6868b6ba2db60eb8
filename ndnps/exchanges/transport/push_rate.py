"""The rate of a producer's pushes, sans-I/O.

A `*distribute*` push has no Interest to pace it: the producer sends a version's segments and
the persistent PIT entries multicast them, so nothing on the path slows it down but the queues
it fills.  On a bottleneck the queue overflows and the lost segments come back by probes (4 MB
pushed at 100 Mbit/s into a 1 MiB queue: 2,500-7,300 segments lost per run).  So the producer
paces its pushes (ndnps.client.pacer) at the rate this controller sets, from what its
consumers saw of each push:

* **Reports.**  With the gradient it computed on version v, a worker reports what v's push
  looked like where it arrived (``PushReport``): the segments and bytes that came by the push,
  how many of them carried an NDNLPv2 CongestionMark (a face on the path had a standing
  queue), how many of the version's segments it had to fetch instead (lost), and the time
  from the first pushed segment to the last.  bytes / span is the rate the path *delivered*
  the push at: the bottleneck's rate when the push was faster than it, the push's own when not.
* **Decrease.**  A report of marks for a version pushed at the current rate sets the rate to
  ``backoff`` x the slower of that rate and the delivered rate: one report lands the pacer
  just under the bottleneck (a delivered rate measures it; halving would not, and one sample
  per version is all there is) — but never below half the rate sent, as TCP's multiplicative
  decrease: the delivered rate is one consumer's, and one stalled for a moment reports a
  fraction of the path's.  A report of losses — more than ``LOSS_TOLERANCE`` of the
  version's segments — while the push arrived slower than it was sent (``LAGGING``: a queue
  overflowed somewhere unmarked — or the consumer itself fell behind, a process short of CPU
  reading its socket late, which its delivered rate cannot tell apart; losses at the pace sent
  are a lossy link's, which a slower push would not cure) cuts the same way.  Reports about
  pushes sent before the last decrease are ignored (they were too fast already: conservative
  adaptation, once per round as TCP).
* **Increase.**  A push whose reports were clean — no marks, no losses — which the pacer
  limited (it waited for tokens) and the path kept up with (delivered at ``LAGGING`` x its rate
  at least, for most of the consumers: else a queue absorbed it, and a faster push would only
  lengthen that queue; one consumer short of CPU is not the path) raises the rate by
  ``increase`` (x1.05: probing gently; a rate past the bottleneck costs one version of marks,
  and CoDel marks a standing queue long before it overflows) — or by ``recover`` (x1.25) while
  it is below the last rate pushed with no marks since (a loss cut it, not the path: back
  there in a few versions, as CUBIC returns to its last maximum).
* **Start.**  Before any report, the rate is ``initial`` when set; else the rate the producer
  served its consumers' Interests at while they fetched their content (Interest-paced, so
  at most what the path carries), ``backoff`` x its median over 100 ms bins; with neither
  (content too small to tell), unlimited until the first report.
* **Slow branches.**  One push reaches every consumer, so its rate is one rate: the slowest
  branch's delivered rate sets it.  In sync SGD every version waits for the slowest consumer
  anyway, so pacing to it costs the others nothing, and it is not flooded; ``floor`` bounds
  how far a pathological branch can pull everyone down (below it that branch repairs by
  probes, as before).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from .buffers import Recent

BIN = 0.1              # s: the content-serving rate is measured over bins this long
MIN_BINS = 3           # ... and trusted from this many full bins on
LAGGING = 0.9          # delivered below this x the push's rate: the path could not keep up
# losses up to this share of a version's segments are no congestion signal: a consumer that
# fell behind for a moment (short of CPU) loses a few, repaired by its probes for far less
# than a slower push would cost every version (BBR likewise tolerates ~2 % loss)
LOSS_TOLERANCE = 0.02
KEEP_VERSIONS = 64     # versions whose push rate is remembered (reports about older are late)


@dataclass(frozen=True)
class PushReport:
    """What one consumer saw of one version's push."""
    version: int
    segments: int          # segments that came by the push
    nbytes: int            # their bytes
    marked: int            # of them, carrying a CongestionMark
    missing: int           # segments of the version that did not come by the push
    span: float            # s, first pushed segment to last

    def delivered(self) -> float | None:
        """Bytes per second the path delivered the push at (None: too few segments to say)."""
        if self.segments < 2 or self.span <= 0:
            return None
        # span runs from the first segment's arrival to the last's: segments - 1 intervals
        return self.nbytes * (self.segments - 1) / self.segments / self.span

    def to_wire(self) -> dict:
        return {"v": self.version, "n": self.segments, "b": self.nbytes, "m": self.marked,
                "x": self.missing, "s": self.span}

    @classmethod
    def from_wire(cls, d: object) -> "PushReport | None":
        """The report in a gradient's header; None when absent or malformed (ignored)."""
        if not isinstance(d, dict):
            return None
        try:
            r = cls(int(d["v"]), int(d["n"]), int(d["b"]), int(d["m"]), int(d["x"]),
                    float(d["s"]))
        except (KeyError, TypeError, ValueError):
            return None
        if min(r.version, r.segments, r.nbytes, r.marked, r.missing) < 0 or not r.span >= 0:
            return None
        return r


@dataclass
class PushRateCounters:
    reports: int = 0
    congested_reports: int = 0
    decreases: int = 0
    increases: int = 0
    ignored: int = 0           # about a version pushed before the last decrease, or unknown


class PushRate:
    """`rate` (bytes per second; 0 = unlimited) for the next push.  Call `pushing(version,
    limited_before)` as each push starts, `on_report` for each consumer's report, and
    `on_served(now, nbytes)` for each content Data served (the starting estimate)."""

    def __init__(self, initial_mbps: float = 0.0, floor_mbps: float = 1.0,
                 ceiling_mbps: float = 0.0, backoff: float = 0.9, increase: float = 1.05,
                 recover: float = 1.25) -> None:
        if not 0 < backoff < 1 or increase < 1 or recover < increase:
            raise ValueError("need 0 < backoff < 1 and 1 <= increase <= recover")
        if initial_mbps < 0 or floor_mbps <= 0 or ceiling_mbps < 0:
            raise ValueError("need initial_mbps >= 0, floor_mbps > 0, ceiling_mbps >= 0")
        self.floor = floor_mbps * 1e6 / 8
        self.ceiling = ceiling_mbps * 1e6 / 8          # 0: none
        self.backoff, self.increase, self.recover = backoff, increase, recover
        self.rate = self._clamp(initial_mbps * 1e6 / 8) if initial_mbps else 0.0
        self.fixed_start = bool(initial_mbps)
        self.counters = PushRateCounters()
        self._pushed: Recent[int, float] = Recent(KEEP_VERSIONS)     # version -> its rate
        self._clean: dict[int, int] = {}              # version -> clean reports
        self._lagging: dict[int, int] = {}            # version -> of them, lagging ones
        self._congested: set[int] = set()             # versions with a congested report
        self._good = 0.0                               # the last clean rate, no marks since
        self._cut_after = -1                           # versions up to this: before the cut
        self._bins: dict[int, int] = {}                # content served: bin -> bytes
        self._reported = False

    def _clamp(self, rate: float) -> float:
        rate = max(self.floor, rate)
        return min(self.ceiling, rate) if self.ceiling else rate

    # ---- the starting estimate --------------------------------------------------------------

    def on_served(self, now: float, nbytes: int) -> None:
        """A content Data of `nbytes` was served at `now` (before the first report only)."""
        if self._reported or self.fixed_start:
            return
        b = int(now / BIN)
        self._bins[b] = self._bins.get(b, 0) + nbytes
        if len(self._bins) > 4 * 600:                  # bounded: the last few minutes
            self._bins.pop(min(self._bins))

    def served_rate(self) -> float | None:
        """The median of the full bins of content serving, bytes per second (None: too few
        bins).  Not the fastest: the first bin holds every consumer's whole first window at
        once, whatever the path carries."""
        if len(self._bins) < MIN_BINS + 2:
            return None
        full = sorted(self._bins)[1:-1]                # the first burst; the bin still filling
        return statistics.median(self._bins[b] for b in full) / BIN

    # ---- pushes and reports -----------------------------------------------------------------

    def pushing(self, version: int, limited: bool) -> float:
        """Version `version` is about to be pushed; `limited`: the pacer waited for tokens
        during the previous push (it, not the producer, set that push's pace).  Returns the
        rate to push it at (bytes per second, 0 = unlimited)."""
        if not self._reported and not self.fixed_start:
            est = self.served_rate()
            if est is not None:
                self.rate = self._clamp(self.backoff * est)
        prev = max(self._pushed.keys(), default=None)
        clean = self._clean.get(prev, 0) if prev is not None else 0
        if (prev is not None and limited and self.rate and prev > self._cut_after
                and clean and prev not in self._congested
                and 2 * self._lagging.get(prev, 0) < clean):
            self._good = max(self._good, self._pushed.get(prev) or 0.0)
            if self.rate < self._good:
                self.rate = self._clamp(min(self._good, self.rate * self.recover))
            else:
                self.rate = self._clamp(self.rate * self.increase)
            self.counters.increases += 1
        self._pushed.put(version, self.rate)
        for v in [v for v in self._clean if self._pushed.get(v) is None]:
            del self._clean[v]
            self._lagging.pop(v, None)
        self._congested &= set(self._pushed.keys())
        return self.rate

    def on_report(self, report: PushReport) -> None:
        self.counters.reports += 1
        pushed_at = self._pushed.get(report.version)
        if pushed_at is None:
            self.counters.ignored += 1
            return
        self._reported = True
        sent = pushed_at or float("inf")
        delivered = report.delivered()
        lagging = delivered is not None and delivered < LAGGING * sent
        lost = report.missing > LOSS_TOLERANCE * (report.segments + report.missing)
        if not (report.marked or (lost and lagging)):
            self._clean[report.version] = self._clean.get(report.version, 0) + 1
            if lagging:                                # no cut; most lagging: no increase
                self._lagging[report.version] = self._lagging.get(report.version, 0) + 1
            return
        self.counters.congested_reports += 1
        self._congested.add(report.version)
        if report.version <= self._cut_after:
            self.counters.ignored += 1
            return
        base = min(sent, delivered) if delivered is not None else sent
        if base == float("inf"):
            return                                    # unlimited and unmeasured: nothing to go on
        # at most halved a round, as TCP's multiplicative decrease: the delivered rate is one
        # consumer's, and one stalled for a moment (a process descheduled mid-push on a busy
        # host) reports a fraction of the path's rate (seen: 69 -> 29 -> 14 Mbit/s in two
        # versions at 100 Mbit/s, every later push twice as long)
        half = 0.5 * sent if sent != float("inf") else 0.0
        self.rate = self._clamp(max(self.backoff * base, half))
        if report.marked:
            self._good = 0.0                           # the path itself said: too fast
        self.counters.decreases += 1
        # every push sent so far went at the old rate: their reports say nothing new
        self._cut_after = max(self._pushed.keys())


class _Seen:
    __slots__ = ("segments", "nbytes", "marked", "first", "last", "final")

    def __init__(self, now: float) -> None:
        self.final: int | None = None       # the version's last segment, once one said so
        self.segments: set[int] = set()
        self.nbytes = 0
        self.marked = 0
        self.first = self.last = now


class PushMeter:
    """A consumer's side: what arrived of each version's push (the last `keep` versions), for
    the report it sends with its next gradient."""

    def __init__(self, keep: int = 8) -> None:
        self._seen: Recent[int, _Seen] = Recent(keep)

    def on_pushed(self, now: float, version: int, segment: int, nbytes: int,
                  marked: bool, final: int | None = None) -> None:
        seen = self._seen.get(version)
        if seen is None:
            seen = _Seen(now)
            self._seen.put(version, seen)
        if final is not None:
            seen.final = final
        if segment in seen.segments:
            return                                  # a duplicate says nothing of the pace
        seen.segments.add(segment)
        seen.nbytes += nbytes
        seen.marked += bool(marked)
        seen.last = now

    def report(self, version: int) -> PushReport | None:
        """The report on `version`'s push (None: none of it came by the push — a late joiner,
        a unicast push — or no segment said how many there are)."""
        seen = self._seen.get(version)
        if seen is None or seen.final is None:
            return None
        got = len(seen.segments)
        return PushReport(version, got, seen.nbytes, seen.marked, max(0, seen.final + 1 - got),
                          seen.last - seen.first)
