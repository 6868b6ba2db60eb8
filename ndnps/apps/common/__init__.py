"""What several programs share (which ones: each module says):

    launch     an app's process: logging, the event loop, the face to the forwarder, signals,
               exit codes (every program)
    training   a training's failure, length, fetcher and the PS's counters (ps, peer, stage)
    unicast    the unicast baseline, both sides: the PS's copies, a worker's fetch (ps, worker)
    aggregate  in-network aggregation's sums asked of the network, and the fallback (ps, peer)
    share      a job node's asks of the share controller, and their answers' content (ps, peer,
               controller)
    combine    PS-less combining of a version's gradients: ring/BCube all-reduce, in the network,
               shared round by round (peer; stage: its stage's ring)
    published  what a PS-less app serves, held until made (peer, stage)
    linger     leaving a PS-less training once the others are done (peer, stage)
"""
