"""Micro-benchmarks of the faces' per-packet Python, in process, no sockets (not registered in
bench/__init__: for optimisation work, not a headline figure).

    python -m bench.micro.faces [--repeat 5]
    python -m bench.micro.faces --trees before=/tmp/old,after=. [--repeat 5]

link      NDNLPv2 link reliability (ndnps/ndn/reliability.py, reliable_link.py): one
          training version's traffic over a link, as the `--where link` loss benchmark has it
          — 51 pushed 8000-byte Data and 204 collect Interests one way, 204 8000-byte gradient
          Data back — through two ReliableLinks on uvloop, each datagram received on its own
          (as a UDP face does) and a loop turn every 4 packets; µs per datagram, wrapped at one
          end and received at the other, Acks and timers included.
framing   a stream face's framing (StreamFace.data_received, handing each read's packets to a
          daemon that only counts them): 8000-byte Data in reads of 64 KB and 256 KB, each read
          made fresh as a socket's is (that copy measured apart and subtracted); µs per packet.

Best of --repeat rounds. With --trees each tree runs in its own process (its packages first on
sys.path, this file's loops), alternating between trees round by round. The last line printed
is one JSON object: {label: {"link_us": ..., "framing_64k_us": ..., "framing_256k_us": ...}}.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ndnps.ndn.tlv import encode_tlv  # noqa: E402  (this tree's, or --trees's)

CONTENT = b"x" * 8000
PUSHED, COLLECTS = 51, 204
MEASURES = ("link_us", "framing_64k_us", "framing_256k_us")


def _name(seq: int) -> bytes:
    return encode_tlv(0x07, b"\x08\x05bench\x32\x02" + (seq % 65536).to_bytes(2, "big"))


def interest_wire(seq: int) -> bytes:
    return encode_tlv(0x05, _name(seq) + b"\x0a\x04" + seq.to_bytes(4, "big")
                      + b"\x0c\x02\x0f\xa0")


def data_wire(seq: int, content: bytes) -> bytes:
    """A Data with a DigestSha256-shaped signature (the value not computed: nothing checks it)."""
    return encode_tlv(0x06, _name(seq) + encode_tlv(0x15, content)
                      + b"\x16\x03\x1b\x01\x00" + encode_tlv(0x17, bytes(32)))


async def _link_rounds(versions: int) -> float:
    try:
        from ndnps.ndn.reliable_link import ReliableLink
    except ImportError:                 # a --trees tree from before reliability.py was split
        from ndnps.ndn.reliability import ReliableLink  # type: ignore[attr-defined,no-redef]
    pushed = [data_wire(i, CONTENT) for i in range(PUSHED)]
    collects = [interest_wire(i) for i in range(COLLECTS)]
    gradients = [data_wire(10_000 + i, CONTENT) for i in range(COLLECTS)]
    to_leaf: list[bytes] = []
    to_root: list[bytes] = []
    loop = asyncio.get_running_loop()
    root, leaf = ReliableLink(to_leaf.append, loop), ReliableLink(to_root.append, loop)

    async def version() -> int:
        n = 0
        for packets, sender, wires, receiver in ((pushed, root, to_leaf, leaf),
                                                  (collects, root, to_leaf, leaf),
                                                  (gradients, leaf, to_root, root)):
            for p in packets:
                sender.send(p)
                for w in wires:
                    receiver.receive_many([w])      # a datagram, a read of its own
                wires.clear()
                n += 1
                if n % 4 == 0:
                    await asyncio.sleep(0)          # a loop turn: the links' timers follow
        return n

    await version()                                 # warm up: RTT samples, Acks flowing
    t0 = time.perf_counter()
    datagrams = 0
    for _ in range(versions):
        datagrams += await version()
    elapsed = time.perf_counter() - t0
    root.close()
    leaf.close()
    return elapsed / datagrams * 1e6


def link_us(versions: int = 10) -> float:
    import uvloop
    return uvloop.run(_link_rounds(versions))


class _Owner:
    """The daemon as a stream face sees it, counting what it is handed."""
    packets = 0

    def receive_batch(self, face: object, wires: list[bytes]) -> None:
        self.packets += len(wires)


def framing_us(read_size: int, packets: int = 4000) -> float:
    from ndnps.forwarder.faces.stream import StreamFace
    stream = data_wire(0, CONTENT) * packets
    reads = [stream[i:i + read_size] for i in range(0, len(stream), read_size)]

    def fresh(r: bytes) -> bytes:
        return bytes(memoryview(r))                 # a new object, as a socket read is

    t0 = time.perf_counter()
    for r in reads:
        fresh(r)
    copying = time.perf_counter() - t0
    owner = _Owner()
    face = StreamFace(owner, "unix")                # type: ignore[arg-type]
    t0 = time.perf_counter()
    for r in reads:
        face.data_received(fresh(r))
    elapsed = time.perf_counter() - t0
    assert owner.packets == packets
    return max(0.0, elapsed - copying) / packets * 1e6


def measure_once() -> dict[str, float]:
    return dict(zip(MEASURES, (link_us(), framing_us(1 << 16), framing_us(1 << 18))))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.micro.faces")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--trees", default="", metavar="LABEL=DIR,...",
                    help="compare the faces of these source trees (the first is the reference)")
    ap.add_argument("--once", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.once:                       # one round, for alternate_trees: figures on the last line
        print(" ".join(f"{v:.4f}" for v in measure_once().values()))
        return 0
    if args.trees:
        from bench.common import alternate_trees, parse_trees
        trees = parse_trees(args.trees, ap.error)
        runs = alternate_trees(trees, Path(__file__), ["--once"], args.repeat)
    else:
        runs = {"this tree": [list(measure_once().values()) for _ in range(args.repeat)]}
    best = {label: {m: min(r[i] for r in rounds) for i, m in enumerate(MEASURES)}
            for label, rounds in runs.items()}
    print(f"best of {args.repeat} rounds, µs: link per datagram (wrap + receive); framing per "
          f"8000-byte packet (64 KB, 256 KB reads)")
    for label, b in best.items():
        print(f"  {label:>12}: link {b['link_us']:6.2f}   framing {b['framing_64k_us']:5.2f} "
              f"{b['framing_256k_us']:5.2f}")
    print(json.dumps({label: {m: round(v, 3) for m, v in b.items()} for label, b in best.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
