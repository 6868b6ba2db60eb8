"""Property-based fuzzing (hypothesis) of the forwarder core and management through the same
harness as the long atheris run (fuzz/): random and mutated packets of every kind, on local and
non-local faces, with time passing; no exception escapes and every table stays in bounds."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies as st

from fuzz.harness import Harness, seeds

SEEDS = seeds()


@st.composite
def mutated(draw) -> bytes:
    wire = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "length"]))
        if not wire:
            break
        at = draw(st.integers(0, len(wire) - 1))
        if kind == "flip":
            wire[at] = draw(st.integers(0, 255))
        elif kind == "cut":
            del wire[at:at + draw(st.integers(1, 16))]
        elif kind == "insert":
            wire[at:at] = draw(st.binary(min_size=1, max_size=8))
        else:                                       # huge or 3-byte TLV-LENGTH forms
            wire[at:at + 1] = draw(st.sampled_from([b"\xfd\xff\xff", b"\xfe\xff\xff\xff\xff",
                                                    b"\xff" + b"\xff" * 8, b"\xfd\x00\x05"]))
    return bytes(wire)


packets = st.lists(st.tuples(st.integers(0, 255), st.one_of(mutated(), st.binary(max_size=64))),
                   min_size=1, max_size=40)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(packets)
def test_no_exception_escapes_and_tables_stay_bounded(inputs):
    h = Harness()
    for selector, wire in inputs:
        h.feed(selector, wire)


def test_every_seed_is_accepted_as_is():
    h = Harness()
    for i, wire in enumerate(SEEDS):
        h.feed(i, wire)
    assert h.fw.counters.in_interests + h.fw.counters.in_data > 0


def test_deeply_nested_tlv_is_dropped_not_recursed():
    nested = b""
    for _ in range(2000):                        # an LpPacket inside an LpPacket ... 2000 deep
        nested = b"\x64\xfd" + len(nested).to_bytes(2, "big") + nested if len(nested) < 0xfff0 \
            else nested
    h = Harness()
    h.feed(0, nested[:8800])
    assert sum(f.counters.drops["malformed"] for f in h.fw.faces) == 1
