"""Strategy choice: which forwarding strategy applies under which prefix (longest match)."""
from __future__ import annotations

from .prefix_table import PrefixTable


class StrategyChoice:
    def __init__(self, default: object) -> None:
        self._table: PrefixTable[object] = PrefixTable()
        self._table.insert(b"", 0, default)

    def set(self, prefix: bytes, depth: int, strategy: object) -> None:
        self._table.insert(prefix, depth, strategy)

    def unset(self, prefix: bytes) -> None:
        if prefix:                      # the root always has a strategy
            self._table.remove(prefix)

    def find(self, name: bytes, offsets: list[int]) -> object:
        return self._table.longest_match(name, offsets)[1]

    def items(self) -> list[tuple[bytes, object]]:
        return list(self._table.items())
