"""Persistent PIT: prefix (e.g. /<ps>/<train>) -> downstream faces that asked for pushes.

Soft state: each face in an entry expires unless an `*insert*` Interest refreshes it. Bounded:
entries in total, faces per entry, entries per face, inserts per face per second; whatever
would exceed a bound is refused and the caller counts it.
"""
from __future__ import annotations

from enum import Enum

from .prefix_table import PrefixTable


class InsertResult(Enum):
    ADDED = "added"
    REFRESHED = "refreshed"
    TABLE_FULL = "ppit_table_full"
    ENTRY_FULL = "ppit_entry_full"
    FACE_QUOTA = "ppit_face_quota"
    RATE_LIMITED = "ppit_rate_limited"
    TOO_DEEP = "ppit_too_deep"

    @property
    def accepted(self) -> bool:
        return self in (InsertResult.ADDED, InsertResult.REFRESHED)


class PersistentEntry:
    __slots__ = ("prefix", "faces")

    def __init__(self, prefix: bytes) -> None:
        self.prefix = prefix
        self.faces: dict[int, float] = {}     # face id -> expiry (monotonic seconds)


class _TokenBucket:
    __slots__ = ("tokens", "stamp")

    def __init__(self, burst: float, now: float) -> None:
        self.tokens = burst
        self.stamp = now


class PersistentPit:
    def __init__(self, lifetime: float = 60.0, max_entries: int = 4096,
                 max_faces_per_entry: int = 1024, max_entries_per_face: int = 64,
                 inserts_per_face_per_s: float = 50.0) -> None:
        self.lifetime = lifetime
        self.max_entries = max_entries
        self.max_faces_per_entry = max_faces_per_entry
        self.max_entries_per_face = max_entries_per_face
        self.rate = inserts_per_face_per_s
        self.burst = max(1.0, inserts_per_face_per_s)   # below 1/s a bucket must still fill to 1
        self._table: PrefixTable[PersistentEntry] = PrefixTable()
        self._per_face: dict[int, set[bytes]] = {}
        self._buckets: dict[int, _TokenBucket] = {}

    def __len__(self) -> int:
        return len(self._table)

    def entries(self) -> list[PersistentEntry]:
        return [e for _, e in self._table.items()]

    def insert(self, prefix: bytes, depth: int, face: int, now: float) -> InsertResult:
        if depth > self._table.max_depth:
            return InsertResult.TOO_DEEP
        if not self._take_token(face, now):
            return InsertResult.RATE_LIMITED
        entry = self._table.get(prefix)
        if entry is not None and face in entry.faces:
            entry.faces[face] = now + self.lifetime
            return InsertResult.REFRESHED
        if entry is None and len(self._table) >= self.max_entries:
            return InsertResult.TABLE_FULL
        if entry is not None and len(entry.faces) >= self.max_faces_per_entry:
            return InsertResult.ENTRY_FULL
        mine = self._per_face.setdefault(face, set())
        if len(mine) >= self.max_entries_per_face:
            return InsertResult.FACE_QUOTA
        if entry is None:
            entry = PersistentEntry(prefix)
            self._table.insert(prefix, depth, entry)
        entry.faces[face] = now + self.lifetime
        mine.add(prefix)
        return InsertResult.ADDED

    def _take_token(self, face: int, now: float) -> bool:
        bucket = self._buckets.get(face)
        if bucket is None:
            bucket = self._buckets[face] = _TokenBucket(self.burst, now)
        bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.stamp) * self.rate)
        bucket.stamp = now
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True

    def remove(self, prefix: bytes, face: int) -> bool:
        entry = self._table.get(prefix)
        if entry is None or entry.faces.pop(face, None) is None:
            return False
        self._forget(prefix, face, entry)
        return True

    def _forget(self, prefix: bytes, face: int, entry: PersistentEntry) -> None:
        mine = self._per_face.get(face)
        if mine is not None:
            mine.discard(prefix)
            if not mine:
                del self._per_face[face]
        if not entry.faces:
            self._table.remove(prefix)

    def remove_face(self, face: int) -> None:
        for prefix in list(self._per_face.get(face, ())):
            self.remove(prefix, face)
        self._buckets.pop(face, None)

    def downstreams(self, name: bytes, offsets: list[int], now: float,
                    exact: bool = False) -> list[int]:
        """Unexpired faces of the longest entry that is a prefix of `name` (or, with `exact`,
        of the entry for exactly `name`)."""
        if exact:
            entry = self._table.get(name)
        else:
            hit = self._table.longest_match(name, offsets)
            entry = hit[1] if hit else None
        if entry is None:
            return []
        return [f for f, exp in entry.faces.items() if exp > now]

    def expire(self, now: float) -> int:
        n = 0
        for prefix, entry in self._table.items():
            for face in [f for f, exp in entry.faces.items() if exp <= now]:
                del entry.faces[face]
                self._forget(prefix, face, entry)
                n += 1
        return n
