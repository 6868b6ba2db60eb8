"""Benchmarks: each prints figures measured side by side in one run and one JSON line last.

Registry: benchmark name -> module with `main(argv: list[str] | None) -> int` (accepting
`--quick`) and `rows(section) -> [(measure, figure, target, verdict)]` for the table of
`python -m bench`. Add a benchmark by writing bench/<name>.py with both and listing it here.
"""
from __future__ import annotations

BENCHMARKS: dict[str, str] = {
    "forwarder": "bench.forwarder",     # exchanges/s through the forwarder vs a byte relay
    "push": "bench.push",               # PS bytes out per version / model bytes, N = 2..32
    "tree": "bench.tree",               # link bytes on the tree vs the multicast minimum
    "iteration": "bench.iteration",     # sync iteration vs TCP PS, compute, transfer
    "loss": "bench.loss",               # iteration time at 0-10% loss, probes vs retx
    "scaling": "bench.scaling",         # PS egress and iteration time as N grows to 32
    "faults": "bench.faults",           # faults injected -> outcome, fuzzing, bad input
    "bottleneck": "bench.bottleneck",   # a tbf-limited link, ndnps vs the TCP PS
    "ina": "bench.ina",                 # in-network aggregation, placement, bandwidth
    "collectives": "bench.collectives", # PS-less all-reduce (ring, ina, BCube) vs the PS
    "sharing": "bench.sharing",         # jobs sharing one aggregator in turns
    "hetero": "bench.hetero",           # pipeline stages split by device speed
    "ndntools": "bench.ndntools",       # ndncatchunks through ndnps vs through NFD 24.07
    "cpu": "bench.cpu",                 # CPU per packet per hop and role, syscalls, copies
    "agreement": "bench.agreement",     # the simulator against the real runs, case by case
    "scale": "bench.scale",             # simulated: fat-tree PS to 1,024, ring vs BCube, J jobs
}
