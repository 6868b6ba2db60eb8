"""The NDN base both the forwarder and the apps stand on: TLV primitives, stream framing and
where an LpPacket's Fragment lies (tlv), the fixed-shape packet codecs — Interest, Data, Nack,
LpPacket — that decode only what forwarding needs (packet) and write what the apps send
(encoders), NDNLPv2 link reliability, sans-I/O (reliability) with a timer adapter given its
event loop (reliable_link), the RTO estimator with its bounded backoff (rto), NFD's defaults
that both sides keep to (nfd) and the protocol's marker components (markers), NDNLPv2
fragmentation (fragmentation), congestion marks (congestion) and batched datagram I/O
(datagrams); native keeps the compiled build (made at install) honest. Nothing here imports
asyncio or python-ndn, nor anything above it: `import ndnps.forwarder.pipelines` loads this
and the forwarder, nothing more of ndnps."""

from .native import guard

# the modules on the per-packet path, compiled with mypyc at install (setup.py, ndnps.ndn.native)
HOT_MODULES = ("ndnps.ndn.tlv", "ndnps.ndn.packet", "ndnps.ndn.encoders", "ndnps.ndn.rto",
               "ndnps.ndn.reliability", "ndnps.ndn.reliable_link", "ndnps.ndn.markers",
               "ndnps.ndn.nfd", "ndnps.ndn.fragmentation", "ndnps.ndn.congestion",
               "ndnps.ndn.summable", "ndnps.ndn.aggregation")
COMPILED = guard(HOT_MODULES)
