"""Micro-benchmark of what checking an `*aggregate*` plan's signature costs the forwarder
(forwarder/aggregator.py calling ndnps.ndn.aggregation.signed_plan), in process, no sockets
(not registered in bench/__init__: a cost for the docs, not a headline figure).

    python -m bench.micro.aggregate [--n 5000] [--repeat 5]

sign      encode_interest: the PS's (or a parent aggregator's) signed Interest for one segment
          (the plan of 8 workers, the training's key as an HMAC object copied per Interest)
verify    signed_plan alone: the name's digest (SHA-256 of the signed elements) and the HMAC
params    what the aggregator read before plans were signed (application_parameters)
genuine   Forwarder.on_receive of a genuine Interest at the aggregator: PIT entry, the check,
          the plan decoded, a slot claimed, 8 member Interests expressed (a new segment each)
forged    Forwarder.on_receive of a forgery (the right digest, a wrong HMAC): counted, dropped

CPU µs per Interest, best of --repeat. The last line printed is one JSON object.
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

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from forwarder.pipelines import Forwarder  # noqa: E402
from forwarder.tables.rib import CHILD_INHERIT, Route  # noqa: E402
from ndnps.ndn import aggregation, packet  # noqa: E402
from ndnps.ndn.aggregation import AggregatorConfig, Group  # noqa: E402
from ndnps.ndn.tlv import name_from_str  # noqa: E402
from ndnps.protocol import names  # noqa: E402

KEY = b"k" * 32
KEY_NAME = b"".join(bytes(c) for c in names.key("ps", "t1"))
WORKERS = tuple(f"w{i}" for i in range(1, 9))
PLAN = aggregation.encode_plan(Group("agg", WORKERS))


def agg_name(seg: int) -> bytes:
    return b"".join(bytes(c) for c in names.aggregate("ps", "t1", 3, seg))


def interests(n: int, key: bytes = KEY) -> list[bytes]:
    mac = hmac.new(key, digestmod=hashlib.sha256)
    return [aggregation.encode_interest(agg_name(s), PLAN, "agg", 4000, mac, KEY_NAME)[0]
            for s in range(1, n + 1)]


def cpu_us(fn: Callable[[int], object], n: int) -> float:
    t0 = time.process_time()
    for i in range(n):
        fn(i)
    return (time.process_time() - t0) / n * 1e6


def forwarder() -> tuple[Forwarder, int]:
    fw = Forwarder()
    ps = fw.add_face(True, "fd://1", "unix://x").id
    for w in WORKERS:
        face = fw.add_face(True, f"fd://{w}", "unix://x").id
        fw.rib.add(name_from_str(f"/{w}"), 1, Route(face, 0, 0, CHILD_INHERIT, None))
    fw.configure_aggregator(AggregatorConfig(name_from_str("/ps/t1"), "agg", KEY, KEY_NAME,
                                             slots=1 << 20, timeout=60.0))
    return fw, ps


def once(n: int) -> dict[str, float]:
    mac = hmac.new(KEY, digestmod=hashlib.sha256)
    wires = interests(n)
    decoded = [packet.decode_interest(w, 0, len(w)) for w in wires]
    out = {
        "sign_us": cpu_us(lambda i: aggregation.encode_interest(
            agg_name(i + 1), PLAN, "agg", 4000, mac, KEY_NAME), n),
        "verify_us": cpu_us(lambda i: aggregation.signed_plan(
            decoded[i].wire, decoded[i].name, mac, KEY_NAME), n),
        "params_us": cpu_us(lambda i: aggregation.application_parameters(decoded[i].wire), n),
    }
    fw, ps = forwarder()
    out["genuine_us"] = cpu_us(lambda i: fw.on_receive(ps, wires[i]), n)
    assert fw.aggregation is not None and fw.aggregation.counters.member_interests == 8 * n
    forged = interests(n, b"not the key")
    fw, ps = forwarder()
    out["forged_us"] = cpu_us(lambda i: fw.on_receive(ps, forged[i]), n)
    assert fw.aggregation is not None and fw.aggregation.counters.unauthorised == n
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.micro.aggregate")
    ap.add_argument("--n", type=int, default=5000, help="Interests per measure (<= 7000: "
                    "the PIT holds 65536 entries, a genuine one takes 9)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    best: dict[str, float] = {}
    for _ in range(args.repeat):
        for k, v in once(args.n).items():
            best[k] = min(best.get(k, v), v)
    print(f"CPU µs per Interest, best of {args.repeat} x {args.n}:")
    for k, v in best.items():
        print(f"  {v:8.2f}  {k}")
    print(f"  the check is {best['verify_us'] / best['genuine_us']:.1%} of a genuine "
          f"Interest's handling at the aggregator")
    print(json.dumps({k: round(v, 3) for k, v in best.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
