"""ndnps: Named Data Networking carrying distributed training.

One subpackage per concern; arrows point down only (docs/architecture.md):

    ndn        the NDN base (TLV, packet codecs, NDNLPv2 reliability, RTO, markers): no asyncio,
               no python-ndn; the forwarder and the client both stand on it
    client     the asyncio client runtime on python-ndn: app/face, fetcher, segments, pacer,
               security
    protocol   the training protocol: names, messages, tensor codec, training configuration
    exchanges  sans-I/O state machines the apps are built from
    ml         models, data, optimizers and update rules, the reference trainer
    lab        the experiment runner: scenarios, topology, processes, netns, metrics, report

`python -m ndnps.scenario`, `python -m ndnps.train` and `python -m ndnps.demo` are the commands.
"""
