"""Moving an object's segments, sans-I/O: the per-packet part of the exchanges.

    buffers     Assembly (an object's segments as they arrive), Recent (the last few by key)
    window      a consumer's congestion window over Interests (AIMD), one per producer
    fetch       one object's segments from one or many producers: window, RACK, tail loss
                probe, per-segment RTO, bounded tries (ndnps.client.fetcher is its adapter):
                SegmentTransfer, the events — what the owner wants, the answers — on
      sender    its flights: sent as the window allows, each segment's lifetime and backoff,
                the losses judged and sent again
      loss      loss detection's rules: RACK's and the tail probe's flights, the probe's wait,
                a Nack's retry, which losses are congestion
      path      what a fetcher's transfers share: windows, RTO and its bound, statistics
      flight    what a transfer and its owner hand each other: flights, actions, segments
    subscriber  versions pushed by any producer: assembled, holes and quiet tails found, the
                probe timer; says which segments to fetch
    publisher   a producer's recent versions: kept for probes, answered by segment
    push_rate   the rate of a producer's pushes, from its consumers' reports
"""

from ndnps.ndn import COMPILED as _BASE_COMPILED
from ndnps.ndn.native import guard

# the exchanges a packet goes through, compiled with mypyc at install with the base's (setup.py)
HOT_MODULES = ("ndnps.exchanges.transport.buffers", "ndnps.exchanges.transport.window",
               "ndnps.exchanges.transport.flight", "ndnps.exchanges.transport.path",
               "ndnps.exchanges.transport.loss", "ndnps.exchanges.transport.sender",
               "ndnps.exchanges.transport.fetch", "ndnps.exchanges.transport.subscriber",
               "ndnps.exchanges.transport.publisher")
COMPILED = guard(HOT_MODULES) and _BASE_COMPILED
