"""The programs: compositions of the exchanges (ndnps.exchanges), the client runtime
(ndnps.client), the protocol and the models, one folder each, run as `python -m ndnps.apps.<name>`
(and as the console script `ndnps-<name>`):

    ps          the parameter server (PS) and its parts
    worker      a worker ("GPU") and its parts
    peer        a peer of PS-less training (ring, in-network or BCube all-reduce)
    stage       a pipeline stage: one device of one virtual machine (docs/hetero.md)
    controller  the share controller: jobs sharing an aggregator take it in turns
    common      what several of them share: an app's process (launch), a training's length,
                fetcher and counters (training), the unicast baseline, in-network aggregation's
                asks (aggregate), the share controller's asks (share), and the PS-less parts of
                peers and stages (combine, published, linger)

Nothing imports a program; a program imports no other program, only common
(tests/unit/test_layers.py).
"""
