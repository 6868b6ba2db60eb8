"""Fetching one object's segments, sans-I/O: the Collector's engine (content, gradients,
probes and unicast parameters all come through it; ndnps.client.fetcher is its asyncio
adapter).  The segments' names are the owner's, so the producers may be one or many.

python-ndn's own fetcher keeps one Interest in flight (docs/design.md, python-ndn).  A
``SegmentTransfer`` keeps Interests in flight for a set of segments that may grow (from the
FinalBlockId of the first Data, or as the owner finds more holes), as many as its producer's
congestion window allows (ndnps.exchanges.window: AIMD from 2 Interests up to the path's
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

*The window* is shared by every transfer towards the same producer (``flow``: a worker's
fetches from its PS share one; the PS has one per worker, as their paths and queues differ,
and a congested worker's branch must not slow the collect from the others).  A transfer
always may have one Interest out, whatever the window: one transfer's Interest held by its
producer for seconds (a probe waiting for a push) never blocks another, and each transfer's
own answers then let it refill (no scheduler: transfers sharing a window take its room in
turn as their answers come).

Which losses cut the window: one RACK detects *behind a queue* — the round trip of the answer
that revealed it stands more than QUEUE_TARGET (CoDel's 5 ms) above the path's smallest — as
TCP's would (RFC 5681, 8985): a drop-tail bottleneck (the kernel's tbf) or a path that does not
mark gives no other early signal (2 workers behind a 100 Mbit/s tbf link with no marks and no
such cut re-sent 1.2 Interests per segment of their gradients).  Not a loss with no queue
before it, a lossy link's (NDNLPv2 reliability's to repair): cutting on every one (TCP's rule)
held the 46-segment gradients of bench.loss's 100k model at 10 % loss at ~3 Interests, 2.5-3 x
slower.  Not a tail probe (its answer may be the original's), nor an RTO's first expiry: floored
at MIN_RTO for fast repair, it expires spuriously on a busy host (8 % of a lossless 100k run's
collect segments); the backed-off one cuts.

*Held* Interests: a producer may hold an Interest until it has the Data (a gradient being
computed, a push not made yet).  Until the first Data of a transfer arrives, expiries of such
Interests are not loss and their round trips are no RTT samples; from then on the producer is
ready and every Interest is an ordinary one.

The transfer takes events with a `now` (`want`, `have`, `on_data`, `on_expired`, `on_nack`,
`on_rejected`, `on_face_down`, `retry_now`, `on_timer`) and returns actions (`Send` a
flight's Interest, `Cancel` one); `next_timer()` says when it next wants `on_timer`;
`finished`, `result` and `error` say how it ended.  `FetchPath` is what a fetcher's transfers
share: the windows, the RTO estimator, the smallest round trip, the statistics.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Callable, Hashable, Iterable, Protocol, Union

from ndnps.ndn._mypyc import mypyc_attr
from ndnps.ndn.nfd import RETX_INITIAL, RETX_MAX
from ndnps.ndn.rto import BACKOFF_RTTS, RtoEstimator

from .window import INITIAL_WINDOW, CongestionWindow, Windows

# s: the RTO's floor, above the scheduling delays of a busy host (2 cores, 6 processes):
# RACK and the tail probe repair most losses well before it. At 0.2 s, what the RTO repaired
# (a retry lost again, a segment alone in flight) cost 0.2 s a time at 20 % loss
MIN_RTO = 0.01
MAX_DOUBLINGS = 32          # a lifetime's backoff exponent at most (2 ** 32 x any RTO: capped)
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
# The RTO is at least PEAK_MARGIN x the longest round trip of the last PEAK_WINDOW seconds: a
# queue that fills at once (every worker's gradient ready together behind one bottleneck) takes
# round trips from 5 to 80 ms within one of them, faster than srtt + 4 rttvar follows, and an
# Interest whose lifetime (its RTO) ends first leaves its Data unsolicited at every hop back
# while its retry fetches it again from a cache behind the bottleneck: on the bottleneck
# scenario (N = 8, 100 Mbit/s) 2,000 such retries a version, and 1.7x the wire limit instead
# of 1.2x.  A path that had a queue lately is given room for it; one that never has (a LAN,
# random loss) keeps its short RTO.
PEAK_WINDOW = 10.0
PEAK_MARGIN = 1.25
DEADLINE_SPLIT_FLOOR = 0.05  # s: below twice this before a deadline, one Interest takes the rest
TLP_FLOOR = 0.001           # s: added to a tail probe's wait (a process stalled that long)
# early retransmissions per segment before only timeouts count, spaced as the forwarders'
# suppression requires (retx_spacing); with 5, a segment lost 6 times in a row (0.15 % at 10 %
# loss per hop, one version in three) then waited 0.2 + 0.4 + 0.8 s: 10 % went from 8.1x to 4.4x
MAX_FAST = 8
# A segment is given up after max_tries tries, and the path's patience since its first (when the
# caller did not set the tries): the job's wait for a silent peer (apps pass it), this by default.
# With tries a few round trips apart, 8 tries at 20 % loss on four hops (0.59 of them fail) were
# over in 80 ms, 1.5 % of segments, and a training content lost; with 8 s on a congested 100 Mbit/s
# link, 16 workers' content fetches failed and started again from scratch (docs/congestion.md).
# Before the first Data, Interests with a lifetime of their own (polling a producer that may not be
# ready: the owner starts again with a longer one) wait this at most.
PATIENCE = 8.0
LOSS_CUTS = True            # a loss RACK detects behind a queue cuts the window (docstring)
QUEUE_TARGET = 0.005        # s: CoDel's (and so the forwarders' marking) target queue delay
NACK_CONGESTION = 50        # NDNLPv2 NackReason Congestion: a signal as an expiry is (ndn-cxx)


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
    marks: int = 0               # Data that carried a CongestionMark
    window_cuts: int = 0         # congestion window decreases (at most one per round trip)
    rejected: int = 0            # Data that failed the signature check
    held_timeouts: int = 0       # held Interests that expired while the producer was not ready


@dataclass
class Segment:
    number: int
    content: bytes | memoryview     # a view of the packet it came in, from the client
    final: int | None            # FinalBlockId, if the Data carried one


class Flight:
    """One Interest in flight.  `sample`: no earlier Interest for its segment is alive (none
    was sent, or each one's lifetime is over), so an answer can only be to this one and its
    round trip measures the path (Karn's rule, made exact by lifetimes: a try after a timeout
    is a sample too, and before it, a fetch whose every first try was lost never measured
    anything, and kept its initial timeouts).  `fresh`: it asks MustBeFresh.  `epoch`: its
    window's epoch when it left (a signal from before the window's last decrease is none)."""
    __slots__ = ("seg", "seq", "sent", "sample", "held", "life", "fresh", "order", "handle",
                 "epoch")

    def __init__(self, seg: int, seq: int, sent: float, sample: bool, held: bool,
                 life: float, fresh: bool = False) -> None:
        self.seg, self.seq, self.sent, self.sample, self.held, self.life = \
            seg, seq, sent, sample, held, life
        self.fresh = fresh
        # the order the producer answers in: Interests it holds go out in segment order once
        # it is ready (before anything sent later); the others in the order they were sent
        self.order = (0, seg, seq) if held else (1, seq, 0)
        self.handle: object = None              # the owner's (its pending Interest)
        self.epoch = 0


@dataclass(frozen=True)
class Send:
    """Express the flight's Interest (its segment's name, lifetime `flight.life`)."""
    flight: Flight


@dataclass(frozen=True)
class Cancel:
    """Forget the flight's Interest (superseded, or the transfer is over)."""
    flight: Flight


Action = Union[Send, Cancel]


class PathEstimates(Protocol):
    """What the other exchanges read of a path its owner measures (a FetchPath: the
    subscriber's gap and tail waits, the collect's lifetimes)."""

    @property
    def reorder_floor(self) -> float: ...           # how late an in-order segment may come
    @property
    def min_rtt(self) -> float | None: ...          # the smallest round trip seen
    def srtt(self) -> float: ...                    # smoothed round trip, 0 before a sample
    def bounded(self, wait: float) -> float: ...    # `wait`, at most a few round trips


# ndnps.client.fetcher.SegmentFetcher, its asyncio adapter, is a subclass
@mypyc_attr(allow_interpreted_subclasses=True)
class FetchPath:
    """What a fetcher's transfers share: the congestion windows (one per producer, each at
    most `window` Interests), the RTO estimator, the smallest round trip seen, the statistics
    and the limits."""

    def __init__(self, window: int = 16, rto: RtoEstimator | None = None, max_tries: int = 8,
                 stats: FetchStats | None = None, max_fast: int = MAX_FAST,
                 reorder_floor: float = REORDER_FLOOR, suppression: float = RETX_INITIAL,
                 suppression_max: float = RETX_MAX, patience: float = PATIENCE,
                 initial_window: float = INITIAL_WINDOW, loss_cuts: bool = LOSS_CUTS) -> None:
        self.windows = Windows(window, initial_window)
        self.loss_cuts = loss_cuts      # a loss RACK detects is a congestion signal too
        self.rto = rto or RtoEstimator(initial=1.0, min_rto=MIN_RTO, max_rto=4.0)
        self.max_tries = max_tries
        self.patience = patience    # s: a segment's least persistence (see SegmentTransfer)
        self.max_fast = max_fast
        self.reorder_floor = reorder_floor
        # the forwarders' retransmission suppression (s): see SUPPRESSION_MARGIN
        self.suppression, self.suppression_max = suppression, suppression_max
        self.stats = stats or FetchStats()
        # smallest round trip seen, held Interests included: some are answered at once, so
        # this approaches the path's RTT even when every Interest may be held
        self.min_rtt: float | None = None
        self._peak = 0.0            # the longest round trip of the last PEAK_WINDOW s
        self._peak_at = -PEAK_WINDOW

    def observe(self, rtt: float, now: float) -> None:
        """A round trip sample (a first try's, not held: Karn)."""
        self.rto.observe(rtt)
        if rtt >= self._peak or now - self._peak_at > PEAK_WINDOW:
            self._peak, self._peak_at = rtt, now

    @property
    def window(self) -> int:
        """The most Interests in flight towards one producer (the congestion window's cap)."""
        return self.windows.maximum

    @window.setter
    def window(self, window: int) -> None:
        self.windows.set_maximum(window)

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
        return min(max(self.rto.base, PEAK_MARGIN * self._peak), self.rto.max_rto)


class SegmentTransfer:
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

    def close(self) -> list[Action]:
        self.closed = True
        self._land_all()
        self.loss_timer = None
        self.nack_retries.clear()
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

    # ---- the end -----------------------------------------------------------------------------------

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


def judged_flights(flights: dict[int, Flight], rack: tuple, probe: bool) -> list[Flight]:
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
