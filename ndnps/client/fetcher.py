"""Windowed segment fetcher with loss recovery: content, gradients, probes and unicast
parameters all come through here.

python-ndn's own fetcher keeps one Interest in flight (DESIGN.md pitfall).  A ``Transfer``
keeps up to ``window`` Interests in flight for a set of segments that may grow (from the
FinalBlockId of the first Data, or as the caller finds more holes) and recovers losses the way
TCP does, per segment:

* **RACK** (RFC 8985): one path answered in order, so an Interest is lost once one due
  *after* it has been answered and a reordering window has passed.  "Due after" is send order,
  except that Interests a producer holds go out together, in segment order, the moment it is
  ready.  Most losses are repaired one round trip after the loss, not after a timer.
* **Tail loss probe**: the last Interests of a transfer have nothing due after them; once
  nothing is left to send, the last one, still unanswered 2 round trips (srtt or the latest,
  the longer) after it was sent or after the producer was seen to be ready, is re-expressed;
  its answer lets RACK judge the others.
* **Retransmission timeout** as the backstop: the Interest lifetime is the RTO of an
  RtoEstimator (RFC 6298, samples from first tries only: Karn), floored at MIN_RTO, and
  doubled per expiry *of that segment* only — one lost segment does not slow every other one,
  nor does a face that was down for a while — up to a bound from the measured round trip
  (``RtoEstimator.ceiling``: BACKOFF_RTTS smoothed round trips).  The same bound caps every
  other wait that grows with repeated failure: the lifetime of re-expressed held Interests,
  the spacing of early retransmissions, the pause after a Nack.

A re-expressed Interest has the same name, so a late answer to the original still satisfies it:
a spurious early retransmission costs one Interest, not a wait.  Early retransmissions are
spaced as a forwarder's retransmission suppression requires and bounded per segment
(``max_fast``); timeouts, Nacks and failed signature checks (refetched with MustBeFresh, so a
cache cannot serve the bad copy again) count toward ``max_tries``, after which the fetch fails
with FetchError: nothing waits for ever.  An Interest that never left or whose face went away
(``ndnapp.FaceDown``: a forwarder restart) is asked again with neither a backoff nor a try: an
outage is no news about the path.

*Held* Interests: a producer may hold an Interest until it has the Data (a gradient being
computed, a push not made yet).  Until the first Data of a transfer arrives, expiries of such
Interests are not loss and their round trips are no RTT samples; from then on the producer is
ready and every Interest is an ordinary one.

``express`` is ``NDNApp.express`` or anything with its signature and exceptions, returning an
awaitable (run in a Task) or a Future (``App.express_future``: no Task per Interest; one
cancelled by anything but the transfer was cancelled by the face's shutdown: FaceDown).
"""
from __future__ import annotations

import asyncio
import weakref
from collections import deque
from functools import partial
from dataclasses import dataclass
from typing import Awaitable, Callable, Iterable

from ndn.encoding import FormalName, Name
from ndn.types import (InterestCanceled, InterestNack, InterestTimeout, NetworkError,
                       ValidationFailure)

from ndnps.ndn.conventions import segment_number
from ndnps.ndn.rto import BACKOFF_RTTS, HALF_TICK, RtoEstimator
from ndnps.ndn.nfd import RETX_INITIAL, RETX_MAX

from .app import FaceDown

Express = Callable[..., Awaitable[tuple]]
NameOf = Callable[[int], FormalName]

# s: the RTO's floor, above the scheduling delays of a busy host (2 cores, 6 processes):
# RACK and the tail probe repair most losses well before it. At 0.2 s, what the RTO repaired
# (a retry lost again, a segment alone in flight) cost 0.2 s a time at 20 % loss
MIN_RTO = 0.01
REORDER_FLOOR = 0.002       # s: the smallest reordering window (scheduling jitter of a process)
# With NDNLPv2 link reliability on our face, or on the links of our path, a loss on a hop is
# repaired there a link round trip or so later (a later Ack, a tail probe, or the link's RTO):
# to the consumer it looks like reordering, so its window (and a worker's wait before fetching
# a hole in a push) covers that repair rather than racing it with an end-to-end retry.
LINK_REPAIR = 0.010
# A forwarder suppresses a re-expressed Interest that comes sooner than its suppression
# interval after the one it forwarded last for the same pending entry (NFD's
# RetxSuppressionExponential: 10 ms unless the strategy's parameters say otherwise, doubling
# with each retransmission it forwards, up to its maximum): re-expressing earlier would be
# wasted.  A fetcher waits that interval and this margin (the event loop's clock counts whole
# milliseconds).
SUPPRESSION_MARGIN = 0.001
# A Nack (no route: the producer is gone, or back but not registered yet) is asked again after
# 50 ms, doubling per try up to 0.5 s: a producer back after an outage is then heard within half
# a second (doubling up to the 2 s lifetime of a content fetch, a restarted worker's next try
# came after the training had ended; chaos)
NACK_RETRY = 0.05
NACK_RETRY_MAX = 0.5        # and at most the RTO's ceiling, once the round trip is measured
DEADLINE_SPLIT_FLOOR = 0.05  # s: below twice this before a deadline, one Interest takes the rest
TLP_FLOOR = 0.001           # s: added to a tail probe's wait (a process stalled that long)
# early retransmissions per segment before only timeouts count, spaced as the forwarders'
# suppression requires (retx_spacing); with 5, a segment lost 6 times in a row (0.15 % at 10 %
# loss per hop, one version in three) then waited 0.2 + 0.4 + 0.8 s: 10 % went from 8.1x to 4.4x
MAX_FAST = 8
# A segment is given up after max_tries tries, and this long since its first (when the caller
# did not set the tries): with tries a few round trips apart, 8 tries at 20 % loss on four hops
# (0.59 of them fail) were over in 80 ms, 1.5 % of segments, and a training content lost
PATIENCE = 8.0


class FetchError(Exception):
    """A segment could not be fetched within its tries.  `rejected`: every answer failed its
    signature check (the producer signs with another key)."""

    def __init__(self, why: str, rejected: bool = False) -> None:
        super().__init__(why)
        self.rejected = rejected


@dataclass
class FetchStats:
    segments: int = 0            # Data received and accepted
    bytes: int = 0               # content bytes accepted
    retransmissions: int = 0     # Interests re-sent (timeout, Nack, bad signature, early)
    fast_retransmissions: int = 0  # of which early: RACK or tail loss probe, before the timeout
    timeouts: int = 0
    nacks: int = 0
    rejected: int = 0            # Data that failed the signature check
    held_timeouts: int = 0       # held Interests that expired while the producer was not ready


@dataclass
class Segment:
    number: int
    content: bytes
    final: int | None            # FinalBlockId, if the Data carried one


class _Flight:
    """One Interest in flight.  `sample`: no earlier Interest for its segment is alive (none
    was sent, or each one's lifetime is over), so an answer can only be to this one and its
    round trip measures the path (Karn's rule, made exact by lifetimes: a try after a timeout
    is a sample too, and before it, a fetch whose every first try was lost never measured
    anything, and kept its initial timeouts)."""
    __slots__ = ("seg", "seq", "sent", "sample", "held", "life", "task", "order")

    def __init__(self, seg: int, seq: int, sent: float, sample: bool, held: bool,
                 life: float) -> None:
        self.seg, self.seq, self.sent, self.sample, self.held, self.life = \
            seg, seq, sent, sample, held, life
        self.task: asyncio.Future               # the express, set as soon as it is made
        # the order the producer answers in: Interests it holds go out in segment order once
        # it is ready (before anything sent later); the others in the order they were sent
        self.order = (0, seg, seq) if held else (1, seq, 0)


class Transfer:
    """The segments of one object, fetched windowed with loss recovery.

    ``want(segments)`` adds segments (any time, also while running); with ``to_final`` the
    first Data's FinalBlockId adds every segment up to it.  ``have(seg)`` says a segment came
    another way (a push): its Interest, if any, is dropped.  ``await run()`` returns the
    segments fetched, by number, once every wanted one is in.

    Until the first Data arrives, Interests live ``life`` seconds when given (doubling per
    expiry up to ``max_life``; re-expressed, at most the RTO's ceiling once a round trip was
    measured), else the RTO, for ``first_tries`` tries (default ``tries``); with ``held``
    their expiries are not loss (the producer holds them until it is ready).  Such Interests
    may wait (held, or in a forwarder's PIT for a push), so their round trips are no RTT
    samples, unless ``prompt`` says the producer answers at once.
    From the first Data on, the RTO and ``tries`` (default the fetcher's max_tries) rule.
    ``deadline`` (loop time) replaces the tries: everything fails once it has passed.
    """

    def __init__(self, fetcher: "SegmentFetcher", name_of: NameOf, *, fresh: bool = False,
                 to_final: bool = False, life: float | None = None,
                 max_life: float | None = None, held: bool = False, prompt: bool = False,
                 first_tries: int | None = None, tries: int | None = None,
                 max_rejected: int | None = None,
                 deadline: float | None = None,
                 on_segment: Callable[[Segment], None] | None = None) -> None:
        self.f = fetcher
        self.name_of = name_of
        self.fresh = fresh
        self.to_final = to_final
        self.life, self.max_life, self.held, self.prompt = life, max_life, held, prompt
        self.max_rejected = max_rejected       # answers failing the signature check: give up
        self.tries_limit = tries or fetcher.max_tries
        self.first_tries = first_tries or self.tries_limit
        # tries a few round trips apart are over in a blink: unless told how many tries, a
        # segment fails only once the fetcher's patience has passed since its first try too
        self.patience = None if tries is not None else fetcher.patience
        self.first_sent: dict[int, float] = {}
        self.deadline = deadline
        self.on_segment = on_segment
        self.loop = asyncio.get_running_loop()
        self.wanted: set[int] = set()
        self.got: dict[int, Segment] = {}
        self.missing: set[int] = set()           # wanted, not got: done when empty
        self.queue: deque[int] = deque()
        self.flights: dict[int, _Flight] = {}
        self.tries: dict[int, int] = {}          # failures that count toward the limit
        self.expiries: dict[int, int] = {}       # timeouts, for the per-segment backoff
        self.fast: dict[int, int] = {}
        # asked before in a way tries, fast and expiries do not record (FaceDown, retry_now)
        self.asked_before: set[int] = set()
        self.stale: set[int] = set()             # failed a signature check: MustBeFresh
        self.rejections: dict[int, int] = {}     # answers that failed it, by segment
        self.alive_until: dict[int, float] = {}  # the end of the latest lifetime, by segment
        self.last_failure: dict[int, str] = {}   # what the last try of a segment got
        self.final: int | None = None
        self.ready_at: float | None = None       # first Data of this transfer
        self.ready_wait = 0.0                    # ... and how long its Interest waited
        self.seq = 0
        self.asked = 0                           # segments asked for (first Interests)
        self.rack_order = (-1, -1, -1)           # the last-answered-in-order flight answered,
        self.rack_rtt = 0.0                      # its round trip and when it arrived
        self.rack_at = 0.0
        self.timer: asyncio.TimerHandle | None = None
        self.done = self.loop.create_future()
        fetcher.transfers.add(self)

    # ---- the caller's side -------------------------------------------------------------------

    def want(self, segments: Iterable[int]) -> None:
        for s in segments:
            if s not in self.wanted and (self.final is None or s <= self.final):
                self.wanted.add(s)
                if s not in self.got:
                    self.missing.add(s)
                    self.queue.append(s)
        self._fill()
        self._detect_losses()
        self._check()

    def have(self, seg: int) -> None:
        """Segment `seg` arrived another way: stop asking for it."""
        self.wanted.discard(seg)
        self.missing.discard(seg)
        flight = self.flights.pop(seg, None)
        if flight is not None:
            flight.task.cancel()
        self._fill()
        self._check()

    @property
    def finished(self) -> bool:
        return self.done.done()

    async def run(self) -> dict[int, Segment]:
        self._fill()
        self._check()
        try:
            return await self.done
        finally:
            self.close()

    def retry_now(self) -> None:
        """The producer is back (it has just spoken to us): every segment still missing is
        asked again now, its backoff forgotten — the expiries and Nacks while it was gone
        say nothing about it now, and its next try could be seconds away."""
        if self.done.done():
            return
        for seg, flight in list(self.flights.items()):
            del self.flights[seg]
            flight.task.cancel()
        self.expiries.clear()
        self.asked_before.update(self.missing)      # answers to them are no RTT samples
        queued = set(self.queue)
        self.queue.extendleft(sorted((s for s in self.missing if s not in queued),
                                     reverse=True))
        self._fill()

    def close(self) -> None:
        self.f.transfers.discard(self)
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        for flight in self.flights.values():
            flight.task.cancel()
        self.flights.clear()
        if not self.done.done():
            self.done.cancel()

    # ---- sending -------------------------------------------------------------------------------

    def _fill(self) -> None:
        while self.queue and len(self.flights) < self.f.window and not self.done.done():
            seg = self.queue.popleft()
            if seg in self.missing and seg not in self.flights:
                self._send(seg)

    def _send(self, seg: int) -> None:
        now = self.loop.time()
        before_ready = self.ready_at is None
        expiries = self.expiries.get(seg, 0)
        if before_ready and self.life is not None:
            life = self.life
            if self.max_life is not None:
                life = min(self.life * 2 ** expiries, self.max_life)
            if expiries:
                # re-expressed: the producer was expected ready by now (a held one), or the
                # Interest or its Data was lost; either way a few round trips, not a backoff
                life = max(self.f.bounded(life), self.f.retx_spacing(0))
        else:
            life = min(self.f.base_rto() * 2 ** expiries, self.f.rto.ceiling)
        if self.deadline is not None:
            # never the whole time left on one Interest: lost, it would leave none for another
            # try (a held collect re-sent with the last 1.9 s of a 5 s worker_timeout was lost,
            # and a live worker dropped: chaos)
            left = self.deadline - now
            life = max(0.001, min(life, max(left / 2, min(left, DEADLINE_SPLIT_FLOOR))))
        first = seg not in self.tries and seg not in self.fast and seg not in self.expiries \
            and seg not in self.asked_before
        if first:
            self.asked += 1
        else:
            self.f.stats.retransmissions += 1
        # an Interest with a lifetime of its own before the first Data may wait (held by the
        # producer, or in a forwarder's PIT for a push): its round trip is no RTT sample
        self.first_sent.setdefault(seg, now)
        sample = now >= self.alive_until.get(seg, 0.0)
        self.alive_until[seg] = max(self.alive_until.get(seg, 0.0), now + life)
        flight = _Flight(seg, self.seq, now, sample,
                         before_ready and self.life is not None and not self.prompt, life)
        self.seq += 1
        flight.task = asyncio.ensure_future(self.f.express(
            self.name_of(seg), self.f.validator, lifetime=max(1, int(life * 1000)),
            must_be_fresh=self.fresh or seg in self.stale, can_be_prefix=False))
        flight.task.add_done_callback(partial(self._answered, flight))
        self.flights[seg] = flight

    def _retry(self, seg: int, counted: bool = True) -> None:
        """Ask for `seg` again, first in line, unless its tries (when `counted`) or the
        deadline are over."""
        if self.deadline is not None:
            if self.loop.time() >= self.deadline:
                self._fail(f"{Name.to_str(self.name_of(seg))}: no Data before the deadline")
                return
        elif counted:
            self.tries[seg] = self.tries.get(seg, 0) + 1
            limit = self.first_tries if self.ready_at is None else self.tries_limit
            if self.tries[seg] >= limit and (
                    self.patience is None
                    or self.loop.time() - self.first_sent[seg] >= self.patience):
                self._fail_with(FetchError(
                    self._why(seg), rejected=self.rejections.get(seg, 0) >= self.tries[seg]))
                return
        if seg in self.missing:
            self.queue.appendleft(seg)
        self._fill()
        self._detect_losses()

    # ---- answers ---------------------------------------------------------------------------------

    def _answered(self, flight: _Flight, task: asyncio.Future) -> None:
        if self.done.done():
            return
        if task.cancelled():
            if self.flights.get(flight.seg) is not flight:
                return                              # we cancelled it (superseded)
            # not by us: the face shut down (python-ndn cancels every pending future)
            exc: BaseException | None = FaceDown()
        else:
            exc = task.exception()
        if exc is None:
            self._data(flight, task.result())
            return
        if self.flights.get(flight.seg) is not flight:
            return                                  # superseded by a retransmission
        del self.flights[flight.seg]
        if isinstance(exc, FaceDown):
            # the face to the forwarder went down (a restart): no news about the path, so
            # neither a backoff nor a try; App.express holds the next one until the face is
            # back.  Backed off, a collect's lifetimes had grown to seconds by then, and one
            # loss afterwards outlasted worker_timeout: a live worker dropped (chaos)
            self.asked_before.add(flight.seg)
            self._retry(flight.seg, counted=False)
        elif isinstance(exc, (InterestTimeout, InterestCanceled, NetworkError)):
            self.last_failure[flight.seg] = "no answer"
            self.expiries[flight.seg] = self.expiries.get(flight.seg, 0) + 1
            if flight.held and self.held:
                self.f.stats.held_timeouts += 1
                self._retry(flight.seg)
            else:
                self.f.stats.timeouts += 1
                self._retry(flight.seg)
        elif isinstance(exc, InterestNack):
            self.last_failure[flight.seg] = f"Nack {exc.reason}"
            self.f.stats.nacks += 1
            delay = nack_delay(self.tries.get(flight.seg, 0),
                               min(flight.life, self.f.rto.ceiling))
            self.loop.call_later(delay, self._after_nack, flight.seg)
        elif isinstance(exc, ValidationFailure):
            self.last_failure[flight.seg] = "a Data that failed its signature check"
            self.rejections[flight.seg] = self.rejections.get(flight.seg, 0) + 1
            self.f.stats.rejected += 1
            self.stale.add(flight.seg)
            if self.max_rejected is not None and \
                    self.rejections[flight.seg] >= self.max_rejected:
                self.tries[flight.seg] = self.tries.get(flight.seg, 0) + 1
                self._fail_with(FetchError(self._why(flight.seg), rejected=True))
                return
            self._retry(flight.seg)
        else:
            self._fail_with(exc)

    def _why(self, seg: int) -> str:
        """Why segment `seg` could not be fetched, for people."""
        name, tries = Name.to_str(self.name_of(seg)), self.tries[seg]
        if self.rejections.get(seg, 0) >= tries:
            return (f"{name}: no valid Data after {tries} tries: every answer failed its "
                    f"signature check (is the key the producer's?)")
        last = self.last_failure.get(seg, "no answer")
        return f"{name}: no valid Data after {tries} tries (the last: {last})"

    def _after_nack(self, seg: int) -> None:
        if not self.done.done() and seg not in self.flights:
            self._retry(seg)

    def _data(self, flight: _Flight, result: tuple) -> None:
        now = self.loop.time()
        seg = flight.seg
        current = self.flights.get(seg)
        if current is flight:
            del self.flights[seg]
        elif current is not None:                   # the original answered after all
            current.task.cancel()
            del self.flights[seg]
        if seg in self.got:
            return
        _, content, ctx = result
        meta = ctx.get("meta_info") if isinstance(ctx, dict) else None
        final = segment_number(meta.final_block_id) if meta is not None else None
        segment = Segment(seg, bytes(content or b""), final)
        rtt = now - flight.sent
        if flight.sample:
            self.f.min_rtt = rtt if self.f.min_rtt is None else min(self.f.min_rtt, rtt)
            if not flight.held:
                self.f.rto.observe(rtt)
        elif self.f.min_rtt is None:
            # the answer may be to an earlier try (shorter than the truth), but a guess at
            # the path's round trip beats the initial RTO's second: true samples replace it
            self.f.min_rtt = rtt
        if self.ready_at is None:
            self.ready_at = now
            self.ready_wait = rtt
        # RACK: the flight answered that was due last; an answer to an earlier copy of a re-sent
        # segment may come faster than any round trip: not a measure
        if flight.order > self.rack_order and (flight.sample or self.f.min_rtt is None
                                               or rtt >= self.f.min_rtt):
            self.rack_order, self.rack_rtt, self.rack_at = flight.order, rtt, now
        self.got[seg] = segment
        self.missing.discard(seg)
        self.f.stats.segments += 1
        self.f.stats.bytes += len(segment.content)
        if self.to_final and self.final is None:
            self.final = final if final is not None else seg
            self._trim(self.final)
            self.want(range(self.final + 1))
        if self.on_segment is not None and seg in self.wanted:
            self.on_segment(segment)
        self._detect_losses()
        self._fill()
        self._check()

    def _trim(self, final: int) -> None:
        """The object ends at `final`: drop what was asked beyond it (a guess)."""
        for s in [s for s in self.wanted if s > final]:
            self.wanted.discard(s)
            self.missing.discard(s)
            flight = self.flights.pop(s, None)
            if flight is not None:
                flight.task.cancel()

    # ---- loss detection ------------------------------------------------------------------------

    def _detect_losses(self) -> None:
        """Re-express the flights that RACK or the tail probe declares lost, and arm the timer
        for the next one that may be."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.done.done():
            return
        reo = max(self.f.reorder_floor, (self.f.min_rtt or 0.0) / 4)
        srtt = self.f.rto.stats.mean             # before any sample, the smallest round trip
        if srtt is None:
            srtt = self.f.min_rtt
        while True:
            now = self.loop.time()
            tail = not any(s in self.missing and s not in self.flights
                           for s in self.queue)
            # the tail probe re-asks the last Interest only, as TCP's does: its answer (or the
            # original's) lets RACK judge every one before it; probing them all would re-ask a
            # whole window each time a queue makes round trips grow
            rack = self.rack_order
            judged = _judged(self.flights, rack, tail and srtt is not None)
            lost, next_due = [], None
            for flight in judged:
                fast = self.fast.get(flight.seg, 0)
                ready_at = self.ready_at
                if fast >= self.f.max_fast or (flight.held and ready_at is None):
                    continue                        # (a producer not ready yet holds them)
                if flight.order < rack:             # something due after it was answered
                    if not flight.held:
                        due = flight.sent + self.rack_rtt + reo
                    elif rack[0] == 0:              # held ones go out together, in order
                        due = self.rack_at + reo
                    else:                           # ... as soon as the producer is ready
                        assert ready_at is not None     # (held ones wait above until it is)
                        due = ready_at + reo
                else:                               # tail loss probe
                    assert srtt is not None         # (_judged adds a probe only then)
                    wait = tail_probe_wait(srtt, self.rack_rtt if rack[0] == 1 else 0.0,
                                           self.f.min_rtt, resent=fast > 0)
                    due = max(flight.sent, ready_at or 0.0) + wait + max(reo, TLP_FLOOR)
                due = max(due, flight.sent + self.f.retx_spacing(fast))
                if due <= now:
                    lost.append(flight)
                elif next_due is None or due < next_due:
                    next_due = due
            if not lost:
                break
            for flight in lost:
                del self.flights[flight.seg]
                flight.task.cancel()
                self.fast[flight.seg] = self.fast.get(flight.seg, 0) + 1
                self.f.stats.fast_retransmissions += 1
                self.queue.appendleft(flight.seg)
            self._fill()                            # the new flights are judged next pass
            if self.done.done():
                return
        if next_due is not None:
            self.timer = self.loop.call_at(next_due + HALF_TICK, self._detect_losses)

    # ---- the end -----------------------------------------------------------------------------------

    def _check(self) -> None:
        if self.done.done():
            return
        if self.to_final and self.final is None:
            return
        if not self.missing:
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
            self.done.set_result({s: self.got[s] for s in self.wanted})

    def _fail(self, why: str) -> None:
        self._fail_with(FetchError(why))

    def _fail_with(self, exc: BaseException) -> None:
        if not self.done.done():
            self.done.set_exception(exc)
        self.close()


def nack_delay(tries: int, life: float) -> float:
    """How long after a Nack a segment is asked again: NACK_RETRY doubling per try, at most
    NACK_RETRY_MAX (and the Interest's lifetime)."""
    return min(life, NACK_RETRY_MAX, NACK_RETRY * 2 ** min(tries, 16))


def tail_probe_wait(srtt: float, last_rtt: float, min_rtt: float | None,
                    resent: bool) -> float:
    """How long the last Interest in flight may go unanswered before a tail probe re-asks it:
    2 round trips, srtt or the last one answered, whichever is longer (a queue may be
    building).  A re-sent one, the smallest round trip seen: it is answered from the nearest
    copy at once, and those round trips were first tries queued behind a burst (13-15 ms
    against 1-2 in a trace at 5 % loss, where each retry of a lost tail waited ~40 ms); and a
    copy too many costs one Interest, where a copy too late costs a round of every repair (at
    20 % loss on four hops a segment takes 2.4 tries on average, the slowest of a version's
    many, six)."""
    if resent and min_rtt is not None:
        return min_rtt
    return 2 * max(srtt, last_rtt)


def _judged(flights: dict[int, _Flight], rack: tuple, probe: bool) -> list[_Flight]:
    """The flights loss detection looks at: RACK's (every one due before the flight answered
    last, order `rack`), and with `probe` the one due last, for a tail probe, if not among
    them.  Flights are kept in send order, the held ones before any other (only Interests
    sent before the first Data are held); the producer answers the held ones by segment.  So
    after the first unheld flight not due before `rack`, none is: the walk stops there
    instead of at the window's end — it runs for every Data."""
    judged = []
    for flight in flights.values():
        if flight.order < rack:
            judged.append(flight)
        elif not flight.held:
            break
    if probe and flights:
        last = next(reversed(flights.values()))
        if last.held:
            last = max(flights.values(), key=lambda f: f.order)
        if not last.order < rack:
            judged.append(last)
    return judged


class SegmentFetcher:
    """Fetches for one app: the window, the RTO estimator and the statistics are shared by its
    transfers."""

    def __init__(self, express: Express, validator, window: int = 16,
                 rto: RtoEstimator | None = None, max_tries: int = 8,
                 stats: FetchStats | None = None, max_fast: int = MAX_FAST,
                 reorder_floor: float = REORDER_FLOOR,
                 suppression: float = RETX_INITIAL,
                 suppression_max: float = RETX_MAX, patience: float = PATIENCE) -> None:
        if window < 1:
            raise ValueError("window must be >= 1")
        self.express = express
        self.validator = validator
        self.window = window
        self.rto = rto or RtoEstimator(initial=1.0, min_rto=MIN_RTO, max_rto=4.0)
        self.max_tries = max_tries
        self.patience = patience    # s: a segment's least persistence (see Transfer)
        self.max_fast = max_fast
        self.reorder_floor = reorder_floor
        # the forwarders' retransmission suppression (s): see SUPPRESSION_MARGIN
        self.suppression, self.suppression_max = suppression, suppression_max
        self.stats = stats or FetchStats()
        # those under way (retry_now); weak: one never run (its task cancelled first) goes
        self.transfers: weakref.WeakSet[Transfer] = weakref.WeakSet()
        # smallest round trip seen, held Interests included: some are answered at once, so
        # this approaches the path's RTT even when every Interest may be held
        self.min_rtt: float | None = None

    def retx_spacing(self, earlier: int) -> float:
        """The least wait before the next try of a segment already tried early `earlier`
        times: the forwarders' suppression interval then (doubling per retransmission they
        forwarded, up to their maximum) and a margin."""
        return min(self.suppression * 2 ** earlier, self.suppression_max) + SUPPRESSION_MARGIN

    @property
    def measured(self) -> bool:
        """Whether a round trip was measured (then every backoff is bounded by it)."""
        return self.rto.stats.mean is not None

    def srtt(self) -> float:
        """The smoothed round trip (0 before a sample)."""
        return self.rto.stats.mean or 0.0

    def bounded(self, wait: float) -> float:
        """`wait`, but at most the RTO's ceiling once a round trip was measured (or, before
        a sample, as many of the smallest round trip seen): how long anything repeated after
        a failure may wait (an app's exchanges that are not fetches — registration, probes,
        leaving — use it too)."""
        if not self.measured and self.min_rtt is not None:
            return min(wait, max(self.base_rto(), BACKOFF_RTTS * self.min_rtt))
        return self.rto.bounded(wait)

    def base_rto(self) -> float:
        """The RTO before backoff; with no sample yet, a few of the smallest round trips seen
        (held answers included) rather than the initial guess, when that is smaller."""
        if self.rto.stats.mean is None and self.min_rtt is not None:
            return min(self.rto.base, max(self.rto.min_rto, 4 * self.min_rtt))
        return self.rto.base

    def retry_now(self) -> None:
        """Every transfer under way asks again now for what it misses (Transfer.retry_now)."""
        for t in list(self.transfers):
            t.retry_now()

    def transfer(self, name_of: NameOf, **kw) -> Transfer:
        """A transfer to drive by hand (``want``, ``have``, ``await run()``)."""
        return Transfer(self, name_of, **kw)

    async def fetch_one(self, name: FormalName, lifetime: float | None = None,
                        tries: int | None = None, held: bool = False, fresh: bool = False,
                        max_lifetime: float | None = None, deadline: float | None = None,
                        prompt: bool = False) -> Segment:
        """One segment.  ``lifetime`` (s) for the first try, or the RTO when None; with
        ``max_lifetime`` it doubles after each expiry up to that.  ``held``: the producer may
        hold the Interest until it has the Data, so an expiry is not loss; ``prompt``: it
        answers at once, so a round trip is a sample.  Gives up after ``tries`` (default
        max_tries) or at ``deadline`` (loop time)."""
        number = names_segment(name)
        t = Transfer(self, lambda _s: name, fresh=fresh, life=lifetime, max_life=max_lifetime,
                     held=held, prompt=prompt, first_tries=tries, tries=tries,
                     deadline=deadline)
        t.want([number])
        return (await t.run())[number]

    async def fetch_many(self, name_of: NameOf, numbers: list[int],
                         on_segment: Callable[[Segment], None] | None = None,
                         fresh: bool = False) -> dict[int, Segment]:
        """Every segment in ``numbers``, at most ``window`` Interests in flight."""
        t = Transfer(self, name_of, fresh=fresh, on_segment=on_segment)
        t.want(numbers)
        return await t.run()

    async def fetch(self, name_of: NameOf, have: dict[int, bytes] | None = None,
                    final: int | None = None, first_lifetime: float | None = None,
                    first_tries: int | None = None, fresh: bool = False,
                    max_lifetime: float | None = None,
                    max_rejected: int | None = None) -> list[bytes]:
        """The whole object: segment 0 first unless the count is known (``final``), then the
        missing rest windowed.  ``have`` holds segments already received (e.g. pushed).
        ``first_lifetime``/``first_tries``: the first segment may be held by its producer;
        with ``max_lifetime`` its lifetime doubles after each expiry up to that."""
        have = dict(have or {})
        t = Transfer(self, name_of, fresh=fresh, to_final=final is None, life=first_lifetime,
                     max_life=max_lifetime, held=first_lifetime is not None,
                     first_tries=first_tries, max_rejected=max_rejected)
        if final is None:
            if have:
                raise ValueError("segments in hand but no final: pass final")
            t.want([0])
        else:
            t.final = final
            t.want(s for s in range(final + 1) if s not in have)
        got = await t.run()
        last = t.final
        assert last is not None         # a whole object's transfer ends once its final is known
        parts = {**have, **{s: seg.content for s, seg in got.items()}}
        return [parts[s] for s in range(last + 1)]

    async def fetch_held(self, name_of: NameOf, last_hint: int | None, lifetime: float,
                         max_lifetime: float, deadline: float,
                         fresh: bool = True) -> tuple[list[bytes], float, float]:
        """An object whose producer holds Interests until it exists (a gradient being
        computed).  Segment 0 and, when ``last_hint`` says how many there were last time, up
        to ``window`` - 1 more are asked at once, all held, so the whole object comes back in
        one round trip once ready; the rest windowed.  ``deadline``: loop time.  Returns the
        segments, when the first Data arrived (loop time) and how long the Interest it
        answered had waited: much more than a round trip, the producer held it (it became
        ready about then, whichever try that was); about one, it was ready before."""
        t = Transfer(self, name_of, fresh=fresh, to_final=True, life=lifetime,
                     max_life=max_lifetime, held=True, deadline=deadline)
        t.want(range(min(last_hint or 0, self.window - 1) + 1))
        got = await t.run()
        assert t.final is not None      # a whole object's transfer ends once its final is known
        assert t.ready_at is not None   # (and so is its first Data)
        return [got[s].content for s in range(t.final + 1)], t.ready_at, t.ready_wait


def names_segment(name: FormalName) -> int:
    """The segment number a name ends with (0 if it ends with none)."""
    n = segment_number(bytes(name[-1])) if name else None
    return 0 if n is None else n


def reorder_floor(app) -> float:
    """The reordering window's floor for an app's fetches: LINK_REPAIR on a face with link
    reliability, or on a path whose links have it (the links repair their losses: a consumer
    that re-asks sooner races them, and its re-asks cost every hop), REORDER_FLOOR otherwise."""
    return LINK_REPAIR if app.lp_reliability or app.link_repair else REORDER_FLOOR
