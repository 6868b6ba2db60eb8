"""What a fetcher's transfers share (ndnps.exchanges.transport.fetch): the congestion windows
(ndnps.exchanges.transport.window), the RTO estimator and the bound it puts on every backoff, the
smallest and the longest recent round trip, the statistics and the limits.

*The window* is shared by every transfer towards the same producer (``flow``: a worker's
fetches from its PS share one; the PS has one per worker, as their paths and queues differ,
and a congested worker's branch must not slow the collect from the others).  A transfer
always may have one Interest out, whatever the window: one transfer's Interest held by its
producer for seconds (a probe waiting for a push) never blocks another, and each transfer's
own answers then let it refill (no scheduler: transfers sharing a window take its room in
turn as their answers come).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ndnps.ndn._mypyc import mypyc_attr
from ndnps.ndn.nfd import RETX_INITIAL, RETX_MAX
from ndnps.ndn.rto import BACKOFF_RTTS, RtoEstimator

from .window import INITIAL_WINDOW, Windows

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
