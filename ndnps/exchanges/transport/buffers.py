"""The exchanges' bounded buffers: an object's segments as they arrive, in any order,
duplicated or not at all (Assembly: says which are missing), and the last few objects by key
(Recent: versions, steps)."""
from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Assembly:
    """One object's segments as they arrive.  Conflicting FinalBlockIds or a segment beyond the
    final one mark the assembly `corrupt` (the caller drops it and refetches)."""

    def __init__(self, key) -> None:
        self.key = key
        # as given: a received segment's Content is a view of its packet, and the join in
        # blob() is its one copy
        self.parts: dict[int, bytes | memoryview] = {}
        self.final: int | None = None
        self.highest = -1
        self.corrupt = False
        self.duplicates = 0

    def add(self, number: int, content: bytes | memoryview, final: int | None) -> bool:
        """Store one segment; False if it was a duplicate or is inconsistent."""
        if final is not None:
            if self.final is not None and final != self.final:
                self.corrupt = True
                return False
            self.final = final
        if number < 0 or (self.final is not None and (number > self.final or self.highest > self.final)):
            self.corrupt = True
            return False
        if number in self.parts:
            self.duplicates += 1
            return False
        self.parts[number] = content
        self.highest = max(self.highest, number)
        return True

    @property
    def complete(self) -> bool:
        return self.final is not None and len(self.parts) == self.final + 1

    def missing(self) -> list[int]:
        """Missing segments among those known to exist (all up to FinalBlockId when known)."""
        top = self.final if self.final is not None else self.highest
        return [s for s in range(top + 1) if s not in self.parts]

    def holes(self) -> list[int]:
        """Missing segments below the highest one received (a gap, not a tail)."""
        return [s for s in range(self.highest) if s not in self.parts]

    @property
    def has_gap(self) -> bool:
        """A segment missing below the highest one: every part is within [0, highest] and
        the highest is in, so counting them says it (asked per segment received: a scan of
        the range made a 500-segment object cost 125,000 steps)."""
        return len(self.parts) <= self.highest

    def blob(self) -> bytes:
        if not self.complete or self.final is None:
            raise ValueError("assembly not complete")
        return b"".join(self.parts[s] for s in range(self.final + 1))


class Recent(Generic[K, V]):
    """The last `keep` items by insertion; the oldest goes first."""

    def __init__(self, keep: int) -> None:
        self.keep = max(1, keep)
        self._items: OrderedDict[K, V] = OrderedDict()

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.keep:
            self._items.popitem(last=False)

    def get(self, key: K) -> V | None:
        return self._items.get(key)

    def pop(self, key: K) -> V | None:
        return self._items.pop(key, None)

    def __contains__(self, key: K) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def keys(self) -> list[K]:
        return list(self._items)

    def values(self) -> list[V]:
        return list(self._items.values())
