"""Longest-prefix match over names keyed by raw bytes.

A name's k-component prefix is a byte prefix of its TLV-VALUE (see tlv.component_offsets), so
a plain dict keyed by bytes is the table; tracking which prefix depths are present means a
lookup tries only those depths, deepest first.
"""
from __future__ import annotations

from bisect import insort
from collections import Counter
from typing import Generic, Iterator, TypeVar

V = TypeVar("V")


class PrefixTable(Generic[V]):
    def __init__(self, max_depth: int = 32) -> None:
        self.max_depth = max_depth
        self._entries: dict[bytes, V] = {}
        self._depth_of: dict[bytes, int] = {}
        self._depth_count: Counter[int] = Counter()
        self._depths_desc: list[int] = []   # distinct depths present, deepest first (negated)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, prefix: bytes) -> bool:
        return prefix in self._entries

    def get(self, prefix: bytes) -> V | None:
        return self._entries.get(prefix)

    def items(self) -> Iterator[tuple[bytes, V]]:
        return iter(list(self._entries.items()))

    def insert(self, prefix: bytes, depth: int, value: V) -> None:
        """Add or replace; `depth` is the prefix's number of components."""
        if depth > self.max_depth:
            raise ValueError(f"prefix deeper than {self.max_depth} components")
        if prefix not in self._entries:
            self._depth_of[prefix] = depth
            if self._depth_count[depth] == 0:
                insort(self._depths_desc, -depth)
            self._depth_count[depth] += 1
        self._entries[prefix] = value

    def remove(self, prefix: bytes) -> V | None:
        value = self._entries.pop(prefix, None)
        if value is not None:
            depth = self._depth_of.pop(prefix)
            self._depth_count[depth] -= 1
            if self._depth_count[depth] == 0:
                del self._depth_count[depth]
                self._depths_desc.remove(-depth)
        return value

    def longest_match(self, name: bytes, offsets: list[int]) -> tuple[bytes, V] | None:
        """Deepest entry that is a prefix of `name` (whose component end offsets are given)."""
        n = len(offsets)
        entries = self._entries
        for neg in self._depths_desc:
            k = -neg
            if k > n:
                continue
            key = name[:offsets[k - 1]] if k else b""
            value = entries.get(key)
            if value is not None:
                return key, value
        return None

