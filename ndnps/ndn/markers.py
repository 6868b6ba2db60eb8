"""The protocol's marker components: the one place that says what they are.

A marker is the first, generic component of a name. `*insert*` adds the Interest's in-face to
the persistent entry of the rest of the name, `*remove*` takes it out, `*distribute*` names Data
multicast along such an entry, `*aggregate*` Interests whose Data is a sum made in the network
(reserved for in-network aggregation). A name with a marker is routed by the name without it,
so only `/<ps>` and `/<gpu>` need routes. As values (`INSERT`...) and as encoded components
(`INSERT_COMPONENT`...: the TLV a name's wire starts with).
"""
from __future__ import annotations

from typing import Final

from .tlv import DATA, GENERIC_COMPONENT, NAME, DecodeError, encode_tlv, lp_fragment, read_tl

INSERT: Final = b"*insert*"
DISTRIBUTE: Final = b"*distribute*"
REMOVE: Final = b"*remove*"
AGGREGATE: Final = b"*aggregate*"
MARKERS: Final = (INSERT, DISTRIBUTE, REMOVE, AGGREGATE)

INSERT_COMPONENT: Final = encode_tlv(GENERIC_COMPONENT, INSERT)
DISTRIBUTE_COMPONENT: Final = encode_tlv(GENERIC_COMPONENT, DISTRIBUTE)
REMOVE_COMPONENT: Final = encode_tlv(GENERIC_COMPONENT, REMOVE)
AGGREGATE_COMPONENT: Final = encode_tlv(GENERIC_COMPONENT, AGGREGATE)
MARKER_COMPONENTS: Final = (INSERT_COMPONENT, DISTRIBUTE_COMPONENT, REMOVE_COMPONENT,
                            AGGREGATE_COMPONENT)

# Every marker's value starts with "*": a name whose third byte is not one has no marker, so
# most names skip the startswith() tests.
MARKER_BYTE: Final = b"*"
assert all(m[2:3] == MARKER_BYTE for m in MARKER_COMPONENTS)


def is_pushed_data(wire: bytes | memoryview) -> bool:
    """Whether `wire` is a Data pushed along persistent entries: a Data (bare, or an
    LpPacket's Fragment) whose name starts with `*distribute*`.  False for anything
    malformed."""
    try:
        _, _, start, end = lp_fragment(wire)
        typ, off, end = read_tl(wire, start, end)
        if typ != DATA:
            return False
        typ, off, end = read_tl(wire, off, end)
        return typ == NAME and wire[off:off + len(DISTRIBUTE_COMPONENT)] == DISTRIBUTE_COMPONENT
    except (DecodeError, IndexError):
        return False
