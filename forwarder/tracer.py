"""Per-face packet rates by packet class, written as TSV in the shape of ndnSIM's
L3RateTracer: one row per (face, type, class) per interval.

    Time  Node  FaceId  Type  Class  Packets  Bytes

Type is ndnSIM's (InInterests, OutInterests, InData, OutData, InNacks, OutNacks); Class is the
training exchange the packet belongs to (task, content, insert, collect, distribute, probe,
remove, nack, mgmt, other), decided by a classifier over the raw name.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Callable, TextIO

HEADER = "Time\tNode\tFaceId\tType\tClass\tPackets\tBytes\n"

# A classifier maps (name TLV-VALUE, is_data) to a class; Nacks are always class "nack".
Classifier = Callable[[bytes, bool], str]


class RateTracer:
    def __init__(self, node: str, classify: Classifier, out: TextIO) -> None:
        self.node = node
        self.classify = classify
        self.out = out
        self._counts: dict[tuple[int, str, str], list[int]] = defaultdict(lambda: [0, 0])
        out.write(HEADER)

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
