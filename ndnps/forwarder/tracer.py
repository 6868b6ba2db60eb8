"""Per-face packet rates by packet class, written as TSV in the shape of ndnSIM's
L3RateTracer: one row per (face, type, class) per interval.

    Time  Node  FaceId  Type  Class  Packets  Bytes

Type is ndnSIM's (InInterests, OutInterests, InData, OutData, InNacks, OutNacks); Class is the
training exchange the packet belongs to (task, content, insert, collect, distribute, probe,
remove, nack, mgmt, other), decided by a classifier over the raw name.

Classifying every packet from scratch cost ~7 µs, a sixth of the forwarder's CPU when tracing
(bench/HISTORY.md), so classes are memoized by the name's *shape*: the name with the value of
every typed (non-generic) component left out. Every segment of every version of one training
shares a shape, so a handful of entries serve the whole run.
"""
from __future__ import annotations

import importlib
from collections import defaultdict
from typing import Callable, Final, TextIO

from ndnps.ndn.markers import (AGGREGATE_COMPONENT, DISTRIBUTE_COMPONENT, INSERT_COMPONENT,
                               REMOVE_COMPONENT)
from ndnps.ndn.tlv import GENERIC_COMPONENT, encode_tlv

HEADER: Final = "Time\tNode\tFaceId\tType\tClass\tPackets\tBytes\n"

# A classifier maps (name TLV-VALUE, is_data) to a class; Nacks are always class "nack".
# RateTracer memoizes it by shape_key, so it must read typed components (versions, segments,
# digests ...) by their TLV-TYPE only, never by their value.  The forwarder knows the markers
# alone (marker_classes); an application's classes come from a function of its own, named in
# the configuration (`[trace] classifier = "module:function"`: the scenario runner names the
# training protocol's, ndnps.protocol.names.classify), so the forwarder imports nothing of
# theirs.
Classifier = Callable[[bytes, bool], str]

_LOCALHOST: Final = encode_tlv(GENERIC_COMPONENT, b"localhost")
_MARKER_CLASSES: Final = ((INSERT_COMPONENT, "insert"), (REMOVE_COMPONENT, "remove"),
                          (AGGREGATE_COMPONENT, "aggregate"))


def marker_classes(name: bytes, is_data: bool) -> str:
    """The classes the forwarder knows by itself: mgmt (/localhost), insert, remove,
    aggregate, distribute (a pushed Data; an Interest for one is a probe), other."""
    if name.startswith(_LOCALHOST):
        return "mgmt"
    if name.startswith(DISTRIBUTE_COMPONENT):
        return "distribute" if is_data else "probe"
    for marker, cls in _MARKER_CLASSES:
        if name.startswith(marker):
            return cls
    return "other"


def load_classifier(spec: str) -> Classifier:
    """The function `module:function` names (raises ValueError saying why it cannot)."""
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise ValueError(f"{spec!r}: expected module:function")
    try:
        found = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"{spec!r}: {e}") from None
    if not callable(found):
        raise ValueError(f"{spec!r}: not a function")
    return found

# Shapes remembered per direction (Interest / Data) before the memo starts afresh: a bound
# against names that never repeat (e.g. management commands, a misbehaving app).
MEMO_ENTRIES: Final = 4096


def shape_key(name: bytes) -> bytes | None:
    """`name` with each typed component reduced to its TLV-TYPE byte; generic components
    (type 8) are kept whole. Unambiguous: a TYPE byte other than 8 is never followed by a
    LENGTH in the key. None for a name this does not read (multi-byte TYPE/LENGTH, truncated):
    such a name is classified without the memo."""
    key = b""
    run = 0                         # start of the current run of generic components
    off = 0
    end = len(name)
    while off < end:
        if off + 1 >= end:
            return None
        t = name[off]
        length = name[off + 1]
        if t >= 253 or length >= 253:
            return None
        nxt = off + 2 + length
        if nxt > end:
            return None
        if t != 8:
            key += name[run:off + 1]
            run = nxt
        off = nxt
    return key + name[run:] if key else name


class RateTracer:
    def __init__(self, node: str, classify: Classifier, out: TextIO,
                 memo_entries: int = MEMO_ENTRIES) -> None:
        self.node = node
        self._classify = classify
        self.out = out
        self.memo_entries = memo_entries
        self._memo: tuple[dict[bytes, str], dict[bytes, str]] = ({}, {})
        # The same name object passes twice in a row (in, then out): remember the last one.
        self._last: list[tuple[bytes | None, str]] = [(None, ""), (None, "")]
        self._counts: dict[tuple[int, str, str], list[int]] = defaultdict(lambda: [0, 0])
        out.write(HEADER)

    def classify(self, name: bytes, is_data: bool) -> str:
        last_name, last_cls = self._last[is_data]
        if name is last_name:
            return last_cls
        key = shape_key(name)
        if key is None:
            cls = self._classify(name, is_data)
        else:
            memo = self._memo[is_data]
            found = memo.get(key)
            if found is None:
                if len(memo) >= self.memo_entries:
                    memo.clear()
                found = memo[key] = self._classify(name, is_data)
            cls = found
        self._last[is_data] = (name, cls)
        return cls

    def count(self, face: int, typ: str, cls: str, nbytes: int) -> None:
        c = self._counts[(face, typ, cls)]
        c[0] += 1
        c[1] += nbytes

    def interest(self, face: int, inbound: bool, name: bytes, nbytes: int) -> None:
        self.count(face, "InInterests" if inbound else "OutInterests",
                   self.classify(name, False), nbytes)

    def data(self, face: int, inbound: bool, name: bytes, nbytes: int,
             cls: str | None = None) -> None:
        self.count(face, "InData" if inbound else "OutData",
                   cls or self.classify(name, True), nbytes)

    def nack(self, face: int, inbound: bool, nbytes: int) -> None:
        self.count(face, "InNacks" if inbound else "OutNacks", "nack", nbytes)

    def flush(self, time: float) -> None:
        """Write the rows of the interval that ends at `time` and start a new one."""
        rows = [f"{time:.3f}\t{self.node}\t{face}\t{typ}\t{cls}\t{p}\t{b}\n"
                for (face, typ, cls), (p, b) in sorted(self._counts.items())]
        self.out.writelines(rows)
        self.out.flush()
        self._counts.clear()
