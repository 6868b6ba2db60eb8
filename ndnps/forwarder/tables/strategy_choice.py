"""Strategy choice: which forwarding strategy applies under which prefix (longest match).

The table holds whatever the forwarder chooses by (its strategies, strategy.py) and imports
none of them: the strategies stand above the tables, never the other way round.
"""
from __future__ import annotations

from typing import Generic, TypeVar

from .prefix_table import PrefixTable

S = TypeVar("S")


class StrategyChoice(Generic[S]):
    def __init__(self, default: S) -> None:
        self._table: PrefixTable[S] = PrefixTable()
        self._table.insert(b"", 0, default)
        self.root = default             # the root prefix's strategy
        self.single = True              # the root is the only entry: find() needs no lookup

    def set(self, prefix: bytes, depth: int, strategy: S) -> None:
        self._table.insert(prefix, depth, strategy)
        if not prefix:
            self.root = strategy
        self.single = len(self._table) == 1

    def unset(self, prefix: bytes) -> None:
        if prefix:                      # the root always has a strategy
            self._table.remove(prefix)
            self.single = len(self._table) == 1

    def find(self, name: bytes, offsets: list[int]) -> S:
        if self.single:
            return self.root
        hit = self._table.longest_match(name, offsets)
        assert hit is not None          # the root entry matches every name
        return hit[1]

    def items(self) -> list[tuple[bytes, S]]:
        return list(self._table.items())
