"""Micro-benchmark of the aggregating forwarder's per-packet work (ndnps/forwarder/aggregator.py
inside ndnps.forwarder.pipelines.Forwarder), in process, no sockets (not registered in
bench/__init__: a cost for the docs, not a headline figure).

    python -m bench.micro.aggregate [--n 2000] [--repeat 5] [--workers 8]

Per `*aggregate*` Interest (a plan of --workers workers, 1997 float32 values a segment):
sign      encode_interest: the PS's (or a parent aggregator's) signed Interest for one segment
          (the training's key as an HMAC object copied per Interest)
verify    signed_plan alone: the name's digest (SHA-256 of the signed elements) and the HMAC
params    what the aggregator read before plans were signed (application_parameters)
genuine   Forwarder.on_receive of a genuine Interest at the aggregator: PIT entry, the check,
          the plan decoded, a slot claimed, a member Interest per worker expressed and
          forwarded (a new segment each)
forged    Forwarder.on_receive of a forgery (the right digest, a wrong HMAC): counted, dropped

Per member Data (each worker's signed gradient segment, answering the aggregator's Interest):
member    Forwarder.on_receive of a member's Data that does not complete its sum: PIT match,
          the HMAC check, the values added to the slot's fixed-point sum
sum       ... of the Data that completes it: that, plus the sum rounded to float32, signed,
          cached and sent to the requester (`sum_extra` = sum - member)
and the parts alone: `check` (verified_content: HMAC-SHA256 over the ~8 KB Data), `add`
(FixedPointSum.add of one worker's float32 segment), `add_exact` (a sub-group's int64 partial
sum), `result` (the float32 rounding) and `sign_sum` (signed_data of the sum).

CPU µs per packet, best of --repeat. The last line printed is one JSON object. Compare two
source trees by running each one's copy of this file (`git worktree add /tmp/base <commit>`,
copy this file there, run it from there).
"""
from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ndnps.forwarder.pipelines import Forwarder  # noqa: E402
from ndnps.forwarder.tables.rib import CHILD_INHERIT, Route  # noqa: E402
from ndnps.ndn import aggregation, encoders, packet, summable  # noqa: E402
from ndnps.ndn.aggregation import AggregatorConfig, Group  # noqa: E402
from ndnps.ndn.conventions import segment_component  # noqa: E402
from ndnps.ndn.tlv import name_from_str  # noqa: E402
from ndnps.protocol import names  # noqa: E402

KEY = b"k" * 32
KEY_NAME = b"".join(bytes(c) for c in names.key("ps", "t1"))
VALUES = 1997                     # a float32 summable segment's values (8000 octets of Content)
VERSION = 3


def agg_name(seg: int) -> bytes:
    return b"".join(bytes(c) for c in names.aggregate("ps", "t1", VERSION, seg))


def interests(n: int, plan: bytes, key: bytes = KEY) -> list[bytes]:
    mac = hmac.new(key, digestmod=hashlib.sha256)
    return [aggregation.encode_interest(agg_name(s), plan, "agg", 60000, mac, KEY_NAME)[0]
            for s in range(1, n + 1)]


def worker_data(worker: str, seg: int, content: bytes) -> bytes:
    """A worker's gradient segment as ndnps.apps.worker signs it (ndnps.client.segments)."""
    mac = hmac.new(KEY, digestmod=hashlib.sha256)

    def sign(blocks) -> bytes:
        h = mac.copy()
        for b in blocks:
            h.update(b)
        return h.digest()

    meta = encoders.encode_meta_info(None, segment_component(seg + 1))
    info = encoders.encode_signature_info(aggregation.HMAC_WITH_SHA256,
                                        names.key("ps", "t1"))
    return encoders.encode_data(names.collect(worker, "ps", "t1", VERSION, seg), meta, content,
                              info, sign)


def cpu_us(fn: Callable[[int], object], n: int) -> float:
    t0 = time.process_time()
    for i in range(n):
        fn(i)
    return (time.process_time() - t0) / n * 1e6


def forwarder(workers: tuple[str, ...]) -> tuple[Forwarder, int, dict[str, int]]:
    fw = Forwarder()
    ps = fw.add_face(True, "fd://1", "unix://x").id
    faces = {}
    for w in workers:
        face = faces[w] = fw.add_face(True, f"fd://{w}", "unix://x").id
        fw.rib.add(name_from_str(f"/{w}"), 1, Route(face, 0, 0, CHILD_INHERIT, None))
    fw.configure_aggregator(AggregatorConfig(name_from_str("/ps/t1"), "agg", KEY, KEY_NAME,
                                             slots=1 << 20, timeout=60.0))
    return fw, ps, faces


def once(n: int, workers: tuple[str, ...]) -> dict[str, float]:
    plan = aggregation.encode_plan(Group("agg", workers))
    mac = hmac.new(KEY, digestmod=hashlib.sha256)
    wires = interests(n, plan)
    decoded = [packet.decode_interest(w, 0, len(w)) for w in wires]
    out = {
        "sign_us": cpu_us(lambda i: aggregation.encode_interest(
            agg_name(i + 1), plan, "agg", 4000, mac, KEY_NAME), n),
        "verify_us": cpu_us(lambda i: aggregation.signed_plan(
            decoded[i].wire, decoded[i].name, mac, KEY_NAME), n),
        "params_us": cpu_us(lambda i: aggregation.application_parameters(decoded[i].wire), n),
    }
    rng = np.random.default_rng(1)
    contents = [summable.encode(rng.standard_normal(VALUES).astype(np.float32) * 1e-3)
                for _ in workers]
    # every member's Data, made before the clock runs: segment s of worker k
    data = [[worker_data(w, s, contents[k]) for k, w in enumerate(workers)]
            for s in range(1, n + 1)]
    fw, ps, faces = forwarder(workers)
    out["genuine_us"] = cpu_us(lambda i: fw.on_receive(ps, wires[i]), n)
    agg = fw.aggregation
    assert agg is not None and agg.counters.member_interests == len(workers) * n
    last = len(workers) - 1
    members = [(faces[w], data[s][k]) for s in range(n) for k, w in enumerate(workers[:-1])]
    out["member_us"] = cpu_us(lambda i: fw.on_receive(*members[i]), len(members))
    answers = fw.counters.out_data
    out["sum_us"] = cpu_us(lambda i: fw.on_receive(faces[workers[last]], data[i][last]), n)
    assert agg.counters.answered == n and agg.counters.rejected == 0, agg.counters
    assert fw.counters.out_data - answers == n
    out["sum_extra_us"] = out["sum_us"] - out["member_us"]
    forged = interests(n, plan, b"not the key")
    fw, ps, _ = forwarder(workers)
    out["forged_us"] = cpu_us(lambda i: fw.on_receive(ps, forged[i]), n)
    assert fw.aggregation is not None and fw.aggregation.counters.unauthorised == n
    # the parts alone
    one = data[0][0]
    out["check_us"] = cpu_us(lambda i: aggregation.verified_content(one, mac), n)
    acc = summable.FixedPointSum(VALUES)
    out["add_us"] = cpu_us(lambda i: acc.add(contents[i % len(contents)]), n)
    try:                            # a sum that adds its members' rows a block at a time
        rows = len(workers)
        batched = [summable.FixedPointSum(VALUES, rows) for _ in range(n // rows or 1)]
        out["add_batched_us"] = cpu_us(lambda i: batched[i // rows].add(
            contents[i % rows]), len(batched) * rows)
    except TypeError:               # a tree without batched sums
        pass
    group = summable.FixedPointSum(VALUES)         # a sub-group's exact partial sum
    for c in contents:
        group.add(c)
    exact = group.result(exact=True)
    acc2 = summable.FixedPointSum(VALUES)
    out["add_exact_us"] = cpu_us(lambda i: acc2.add(exact), min(n, 1000))
    out["result_us"] = cpu_us(lambda i: acc.result(), n)
    total = acc.result()
    out["sign_sum_us"] = cpu_us(lambda i: aggregation.signed_data(agg_name(1), total, mac,
                                                                  KEY_NAME), n)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.micro.aggregate")
    ap.add_argument("--n", type=int, default=2000, help="aggregate Interests per measure (the "
                    "PIT holds 65536 entries; a genuine one takes workers + 1)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--workers", type=int, default=8)
    args = ap.parse_args(argv)
    workers = tuple(f"w{i}" for i in range(1, args.workers + 1))
    if args.n * (len(workers) + 1) > 65536:
        ap.error(f"--n {args.n} x {len(workers) + 1} PIT entries passes the PIT's 65536")
    best: dict[str, float] = {}
    for _ in range(args.repeat):
        for k, v in once(args.n, workers).items():
            best[k] = min(best.get(k, v), v)
    print(f"CPU µs per packet, best of {args.repeat} x {args.n} ({len(workers)} workers):")
    for k, v in best.items():
        print(f"  {v:8.2f}  {k}")
    print(f"  the check is {best['verify_us'] / best['genuine_us']:.1%} of a genuine "
          f"Interest's handling at the aggregator")
    print(json.dumps({k: round(v, 3) for k, v in best.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
