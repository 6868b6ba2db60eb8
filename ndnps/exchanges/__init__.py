"""The apps' exchanges as sans-I/O state machines (aioquic's and h11's style): each takes
events and a `now`, returns what to send or fetch, and says when it next wants to be woken;
it imports no asyncio and does no I/O, so every rule is a unit test with a fake clock.  The
apps drive them with thin asyncio adapters over ndnps.client (the worker's receiver drives the
Subscriber, the PS's roster the Membership, its serving the Publisher, its loops the update rule).

    buffers     Assembly (an object's segments as they arrive), Recent (the last few by key)
    subscriber  versions pushed by any producer: assembled, holes and quiet tails found, the
                probe timer; says which segments to fetch
    publisher   a producer's recent versions: kept for probes, answered by segment
    fetch       one object's segments from one or many producers: window, RACK, tail loss
                probe, per-segment RTO, bounded tries (ndnps.client.fetcher is its adapter)
    collector   when to ask a producer for its object and how long an Interest may be held
                (the finish-time estimate)
    membership  the workers of a training: assignment, loss, rejoin as one state table
    update      the rule that turns gradients into the next parameters (sync average, async
                apply), pluggable as ps-lite's set_request_handle
"""

from ndnps.ndn import COMPILED as _BASE_COMPILED
from ndnps.ndn.native import guard

# the exchanges a packet goes through, compiled with mypyc at install with the base's (setup.py)
HOT_MODULES = ("ndnps.exchanges.buffers", "ndnps.exchanges.window", "ndnps.exchanges.fetch",
               "ndnps.exchanges.subscriber", "ndnps.exchanges.publisher")
COMPILED = guard(HOT_MODULES) and _BASE_COMPILED
