"""Strategy choice: which forwarding strategy applies under which prefix (longest match)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .prefix_table import PrefixTable

if TYPE_CHECKING:
    from ..strategy import Strategy


class StrategyChoice:
    def __init__(self, default: "Strategy") -> None:
        self._table: PrefixTable[Strategy] = PrefixTable()
        self._table.insert(b"", 0, default)
        self._root = default            # while it is the only entry, find() needs no lookup

    def set(self, prefix: bytes, depth: int, strategy: "Strategy") -> None:
        self._table.insert(prefix, depth, strategy)
        if not prefix:
            self._root = strategy

    def unset(self, prefix: bytes) -> None:
        if prefix:                      # the root always has a strategy
            self._table.remove(prefix)

    def find(self, name: bytes, offsets: list[int]) -> "Strategy":
        if len(self._table) == 1:
            return self._root
        hit = self._table.longest_match(name, offsets)
        assert hit is not None          # the root entry matches every name
        return hit[1]

    def items(self) -> list[tuple[bytes, "Strategy"]]:
        return list(self._table.items())
