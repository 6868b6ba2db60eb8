"""The Content Store against a brute-force model: random inserts, evictions and lookups
(exact and CanBePrefix) agree, whatever state the lazy prefix index is in."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from ndnps.ndn.packet import Data, Interest
from ndnps.forwarder.tables.cs import ContentStore
from ndnps.ndn.tlv import name_from_str

NAMES = ["/a", "/a/b", "/a/b/c", "/a/c", "/b", "/b/a", "/ab", "/a/b/d"]

ops = st.lists(st.tuples(st.sampled_from(["insert", "exact", "prefix"]),
                         st.sampled_from(NAMES)), max_size=60)


@settings(max_examples=300, deadline=None)
@given(ops, st.integers(min_value=1, max_value=5))
def test_cs_matches_a_brute_force_model(operations, capacity):
    cs = ContentStore(max_packets=capacity)
    model: list[bytes] = []              # names, least recently used first
    for op, uri in operations:
        name = name_from_str(uri)
        if op == "insert":
            cs.insert(Data(b"x" + name, name, 0), now=0.0)
            if name in model:
                model.remove(name)
            model.append(name)
            del model[:-capacity]
            continue
        interest = Interest(b"", name, op == "prefix", False, b"1234", 4000, None, -1)
        hit = cs.lookup(interest, now=0.0)
        if op == "exact":
            expected = name if name in model else None
        else:
            under = sorted(n for n in model if n.startswith(name))
            expected = under[0] if under else None
        assert (hit.name if hit else None) == expected
        if expected is not None:
            model.remove(expected)
            model.append(expected)
    assert len(cs) == len(model)
