"""Micro-benchmarks of the forwarder's hot path, in process, no sockets (not registered in
bench/__init__: these are for optimisation work, not a headline figure).

    python -m bench.micro.pipeline [--size 8000] [--n 60000] [--repeat 3]

core      Forwarder.on_receive for one Interest (consumer face) and its Data (producer face),
          unique names, with fw.tick() every 10 ms of wall time as the daemon does
stages    the same exchange split into its parts (decode, framing, lookups) with timeit
gc        the core loop with the default GC, with gc.freeze() + a larger gen-0 threshold (as
          the daemon runs), and with the GC off: what the cyclic collector costs over a full
          CS/PIT/DNL
tables    the table structures on the hot path (CS LRU and prefix index, strategy, dead-nonce
          list, PIT match)

    python -m bench.micro.pipeline --trees base=/tmp/fwbase,head=. [--repeat 5]

runs the core loop (gc frozen, as the daemon) of each source tree — a `git worktree` of another
commit, a copy built with `python -m forwarder.compile` — each in its own process, alternating
over --repeat rounds, and prints the median and best µs per exchange of each.
"""
from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ndnps.ndn import packet, tlv  # noqa: E402
from ndnps.forwarder.pipelines import Forwarder  # noqa: E402
from ndnps.forwarder.tables.rib import CHILD_INHERIT, Route  # noqa: E402


def interest_wire(seq: int) -> bytes:
    name = b"\x08\x05bench\x08\x08" + seq.to_bytes(8, "big")
    v = tlv.encode_tlv(7, name) + b"\x0a\x04" + (seq & 0xFFFFFFFF).to_bytes(4, "big") + \
        b"\x0c\x02\x0f\xa0"
    return tlv.encode_tlv(5, v)


def data_wire(seq: int, content: bytes) -> bytes:
    name = b"\x08\x05bench\x08\x08" + seq.to_bytes(8, "big")
    v = tlv.encode_tlv(7, name) + content + b"\x16\x03\x1b\x01\x00\x17\x20" + bytes(32)
    return tlv.encode_tlv(6, v)


def decode_interest(wire: bytes) -> packet.Interest:
    i = packet.decode(wire)
    assert isinstance(i, packet.Interest), i
    return i


def make_forwarder():
    fw = Forwarder()
    c = fw.add_face(True, "fd://1", "unix://x")
    p = fw.add_face(True, "fd://2", "unix://x")
    prefix = b"\x08\x05bench"
    fw.rib.add(prefix, 1, Route(p.id, 0, 0, CHILD_INHERIT, None))
    return fw, c.id, p.id


def core_loop(n: int, size: int, start: int = 0) -> float:
    """µs per exchange through a fresh forwarder (the first n//4 exchanges warm it up)."""
    content = tlv.encode_tlv(0x15, bytes(size))
    fw, c, p = make_forwarder()
    ints = [interest_wire(start + i) for i in range(n)]
    datas = [data_wire(start + i, content) for i in range(n)]
    on_receive = fw.on_receive
    clock = time.monotonic
    warm = n // 4
    next_tick = clock() + 0.01
    t0 = 0.0
    for i in range(n):
        if i == warm:
            t0 = time.process_time()
        a = on_receive(c, ints[i])
        assert a and a[0][0] == p, a
        d = on_receive(p, datas[i])
        assert d and d[0][0] == c, d
        if i & 63 == 0 and clock() >= next_tick:
            fw.tick()
            next_tick += 0.01
    # CPU time, not wall time: other processes on a shared host do not count
    return (time.process_time() - t0) / (n - warm) * 1e6


def stages(size: int) -> dict[str, float]:
    content = tlv.encode_tlv(0x15, bytes(size))
    iw = interest_wire(12345)
    dw = data_wire(12345, content)
    name = decode_interest(iw).name
    fw, c, p = make_forwarder()
    num = 200000
    res = {}

    def t(label, stmt, number=num, **ns):
        res[label] = min(timeit.repeat(stmt, globals={**globals(), **ns}, number=number,
                                       repeat=3)) / number * 1e6

    t("decode Interest", "packet.decode(iw)", iw=iw)
    t("decode Data", "packet.decode(dw)", dw=dw)
    t("outer_length (framing)", "tlv.outer_length(dw, 0)", dw=dw)
    t("component_offsets", "tlv.component_offsets(name)", name=name)
    t("wire_for_forwarding (no HopLimit)", "i.wire_for_forwarding()", i=packet.decode(iw))
    t("fib.lookup", "fw.fib.lookup(name, offs)", fw=fw, name=name,
      offs=tlv.component_offsets(name))
    t("dnl.has", "fw.dnl.has(name, b'abcd', 1.0)", fw=fw, name=name)
    return res


def tables() -> dict[str, float]:
    """Costs of the table structures on the hot path, at the sizes a loaded forwarder has."""
    import itertools
    from collections import OrderedDict

    from sortedcontainers import SortedList

    from ndnps.forwarder import strategy
    res = {}
    num = 100000

    def t(label, fn, number=num):
        res[label] = min(timeit.repeat(fn, number=number, repeat=3)) / number * 1e6

    # the CS's two structures at 32k names: its LRU (every Data), and its sorted index (kept
    # up to date only once a CanBePrefix lookup has happened)
    names = [b"\x08\x05bench\x08\x08" + i.to_bytes(8, "big") for i in range(200000)]
    sl = SortedList(names[:32768])
    od = OrderedDict((n, None) for n in names[:32768])
    it = iter(range(32768, 200000))

    def cs_index():
        i = next(it)
        sl.add(names[i])
        sl.remove(names[i - 32768])
    t("CS prefix index (SortedList) add+remove (32k names)", cs_index, number=40000)
    it2 = iter(range(32768, 200000))

    def cs_lru():
        i = next(it2)
        od[names[i]] = None
        od.popitem(last=False)
    t("CS LRU (OrderedDict) insert+evict (32k names)", cs_lru, number=40000)
    # strategy: eligible next hops
    fw, c, p = make_forwarder()
    i = decode_interest(interest_wire(7))
    offs = tlv.component_offsets(i.name)
    fe = fw.fib.lookup(i.name, offs)
    t("eligible_hops (1 next hop)", lambda: strategy.eligible_hops(fw, fe, i, c))
    t("strategy_choice.find", lambda: fw.strategy_choice.find(i.name, offs))
    # Dead Nonce List at training's rate: 2,000 satisfied Interests per s live 6 s, expired
    # at every 100 ms tick (an OrderedDict since a plain dict emptied from the front made
    # each expiry skip every slot deleted before it: 12 µs per Interest instead of 0.8)
    from ndnps.forwarder.tables.dead_nonce_list import DeadNonceList
    dnl, clock, added = DeadNonceList(lifetime=6.0), [0.0], itertools.count()

    def dnl_op():
        k = next(added)
        dnl.add(names[k % 200000], k.to_bytes(4, "big"), clock[0])
        if k % 200 == 199:
            clock[0] += 0.1
            dnl.expire(clock[0])
    t("DeadNonceList add (+ expire every 200), 12k live", dnl_op, number=120000)
    t("Pit.data_matches (2-component name, no entry)", lambda: fw.pit.data_matches(i.name, offs, 0.0))
    return res


def gc_variants(n: int, size: int, repeat: int) -> dict[str, float]:
    out: dict[str, list[float]] = {"default gc": [], "gc.freeze + threshold(50000)": [],
                                   "gc disabled": []}
    old = gc.get_threshold()
    seq = 0
    for _ in range(repeat):
        for label in out:
            gc.collect()
            if label == "gc disabled":
                gc.disable()
            elif label.startswith("gc.freeze"):
                gc.freeze()
                gc.set_threshold(50000, old[1], old[2])
            try:
                out[label].append(core_loop(n, size, seq))
            finally:
                gc.enable()
                gc.set_threshold(*old)
                gc.unfreeze()
            seq += n
    return {k: statistics.median(v) for k, v in out.items()}


def compare_trees(trees: dict[str, Path], n: int, size: int,
                  repeat: int) -> dict[str, tuple[float, float]]:
    """(median, best) µs per exchange of each tree's core, runs alternating between trees
    (this file's loop, each tree's forwarder)."""
    from bench.common import alternate_trees
    runs = alternate_trees(trees, Path(__file__), ["--core-only", "--n", str(n),
                                                   "--size", str(size)], repeat)
    return {label: (statistics.median(r[-1] for r in x), min(r[-1] for r in x))
            for label, x in runs.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.micro.pipeline")
    ap.add_argument("--size", type=int, default=8000)
    ap.add_argument("--n", type=int, default=60000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--trees", default="", metavar="LABEL=DIR,...",
                    help="compare the core of these source trees (the first is the reference)")
    ap.add_argument("--core-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.core_only:                  # one tree's core, gc as the daemon sets it
        gc.collect()
        gc.freeze()
        gc.set_threshold(50000, 20, 100)
        print(core_loop(args.n, args.size))
        return 0
    if args.trees:
        from bench.common import parse_trees
        trees = parse_trees(args.trees, ap.error)
        res = compare_trees(trees, args.n, args.size, args.repeat)
        ref = next(iter(res.values()))[0]
        print(f"core exchange µs (median and best of {args.repeat}, Data content {args.size} B):")
        for label, (med, best) in res.items():
            print(f"  {med:8.2f}  {best:8.2f}  {label}  x{ref / med:.2f}")
        return 0
    print(f"Data content {args.size} bytes")
    print("stages (µs per call):")
    for k, v in stages(args.size).items():
        print(f"  {v:8.3f}  {k}")
    print("tables (µs per operation):")
    for k, v in tables().items():
        print(f"  {v:8.3f}  {k}")
    print("core exchange (Interest + Data through Forwarder.on_receive), µs, median:")
    for k, v in gc_variants(args.n, args.size, args.repeat).items():
        print(f"  {v:8.2f}  {k}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
