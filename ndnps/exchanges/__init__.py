"""The apps' exchanges as sans-I/O state machines (aioquic's and h11's style): each takes
events and a `now`, returns what to send or fetch, and says when it next wants to be woken;
it imports no asyncio and does no I/O, so every rule is a unit test with a fake clock.  The
apps drive them with thin asyncio adapters over ndnps.client (the worker's receiver drives the
Subscriber, the PS's roster the Membership, its serving the Publisher, its loops the update rule).
One subpackage per concern:

    transport    moving an object's segments: fetching them windowed with loss recovery
                 (fetch, its path and flights, loss detection, the congestion window), pushed
                 versions (publisher, subscriber, the push's rate), the buffers they share;
                 the per-packet part, compiled with mypyc at install (its HOT_MODULES)
    ps           the PS's protocol: when to collect and how long an Interest is held
                 (collector), the workers' state table (membership), the update rule (update)
    collectives  PS-less all-reduce: the ring's and BCube's schedules, one peer's side
    sharing      time-division sharing of the aggregators: the decision rule, the agreement of
                 a job's nodes
    pipeline     pipeline-parallel training: the 1F1B schedule and simulator, one stage's work

transport stands on nothing else of the exchanges; ps on transport (a path's estimates); the
other three on none of them (tests/unit/test_layers.py: no cycle between subpackages).
"""
