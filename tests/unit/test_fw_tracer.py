"""The rate tracer's memoized classification gives exactly what the classifier gives, and its
memo stays bounded."""
from __future__ import annotations

import io
import random

from ndn.encoding import Component

from ndnps.forwarder.tracer import RateTracer, shape_key
from ndnps.protocol import names
from ndnps.protocol.names import classify


def raw(n) -> bytes:
    return b"".join(bytes(c) for c in n)


def sample_names() -> list[bytes]:
    rnd = random.Random(7)
    out = []
    for v in (0, 1, 255, 256, 70000, 2**40):
        for s in (0, 9, 300):
            out += [raw(names.distribute("ps", "t1", v, s)), raw(names.collect("g1", "ps", "t1", v, s)),
                    raw(names.params("ps", "t1", "g2", v, s)), raw(names.content("ps", "t1", "g1", s))]
    out += [raw(names.task("g1", "ps", "t1")), raw(names.insert("ps", "t1")),
            raw(names.confirm("ps", "t1")), raw(names.remove("ps", "t1"))]
    gen = lambda b: bytes(Component.from_bytes(b))  # noqa: E731
    seg = bytes(Component.from_segment(3))
    ver = bytes(Component.from_version(3))
    odd = [
        gen(b"localhost") + gen(b"nfd") + gen(b"rib") + gen(b"register") + bytes(40),
        gen(b"a"), b"", gen(b"\xff\xfe") + gen(b"ps") + gen(b"t"),        # not UTF-8
        gen(b"") + gen(b"ps") + gen(b"t"),                                # empty ID
        gen(b"*insert*") + gen(b"*remove*") + gen(b"t"),                  # marker as ID
        gen(b"g") + gen(b"ps") + gen(b"t") + seg + ver,                   # types swapped
        gen(b"g") + gen(b"ps") + gen(b"t") + ver + seg + seg,
        gen(b"ps") + gen(b"t") + gen(b"g") + gen(b"params") + ver + seg,
        gen(b"ps") + gen(b"t") + gen(b"g") + gen(b"paramz") + ver + seg,
        ver + gen(b"ps") + gen(b"t"), seg,
        bytes(Component.from_bytes(b"x" * 300)) + gen(b"t"),              # 3-byte LENGTH
        gen(b"g")[:-1] + b"\x05",                                         # truncated
        b"\x08", b"\x36\x09\x00",                                         # truncated
        bytes([0xFD, 0x01, 0x00, 0x01, 0x00]) + gen(b"t"),                # 3-byte TYPE
    ]
    out += odd
    for _ in range(300):                          # random typed tails after random IDs
        parts = [gen(rnd.choice([b"ps", b"t1", b"g1", b"*distribute*", b"params"]))
                 for _ in range(rnd.randint(1, 4))]
        parts += [rnd.choice([seg, ver, bytes(Component.from_segment(rnd.randrange(1 << 20)))])
                  for _ in range(rnd.randint(0, 3))]
        rnd.shuffle(parts)
        out.append(b"".join(parts))
    return out


def test_memo_gives_the_classifiers_answer():
    tr = RateTracer("n", classify, io.StringIO())
    for _ in range(2):                            # second pass answered from the memo
        for n in sample_names():
            for is_data in (False, True):
                assert tr.classify(n, is_data) == classify(n, is_data), (n, is_data)


def test_every_segment_of_a_training_shares_one_shape():
    keys = {shape_key(raw(names.distribute("ps", "t1", v, s)))
            for v in range(50) for s in (0, 1, 300, 70000)}
    assert len(keys) == 1
    assert shape_key(raw(names.distribute("ps", "t2", 1, 1))) not in keys


def test_memo_is_bounded_and_still_right():
    calls = []

    def counting(name: bytes, is_data: bool) -> str:
        calls.append(name)
        return classify(name, is_data)

    tr = RateTracer("n", counting, io.StringIO(), memo_entries=8)
    gpus = [raw(names.task(f"g{i}", "ps", "t")) for i in range(100)]
    for n in gpus:
        assert tr.classify(n, False) == "task"
    assert all(len(m) <= 8 for m in tr._memo)
    d = raw(names.distribute("ps", "t", 1, 1))
    tr.classify(d, True)
    n_calls = len(calls)
    for v in range(2, 50):
        assert tr.classify(raw(names.distribute("ps", "t", v, 7)), True) == "distribute"
    assert len(calls) == n_calls                  # answered from the memo


def test_counts_and_rows():
    out = io.StringIO()
    tr = RateTracer("fw", classify, out)
    d = raw(names.distribute("ps", "t", 1, 1))
    tr.data(300, True, d, 100)
    tr.data(301, False, d, 100, "probe")
    tr.interest(301, True, d, 40)
    tr.nack(300, False, 20)
    tr.flush(1.0)
    rows = out.getvalue().splitlines()[1:]
    assert rows == ["1.000\tfw\t300\tInData\tdistribute\t1\t100",
                    "1.000\tfw\t300\tOutNacks\tnack\t1\t20",
                    "1.000\tfw\t301\tInInterests\tprobe\t1\t40",
                    "1.000\tfw\t301\tOutData\tprobe\t1\t100"]
