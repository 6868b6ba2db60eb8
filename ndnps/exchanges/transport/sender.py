"""A transfer's flights (ndnps.exchanges.transport.fetch tells the whole): its state, the
Interests sent as the congestion window allows, each with its segment's lifetime — the RTO doubled
per expiry of that segment, bounded — and the flights RACK and the tail loss probe declare lost
(the rules: ndnps.exchanges.transport.loss) sent again.  ``SegmentTransfer`` adds the events: what
the owner wants, and the answers."""
from __future__ import annotations

from collections import deque
from typing import Callable, Hashable

from .flight import Action, Cancel, Flight, Segment, Send
from .loss import QUEUE_TARGET, TLP_FLOOR, judged_flights, tail_probe_wait
from .path import PATIENCE, FetchPath
from .window import CongestionWindow

MAX_DOUBLINGS = 32          # a lifetime's backoff exponent at most (2 ** 32 x any RTO: capped)
DEADLINE_SPLIT_FLOOR = 0.05  # s: below twice this before a deadline, one Interest takes the rest


class Sender:
    """The flights of one transfer and what they say: sending, lifetimes, losses, the end.
    Constructed as ``SegmentTransfer`` (its docstring names the arguments)."""

    def __init__(self, path: FetchPath, label: Callable[[int], str], *, flow: Hashable = None,
                 fresh: bool = False,
                 to_final: bool = False, life: float | None = None,
                 max_life: float | None = None, held: bool = False, prompt: bool = False,
                 first_tries: int | None = None, tries: int | None = None,
                 max_rejected: int | None = None, deadline: float | None = None) -> None:
        self.f = path
        self.win: CongestionWindow = path.windows(flow)
        self.label = label
        self.fresh = fresh
        self.to_final = to_final
        self.life, self.max_life, self.held, self.prompt = life, max_life, held, prompt
        self.max_rejected = max_rejected       # answers failing the signature check: give up
        self.tries_limit = tries or path.max_tries
        self.first_tries = first_tries or self.tries_limit
        # tries a few round trips apart are over in a blink: unless told how many tries, a
        # segment fails only once the path's patience has passed since its first try too
        self.patience = None if tries is not None else path.patience
        self.first_patience = self.patience if self.patience is None or life is None \
            else min(self.patience, PATIENCE)
        self.first_sent: dict[int, float] = {}
        self.deadline = deadline
        self.wanted: set[int] = set()
        self.got: dict[int, Segment] = {}
        self.missing: set[int] = set()           # wanted, not got: done when empty
        self.queue: deque[int] = deque()
        self.flights: dict[int, Flight] = {}
        self.tries: dict[int, int] = {}          # failures that count toward the limit
        self.expiries: dict[int, int] = {}       # timeouts, for the per-segment backoff
        self.fast: dict[int, int] = {}
        # asked before in a way tries, fast and expiries do not record (face down, retry_now)
        self.asked_before: set[int] = set()
        self.stale: set[int] = set()             # failed a signature check: MustBeFresh
        self.rejections: dict[int, int] = {}     # answers that failed it, by segment
        self.alive_until: dict[int, float] = {}  # the end of the latest lifetime, by segment
        self.last_failure: dict[int, str] = {}   # what the last try of a segment got
        self.nack_retries: dict[int, float] = {}  # segment -> when to ask again after a Nack
        self.final: int | None = None
        self.ready_at: float | None = None       # first Data of this transfer
        self.ready_wait = 0.0                    # ... and how long its Interest waited
        self.seq = 0
        self.asked = 0                           # segments asked for (first Interests)
        self.rack_order = (-1, -1, -1)           # the last-answered-in-order flight answered,
        self.rack_rtt = 0.0                      # its round trip and when it arrived
        self.rack_at = 0.0
        self.loss_timer: float | None = None     # when loss detection looks again
        self.result: dict[int, Segment] | None = None
        self.error: BaseException | None = None
        self.closed = False
        self.arrived: list[Segment] = []         # wanted segments in since the last event
        self._settle = False                     # on_data took a new segment: settle next
        self._out: list[Action] = []

    @property
    def finished(self) -> bool:
        return self.result is not None or self.error is not None or self.closed

    def _take(self) -> list[Action]:
        out, self._out = self._out, []
        return out

    def close(self) -> list[Action]:
        self.closed = True
        self._land_all()
        self.loss_timer = None
        self.nack_retries.clear()
        return self._take()

    # ---- sending -------------------------------------------------------------------------------

    def _fill(self, now: float) -> None:
        """Send what is queued while the window has room, and one Interest when this transfer
        has none out whatever the window (see the module's docstring)."""
        while self.queue and (self.win.room or not self.flights) and not self.finished:
            seg = self.queue.popleft()
            if seg in self.missing and seg not in self.flights:
                self._send(seg, now)

    def _fly(self, flight: Flight) -> None:
        flight.epoch = self.win.sent()
        self.flights[flight.seg] = flight

    def _land_all(self) -> None:
        """Cancel every flight."""
        for flight in list(self.flights.values()):
            self._land(flight.seg)
            self._out.append(Cancel(flight))

    def _land(self, seg: int) -> Flight | None:
        """`seg`'s flight, no longer in flight (None if it had none)."""
        flight = self.flights.pop(seg, None)
        if flight is not None:
            self.win.landed()
        return flight

    def _queue_loss(self) -> bool:
        """Whether a loss RACK detects now is a queue's: the last answer's round trip stands
        more than QUEUE_TARGET above the path's smallest (a loss with no queue before it is a
        lossy link's)."""
        return self.f.loss_cuts and self.f.min_rtt is not None \
            and self.rack_rtt - self.f.min_rtt > QUEUE_TARGET

    def _congested(self, flight: Flight) -> None:
        """A congestion signal from `flight` (a loss, a backed-off RTO, a Congestion Nack)."""
        if self.win.congested(flight.epoch):
            self.f.stats.window_cuts += 1

    def _send(self, seg: int, now: float) -> None:
        before_ready = self.ready_at is None
        # the doubling's exponent bounded: a held Interest re-asked every few round trips for
        # seconds expires thousands of times, and 2 ** 1100 is no float (OverflowError)
        expiries = min(self.expiries.get(seg, 0), MAX_DOUBLINGS)
        if before_ready and self.life is not None:
            life = self.life
            if self.max_life is not None:
                life = min(self.life * 2 ** expiries, self.max_life)
            if expiries:
                # re-expressed: the producer was expected ready by now (a held one), or the
                # Interest or its Data was lost; either way a few round trips, not a backoff
                life = max(self.f.bounded(life), self.f.retx_spacing(0))
        else:
            base = self.f.base_rto()
            life = min(base * 2 ** expiries, max(self.f.rto.ceiling, base))
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
        flight = Flight(seg, self.seq, now, sample,
                        before_ready and self.life is not None and not self.prompt, life,
                        self.fresh or seg in self.stale)
        self.seq += 1
        self._fly(flight)
        self._out.append(Send(flight))

    # ---- loss detection ------------------------------------------------------------------------

    def _detect_losses(self, now: float) -> None:
        """Re-express the flights that RACK or the tail probe declares lost, and set the
        timer for the next one that may be."""
        self.loss_timer = None
        if self.finished:
            return
        reo = max(self.f.reorder_floor, (self.f.min_rtt or 0.0) / 4)
        srtt = self.f.rto.stats.mean             # before any sample, the smallest round trip
        if srtt is None:
            srtt = self.f.min_rtt
        while True:
            tail = not any(s in self.missing and s not in self.flights for s in self.queue)
            # the tail probe re-asks the last Interest only, as TCP's does: its answer (or the
            # original's) lets RACK judge every one before it; probing them all would re-ask a
            # whole window each time a queue makes round trips grow
            rack = self.rack_order
            judged = judged_flights(self.flights, rack, tail and srtt is not None)
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
                    assert srtt is not None         # (judged_flights adds a probe only then)
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
                self._land(flight.seg)
                self._out.append(Cancel(flight))
                if flight.order < rack and self._queue_loss():     # (not a tail probe)
                    self._congested(flight)
                self.fast[flight.seg] = self.fast.get(flight.seg, 0) + 1
                self.f.stats.fast_retransmissions += 1
                self.queue.appendleft(flight.seg)
            self._fill(now)                         # the new flights are judged next pass
            if self.finished:
                return
        self.loss_timer = next_due

    # ---- the end ---------------------------------------------------------------------------------

    def _check(self) -> None:
        if self.finished or (self.to_final and self.final is None):
            return
        if not self.missing:
            self.loss_timer = None
            self.result = {s: self.got[s] for s in self.wanted}

    def _fail(self, exc: BaseException) -> None:
        if not self.finished:
            self.error = exc
        self._out += self.close()
