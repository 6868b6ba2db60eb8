"""Fetching one object's segments, sans-I/O: the Collector's engine (content, gradients,
probes and unicast parameters all come through it; ndnps.client.fetcher is its asyncio
adapter).  The segments' names are the owner's, so the producers may be one or many.

python-ndn's own fetcher keeps one Interest in flight (docs/design.md, python-ndn).  A
``SegmentTransfer`` keeps Interests in flight for a set of segments that may grow (from the
FinalBlockId of the first Data, or as the owner finds more holes), as many as its producer's
congestion window allows (ndnps.exchanges.transport.window: AIMD from 2 Interests up to the path's
``window``, halved at most once per round trip on a marked Data, a loss, a backed-off RTO or a
Congestion Nack), and recovers losses the way TCP does, per segment:

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
cache cannot serve the bad copy again) count as tries.  A segment is given up, and the fetch
fails with FetchError, once it has had ``max_tries`` tries *and* the path's ``patience`` has
passed since its first: the job's own word for a silent peer (a worker's ps_timeout, the PS's
worker_timeout), so no fetch gives up on a peer the job still holds alive — a congested path
may lose a segment many times over, and tries a few round trips apart are over in a blink.
Within that time a segment's tries are spaced by its backed-off RTO (at most the ceiling) or,
the early ones (at most ``max_fast``), by the forwarders' suppression: bounded, and nothing
waits for ever.  Only a segment whose every answer failed its signature check fails at
``max_tries`` without waiting: no wait mends a key that differs.  An Interest that never left
or whose face went away (a forwarder restart) is asked again with neither a backoff nor a try:
an outage is no news about the path.

*Held* Interests: a producer may hold an Interest until it has the Data (a gradient being
computed, a push not made yet).  Until the first Data of a transfer arrives, expiries of such
Interests are not loss and their round trips are no RTT samples; from then on the producer is
ready and every Interest is an ordinary one.

The transfer takes events with a `now` (`want`, `have`, `on_data`, `on_expired`, `on_nack`,
`on_rejected`, `on_face_down`, `retry_now`, `on_timer`) and returns actions (`Send` a
flight's Interest, `Cancel` one); `next_timer()` says when it next wants `on_timer`;
`finished`, `result` and `error` say how it ended.  `FetchPath` is what a fetcher's transfers
share: the windows, the RTO estimator, the smallest round trip, the statistics.

Here the transfer's events; its flights — sending, lifetimes, losses — are its base ``Sender``
(sender.py), loss detection's rules loss.py, the shared path path.py, the actions and segments
flight.py.
"""

from __future__ import annotations

from typing import Iterable

from .flight import Action, Cancel, FetchError, Flight, Segment
from .loss import NACK_CONGESTION, nack_delay
from .sender import Sender


class SegmentTransfer(Sender):
    """The segments of one object, fetched windowed with loss recovery.

    ``want(segments)`` adds segments (any time, also while running); with ``to_final`` the
    first Data's FinalBlockId adds every segment up to it.  ``have(seg)`` says a segment came
    another way (a push): its Interest, if any, is dropped.  Once every wanted one is in,
    ``result`` holds the segments by number.

    Until the first Data arrives, Interests live ``life`` seconds when given (doubling per
    expiry up to ``max_life``; re-expressed, at most the RTO's ceiling once a round trip was
    measured), else the RTO, for ``first_tries`` tries (default ``tries``); with ``held``
    their expiries are not loss (the producer holds them until it is ready).  Such Interests
    may wait (held, or in a forwarder's PIT for a push), so their round trips are no RTT
    samples, unless ``prompt`` says the producer answers at once.
    From the first Data on, the RTO and ``tries`` (default the path's max_tries) rule.
    ``deadline`` (clock time) replaces the tries: everything fails once it has passed.
    `label(seg)` names a segment in error messages; `flow` its producer (the congestion
    window it shares with the path's other transfers towards it).
    """

    # ---- the owner's side ----------------------------------------------------------------------

    def want(self, segments: Iterable[int], now: float) -> list[Action]:
        self._want(segments, now)
        return self._take()

    def _want(self, segments: Iterable[int], now: float) -> None:
        for s in segments:
            if s not in self.wanted and (self.final is None or s <= self.final):
                self.wanted.add(s)
                if s not in self.got:
                    self.missing.add(s)
                    self.queue.append(s)
        self._fill(now)
        self._detect_losses(now)
        self._check()

    def have(self, seg: int, now: float) -> list[Action]:
        """Segment `seg` arrived another way: stop asking for it."""
        self.wanted.discard(seg)
        self.missing.discard(seg)
        flight = self._land(seg)
        if flight is not None:
            self._out.append(Cancel(flight))
        self._fill(now)
        self._check()
        return self._take()

    def start(self, now: float) -> list[Action]:
        self._fill(now)
        self._check()
        return self._take()

    def retry_now(self, now: float) -> list[Action]:
        """The producer is back (it has just spoken to us): every segment still missing is
        asked again now, its backoff forgotten — the expiries and Nacks while it was gone
        say nothing about it now, and its next try could be seconds away."""
        if self.finished:
            return []
        self._land_all()
        self.win.restart()
        self.expiries.clear()
        self.asked_before.update(self.missing)      # answers to them are no RTT samples
        queued = set(self.queue)
        self.queue.extendleft(sorted((s for s in self.missing if s not in queued),
                                     reverse=True))
        self._fill(now)
        return self._take()

    def next_timer(self) -> float | None:
        due = [t for t in (self.loss_timer,) if t is not None]
        if self.nack_retries:
            due.append(min(self.nack_retries.values()))
        return min(due) if due and not self.finished else None

    def on_timer(self, now: float) -> list[Action]:
        for seg in [s for s, at in self.nack_retries.items() if at <= now]:
            # (a retry that ends the transfer clears the rest)
            if self.nack_retries.pop(seg, None) is not None and not self.finished \
                    and seg not in self.flights:
                self._retry(seg, now)
        if self.loss_timer is not None and self.loss_timer <= now:
            self._detect_losses(now)
        return self._take()

    def _retry(self, seg: int, now: float, counted: bool = True) -> None:
        """Ask for `seg` again, first in line, unless its tries (when `counted`) or the
        deadline are over."""
        if self.deadline is not None:
            if now >= self.deadline:
                self._fail(FetchError(f"{self.label(seg)}: no Data before the deadline"))
                return
        elif counted:
            tries = self.tries[seg] = self.tries.get(seg, 0) + 1
            ready = self.ready_at is not None
            limit = self.tries_limit if ready else self.first_tries
            patience = self.patience if ready else self.first_patience
            # every answer failed its signature check: no wait mends a key that differs
            rejected = self.rejections.get(seg, 0) >= tries
            if tries >= limit and (patience is None or rejected
                                   or now - self.first_sent[seg] >= patience):
                self._fail(FetchError(self._why(seg, now), rejected=rejected))
                return
        if seg in self.missing:
            self.queue.appendleft(seg)
        self._fill(now)
        self._detect_losses(now)

    # ---- answers ---------------------------------------------------------------------------------

    def _current(self, flight: Flight) -> bool:
        """Whether `flight` is its segment's latest (an older one was superseded)."""
        if self.finished or self.flights.get(flight.seg) is not flight:
            return False
        self._land(flight.seg)
        return True

    def on_face_down(self, flight: Flight, now: float) -> list[Action]:
        """The face to the forwarder went down (a restart): no news about the path, so
        neither a backoff nor a try; the owner holds the next one until the face is back.
        Backed off, a collect's lifetimes had grown to seconds by then, and one loss
        afterwards outlasted worker_timeout: a live worker dropped (chaos)."""
        if self._current(flight):
            self.asked_before.add(flight.seg)
            self._retry(flight.seg, now, counted=False)
        return self._take()

    def on_expired(self, flight: Flight, now: float) -> list[Action]:
        """No answer within the Interest's lifetime."""
        if self._current(flight):
            self.last_failure[flight.seg] = "no answer"
            self.expiries[flight.seg] = self.expiries.get(flight.seg, 0) + 1
            if flight.held and self.held:
                self.f.stats.held_timeouts += 1
            else:
                self.f.stats.timeouts += 1
            if not flight.held and self.expiries[flight.seg] > 1:
                # a backed-off RTO (see the module's docstring); not a held Interest's, which
                # waits on its producer (or a push), not on the path
                self._congested(flight)
            self._retry(flight.seg, now)
        return self._take()

    def on_nack(self, flight: Flight, reason: object, now: float) -> list[Action]:
        if self._current(flight):
            self.last_failure[flight.seg] = f"Nack {reason}"
            self.f.stats.nacks += 1
            if reason == NACK_CONGESTION:
                self._congested(flight)
            delay = nack_delay(self.tries.get(flight.seg, 0),
                               min(flight.life, self.f.rto.ceiling))
            self.nack_retries[flight.seg] = now + delay
        return self._take()

    def on_rejected(self, flight: Flight, now: float) -> list[Action]:
        """The answer failed its signature check: asked again with MustBeFresh."""
        if self._current(flight):
            seg = flight.seg
            self.last_failure[seg] = "a Data that failed its signature check"
            self.rejections[seg] = self.rejections.get(seg, 0) + 1
            self.f.stats.rejected += 1
            self.stale.add(seg)
            if self.max_rejected is not None and self.rejections[seg] >= self.max_rejected:
                self.tries[seg] = self.tries.get(seg, 0) + 1
                self._fail(FetchError(self._why(seg, now), rejected=True))
            else:
                self._retry(seg, now)
        return self._take()

    def on_failed(self, flight: Flight, exc: BaseException) -> list[Action]:
        """Something no retry helps (a bug): the transfer fails with it."""
        if self._current(flight):
            self._fail(exc)
        return self._take()

    def _why(self, seg: int, now: float) -> str:
        """Why segment `seg` could not be fetched, for people: the tries it had and over how
        long (more than the limit when the patience had not passed: the module's docstring)."""
        name, tries = self.label(seg), self.tries[seg]
        first = self.first_sent.get(seg)
        over = f" over {now - first:.2f} s" if first is not None else ""
        if self.rejections.get(seg, 0) >= tries:
            return (f"{name}: no valid Data after {tries} tries{over}: every answer failed its "
                    f"signature check (is the key the producer's?)")
        last = self.last_failure.get(seg, "no answer")
        return f"{name}: no valid Data after {tries} tries{over} (the last: {last})"

    def on_data(self, flight: Flight, content: bytes | memoryview, final: int | None,
                now: float, marked: bool = False, declined: bool = False) -> list[Action]:
        """The flight's Data came (its signature checked; `marked`: it carried a
        CongestionMark); a wanted segment lands in `arrived` for the owner, who then calls
        `settle`. `declined`: no Data came but a refusal the owner handles itself (an
        aggregator with no free slot Nacked, and the owner sums that segment another way):
        the segment lands with `content` as the owner says, as a congestion signal, and its
        round trip is no sample (a refusal comes back faster than any answer)."""
        if self.finished:
            return []
        seg = flight.seg
        current = self._land(seg)
        if current is not None and current is not flight:   # the original answered after all
            self._out.append(Cancel(current))
        if marked:
            self.f.stats.marks += 1
        if declined:
            self._congested(flight)
        # a duplicate grows nothing, but its mark still tells of the queue it went through
        elif (marked or seg not in self.got) and self.win.on_data(flight.epoch, marked):
            self.f.stats.window_cuts += 1
        if seg in self.got:
            return self._take()
        self._settle = True
        segment = Segment(seg, content, final)
        if declined:
            self.got[seg] = segment
            self.missing.discard(seg)
            if seg in self.wanted:
                self.arrived.append(segment)
            return self._take()
        rtt = now - flight.sent
        if flight.sample:
            self.f.min_rtt = rtt if self.f.min_rtt is None else min(self.f.min_rtt, rtt)
            if not flight.held:
                self.f.observe(rtt, now)
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
            self._want(range(self.final + 1), now)
        if seg in self.wanted:
            self.arrived.append(segment)
        return self._take()

    def settle(self, now: float) -> list[Action]:
        """After `on_data`, once the owner has taken `arrived` (which may have closed the
        transfer): judge losses, fill the window, see whether all is in."""
        if not self._settle:
            return []                   # a duplicate answer: nothing changed but the flight
        self._settle = False
        self._detect_losses(now)
        self._fill(now)
        self._check()
        return self._take()

    def _trim(self, final: int) -> None:
        """The object ends at `final`: drop what was asked beyond it (a guess)."""
        for s in [s for s in self.wanted if s > final]:
            self.wanted.discard(s)
            self.missing.discard(s)
            flight = self._land(s)
            if flight is not None:
                self._out.append(Cancel(flight))
