"""PIT: pending Interests keyed by (name, CanBePrefix, MustBeFresh), with in- and out-records.

Entries are grouped by name so a Data finds its matches with one dict lookup per prefix of its
name. Expiry is lazy: entries wait in 100 ms buckets (a heap orders the buckets, not the
entries) drained by `expire()`, and lookups ignore entries whose deadline has passed. An entry
leaves its bucket when it is erased, so a satisfied entry and its records are freed at once
rather than kept ~InterestLifetime by the bucket (which made the GC rescan them).
"""
from __future__ import annotations

import heapq
from typing import Final, Iterator

from ndnps.ndn.packet import Interest
from ndnps.ndn.tlv import digest_component, implicit_digest


_BUCKETS_PER_S: Final = 10


class InRecord:
    __slots__ = ("face", "nonce", "expires", "pit_token", "interest")

    def __init__(self, face: int, interest: Interest, expires: float) -> None:
        self.face = face
        self.nonce = interest.nonce
        self.expires = expires
        self.pit_token = interest.pit_token
        self.interest = interest


class OutRecord:
    __slots__ = ("face", "nonce", "expires", "last_sent", "nack_reason")

    def __init__(self, face: int, nonce: bytes, now: float, expires: float) -> None:
        self.face = face
        self.nonce = nonce
        self.last_sent = now
        self.expires = expires
        self.nack_reason: int | None = None


class PitEntry:
    __slots__ = ("name", "can_be_prefix", "must_be_fresh", "in_records", "out_records",
                 "expires", "retx_interval", "erased", "bucket", "digest", "satisfied")

    def __init__(self, interest: Interest) -> None:
        self.name = interest.name
        self.can_be_prefix = interest.can_be_prefix
        self.must_be_fresh = interest.must_be_fresh
        self.in_records: dict[int, InRecord] = {}
        self.out_records: dict[int, OutRecord] = {}
        self.expires = 0.0
        self.retx_interval = 0.0     # best-route retransmission suppression state
        self.erased = False
        self.bucket = 0              # the expiry bucket it is filed in, 0: none
        self.digest = False          # the name ends in an implicit digest (a full name)
        self.satisfied = False       # a Data came and its strategy held the entry (NFD's
                                     # isSatisfied): it counts as satisfied when it goes

    @property
    def key(self) -> tuple[bool, bool]:
        return self.can_be_prefix, self.must_be_fresh

    def interest(self) -> Interest:
        """A representative Interest: the most recent in-record's."""
        return next(reversed(self.in_records.values())).interest

    def has_unexpired_out_records(self, now: float) -> bool:
        for o in self.out_records.values():     # a loop: no generator per call
            if o.expires > now and o.nack_reason is None:
                return True
        return False


def _selectors(can_be_prefix: bool, must_be_fresh: bool) -> int:
    """The entry's key within its name's group: a small int (cached, unlike a tuple)."""
    return (2 if can_be_prefix else 0) + (1 if must_be_fresh else 0)


class PitFull(Exception):
    """The PIT is at capacity; the Interest is dropped and counted."""


class Pit:
    def __init__(self, max_entries: int = 65536) -> None:
        self.max_entries = max_entries
        self._by_name: dict[bytes, dict[int, PitEntry]] = {}
        self._count = 0
        self._cbp_count = 0            # CanBePrefix entries: none means exact matching only
        self._digest_count = 0         # names ending in an implicit digest: none, no hashing
        self._buckets: dict[int, dict[PitEntry, None]] = {}    # key -> entries (in order)
        self._bucket_heap: list[int] = []

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[PitEntry]:
        for group in list(self._by_name.values()):
            yield from list(group.values())

    def find(self, interest: Interest) -> PitEntry | None:
        group = self._by_name.get(interest.name)
        if not group:
            return None
        return group.get(_selectors(interest.can_be_prefix, interest.must_be_fresh))

    def insert(self, interest: Interest) -> tuple[PitEntry, bool]:
        """Find or create the entry for this Interest; returns (entry, created)."""
        group = self._by_name.get(interest.name)
        key = _selectors(interest.can_be_prefix, interest.must_be_fresh)
        if group is not None:
            entry = group.get(key)
            if entry is not None:
                return entry, False
        if self._count >= self.max_entries:
            raise PitFull()
        entry = PitEntry(interest)
        if group is None:
            group = self._by_name[interest.name] = {}
        group[key] = entry
        self._count += 1
        self._cbp_count += entry.can_be_prefix
        entry.digest = implicit_digest(entry.name) is not None
        self._digest_count += entry.digest
        return entry, True

    def set_expiry(self, entry: PitEntry, expires: float) -> None:
        entry.expires = expires
        key = int(expires * _BUCKETS_PER_S) + 1       # the bucket is due once it has passed
        if key == entry.bucket:
            return
        self._unfile(entry)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = {}
            heapq.heappush(self._bucket_heap, key)
        bucket[entry] = None
        entry.bucket = key

    def _unfile(self, entry: PitEntry) -> None:
        if entry.bucket:
            bucket = self._buckets.get(entry.bucket)
            if bucket is not None:
                bucket.pop(entry, None)
            entry.bucket = 0

    def erase(self, entry: PitEntry) -> None:
        if entry.erased:
            return
        entry.erased = True
        self._unfile(entry)
        group = self._by_name.get(entry.name)
        key = _selectors(entry.can_be_prefix, entry.must_be_fresh)
        if group is not None and group.get(key) is entry:
            del group[key]
            if not group:
                del self._by_name[entry.name]
            self._count -= 1
            self._cbp_count -= entry.can_be_prefix
            self._digest_count -= entry.digest

    def data_matches(self, name: bytes, offsets: list[int], now: float,
                     wire: bytes = b"") -> list[PitEntry]:
        """Unexpired entries a Data of this name satisfies: exact-name entries, entries for
        its full name (the name plus the implicit digest of `wire`, its Data TLV: hashed only
        while such entries exist), and CanBePrefix entries for every prefix of the name."""
        matches: list[PitEntry] = []
        by_name = self._by_name
        exact = (name, name + digest_component(wire)) if self._digest_count and wire else (name,)
        for key in exact:
            group = by_name.get(key)
            if group:
                for e in group.values():
                    if e.expires > now:
                        matches.append(e)
        if not self._cbp_count:
            return matches
        for end in offsets[:-1]:
            group = by_name.get(name[:end])
            if group:
                for e in group.values():
                    if e.can_be_prefix and e.expires > now:
                        matches.append(e)
        return matches

    def expire(self, now: float) -> list[PitEntry]:
        """Erase and return entries whose deadline has passed."""
        gone: list[PitEntry] = []
        heap = self._bucket_heap
        due = int(now * _BUCKETS_PER_S)
        while heap and heap[0] <= due:
            bucket = self._buckets.pop(heapq.heappop(heap), None)
            if bucket:
                for entry in bucket:
                    entry.bucket = 0            # its bucket is gone already
                    self.erase(entry)
                    gone.append(entry)
        current = self._buckets.get(due + 1)    # the bucket `now` falls in: only what is due
        if current:
            for entry in [e for e in current if e.expires <= now]:
                self.erase(entry)               # leaves `current`
                gone.append(entry)
        return gone

    def remove_face(self, face: int) -> None:
        """A face that closed leaves every record; entries left with no downstream go."""
        for entry in list(self):
            entry.out_records.pop(face, None)
            if entry.in_records.pop(face, None) is not None and not entry.in_records:
                self.erase(entry)
