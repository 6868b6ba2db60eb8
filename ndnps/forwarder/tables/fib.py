"""FIB: name prefix -> next hops (face id -> cost), longest-prefix match."""
from __future__ import annotations

from .prefix_table import PrefixTable


class FibEntry:
    __slots__ = ("prefix", "nexthops", "sorted_hops")

    def __init__(self, prefix: bytes) -> None:
        self.prefix = prefix
        self.nexthops: dict[int, int] = {}       # face id -> cost
        self.sorted_hops: list[tuple[int, int]] = []   # (cost, face id), cheapest first

    def _resort(self) -> None:
        self.sorted_hops = sorted((c, f) for f, c in self.nexthops.items())


class Fib:
    def __init__(self, max_depth: int = 32) -> None:
        self._table: PrefixTable[FibEntry] = PrefixTable(max_depth)

    def __len__(self) -> int:
        return len(self._table)

    @property
    def max_depth(self) -> int:
        return self._table.max_depth

    def set_nexthops(self, prefix: bytes, depth: int, nexthops: dict[int, int]) -> None:
        """Replace the entry's next hops; an empty dict removes the entry."""
        if not nexthops:
            self._table.remove(prefix)
            return
        entry = self._table.get(prefix)
        if entry is None:
            entry = FibEntry(prefix)
            self._table.insert(prefix, depth, entry)
        entry.nexthops = dict(nexthops)
        entry._resort()

    def add_nexthop(self, prefix: bytes, depth: int, face: int, cost: int) -> None:
        entry = self._table.get(prefix)
        hops = dict(entry.nexthops) if entry else {}
        hops[face] = cost
        self.set_nexthops(prefix, depth, hops)

    def find_exact(self, prefix: bytes) -> FibEntry | None:
        return self._table.get(prefix)

    def lookup(self, name: bytes, offsets: list[int]) -> FibEntry | None:
        hit = self._table.longest_match(name, offsets)
        return hit[1] if hit else None

    def entries(self) -> list[FibEntry]:
        return [e for _, e in self._table.items()]
