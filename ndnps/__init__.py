"""ndnps: Named Data Networking carrying distributed training.

One subpackage per concern; arrows point down only (docs/architecture.md, docs/design.md):

    ndn        the NDN base (TLV, packet codecs, NDNLPv2 reliability, RTO, markers, summable
               segments): no asyncio, no python-ndn; the forwarder and the client both stand on it
    client     the asyncio client runtime on the NDN base: app/face, fetcher, segments, pacer,
               security
    protocol   the training protocol: names, messages, tensor codec, training configuration
    exchanges  sans-I/O state machines the apps are built from (fetching, pushes, collects,
               update rules, all-reduce schedules, sharing decisions, pipeline schedules)
    ml         models, data, optimizers, the reference trainer, pipeline stages, emulated devices
    lab        the experiment runner: scenarios, topology, processes, netns, metrics, report
    placement  where in-network aggregation goes: networks, the linear program, greedy search
    planner    pipeline stages for devices of different speeds: profile, split, plan
    forwarder  the forwarder (`python -m ndnps.forwarder`, alias `python -m forwarder`): its
               sans-I/O core and its I/O, on the NDN base alone
    apps       the programs: ps, worker, peer, stage, controller (`python -m ndnps.apps.<name>`)
               and what they share (apps/common); nothing imports them
    scenario   `python -m ndnps.scenario`: run a whole experiment (ndnps.lab.scenario)
    train      `python -m ndnps.train`: the single-process reference trainer (ndnps.ml.train)
    demo       `python -m ndnps.demo`: one Interest/Data exchange through a forwarder

`python -m ndnps.scenario`, `python -m ndnps.train`, `python -m ndnps.demo`,
`python -m ndnps.placement`, `python -m ndnps.planner`, `python -m ndnps.forwarder` and
`python -m ndnps.apps.<name>` are the commands. This package imports none of its subpackages:
`import ndnps.forwarder.pipelines` loads the NDN base and the forwarder alone.
"""
