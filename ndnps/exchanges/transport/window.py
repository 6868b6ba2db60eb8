"""A consumer's congestion window over Interests, sans-I/O: AIMD with conservative window
adaptation, as ndncatchunks' AIMD pipeline and ndn-cxx's SegmentFetcher (after RFC 5681's slow
start and congestion avoidance), for the fetches of ndnps.exchanges.transport.fetch.

* **Growth** on each new Data: slow start (+1) below ``ssthresh``, then additive increase
  (+1/cwnd, one Interest per round trip), up to ``maximum`` (training.window).  Only while
  the window is used (RFC 9002 §7.8, Linux's cwnd-limited test): at least half of it in flight
  when the Data came; a PS collecting a 3-segment gradient every version would otherwise open
  its window to the maximum without ever having probed the path at that rate.
* **Decrease** (×BETA, not below MIN_WINDOW) on a congestion signal: a Data that carries an
  NDNLPv2 CongestionMark, a loss (RACK's, or an RTO's; not a held Interest waiting for its
  producer), a Nack with reason Congestion (ndn-cxx treats it as a timeout): which ones,
  ndnps.exchanges.transport.fetch decides.
* **At most once per round trip** (conservative window adaptation): each decrease opens a new
  epoch; an Interest carries the epoch it was sent in, and a signal from one sent before the
  last decrease is ignored — it reports the queue the decrease has already answered.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from typing import Hashable

# Interests in flight at the start: ndncatchunks' and ndn-cxx's default; it is also RFC 9002's
# initial window (max(2 segments, 14,720 bytes)) for our 8.8 KB segments.  A larger one costs
# every consumer of a shared bottleneck at once: 16 workers fetching their content start with
# 32 segments (282 KB) in flight, where a 100 Mbit/s LAN holds ~2 of them.
INITIAL_WINDOW = 2.0
MIN_WINDOW = 1.0    # TCP's loss window: below a segment in flight, only pacing would help
# ndn-cxx's MIN_SSTHRESH: after a cut from a window of 1 or 2, slow start takes it back to 2
MIN_SSTHRESH = 2.0
BETA = 0.5          # multiplicative decrease (RFC 5681; ndncatchunks --aimd-beta)
MAX_FLOWS = 1024    # windows a path keeps (one per producer); idle ones go first


class CongestionWindow:
    """Interests one consumer may have in flight towards one producer.  `in_flight` counts
    what the transfers sharing it have out (they call `sent` and `landed`); `epoch` counts the
    decreases, for conservative adaptation."""

    def __init__(self, maximum: int, initial: float = INITIAL_WINDOW) -> None:
        if maximum < 1 or initial < MIN_WINDOW:
            raise ValueError("need maximum >= 1 and initial >= MIN_WINDOW")
        self.initial = initial
        self.maximum = maximum
        self.cwnd = float(min(initial, maximum))
        self.ssthresh = math.inf
        self.in_flight = 0
        self.epoch = 0

    @property
    def room(self) -> int:
        """Interests that may be sent now."""
        return max(0, int(self.cwnd) - self.in_flight)

    def set_maximum(self, maximum: int) -> None:
        if maximum < 1:
            raise ValueError("window must be >= 1")
        self.maximum = maximum
        self.cwnd = min(self.cwnd, maximum)

    def sent(self) -> int:
        """An Interest left: the epoch it carries."""
        self.in_flight += 1
        return self.epoch

    def landed(self) -> None:
        """An Interest is no longer in flight (answered, expired, superseded, cancelled)."""
        self.in_flight -= 1
        assert self.in_flight >= 0, "an Interest landed twice"

    def on_data(self, epoch: int, marked: bool) -> bool:
        """A new Data for an Interest sent in `epoch` (after `landed`); whether the window
        decreased (a mark)."""
        if marked:
            return self.congested(epoch)
        if 2 * (self.in_flight + 1) >= self.cwnd:   # else the window was not the limit
            step = 1.0 if self.cwnd < self.ssthresh else 1.0 / self.cwnd
            self.cwnd = min(self.cwnd + step, float(self.maximum))
        return False

    def congested(self, epoch: int) -> bool:
        """A congestion signal from an Interest sent in `epoch`: the window decreases unless it
        already did since that Interest left.  Whether it did."""
        if epoch < self.epoch:
            return False
        self.ssthresh = max(self.cwnd * BETA, MIN_SSTHRESH)
        self.cwnd = max(self.cwnd * BETA, MIN_WINDOW)
        self.epoch += 1
        return True

    def restart(self) -> None:
        """The producer is back after an outage: the timeouts while it was gone said nothing
        about the path, so the window starts afresh (or keeps what it has, if more)."""
        self.cwnd = max(self.cwnd, min(self.initial, self.maximum))
        self.ssthresh = math.inf
        self.epoch += 1             # the outage's expiries still to come are not signals


class Windows:
    """A path's congestion windows, one per producer (a flow key), at most MAX_FLOWS: when
    more are wanted, idle ones (nothing in flight) are forgotten, least recently used first."""

    def __init__(self, maximum: int, initial: float = INITIAL_WINDOW,
                 limit: int = MAX_FLOWS) -> None:
        if maximum < 1:
            raise ValueError("window must be >= 1")
        self.maximum, self.initial, self.limit = maximum, initial, limit
        self._by_flow: OrderedDict[Hashable, CongestionWindow] = OrderedDict()

    def __call__(self, flow: Hashable = None) -> CongestionWindow:
        """The window towards `flow`, made if new."""
        w = self._by_flow.get(flow)
        if w is not None:
            self._by_flow.move_to_end(flow)
            return w
        if len(self._by_flow) >= self.limit:
            idle = [k for k, v in self._by_flow.items() if v.in_flight == 0]
            for k in idle[:len(self._by_flow) - self.limit + 1]:
                del self._by_flow[k]
        w = self._by_flow[flow] = CongestionWindow(self.maximum, self.initial)
        return w

    def __len__(self) -> int:
        return len(self._by_flow)

    def set_maximum(self, maximum: int) -> None:
        """The cap of every window, present and future."""
        if maximum < 1:
            raise ValueError("window must be >= 1")
        self.maximum = maximum
        for w in self._by_flow.values():
            w.set_maximum(maximum)
