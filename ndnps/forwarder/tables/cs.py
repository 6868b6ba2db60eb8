"""Content Store: LRU bounded by packets and bytes; exact-name, full-name (implicit digest)
and CanBePrefix matching; MustBeFresh honoured through FreshnessPeriod.

Names are kept in a sorted index of their raw bytes: every name under a prefix P sorts in the
contiguous range starting at P, so a CanBePrefix lookup is a short range scan. Only those
lookups need the index, so it is built at the first one and from then on brought up to date
lazily, when one happens; a forwarder that never sees one never pays for it.
"""
from __future__ import annotations

from typing import Final

from collections import OrderedDict

from sortedcontainers import SortedList

from ndnps.ndn.packet import Data, Interest
from ndnps.ndn.tlv import IMPLICIT_DIGEST, digest_component, implicit_digest

# A CanBePrefix lookup gives up after this many candidates that are all stale.
_MAX_PREFIX_SCAN: Final = 64


# An entry is a plain tuple (wire, FreshnessPeriod ms, fresh until), not an object holding the
# Data: the cyclic GC untracks tuples of bytes and numbers, so a full store costs collections
# nothing (an object pair per cached packet made GC ~20% of the forwarder's CPU).
CsEntry = tuple[bytes, int, float]


class ContentStore:
    def __init__(self, max_packets: int = 65536, max_bytes: int = 256 << 20) -> None:
        self.max_packets = max_packets
        self.max_bytes = max_bytes
        self._entries: OrderedDict[bytes, CsEntry] = OrderedDict()
        self._index = SortedList()
        self._indexed = False                       # no CanBePrefix lookup yet: no index
        self._index_adds: set[bytes] = set()        # in the store, not yet in the index
        self._index_removes: set[bytes] = set()     # in the index, no longer in the store
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._entries)

    def holds(self, name: bytes, wire: bytes) -> bool:
        """Whether this very packet, the same name and bytes, is held (no LRU update, no hit
        counted)."""
        entry = self._entries.get(name)
        return entry is not None and entry[0] == wire

    def insert(self, data: Data, now: float) -> None:
        if self.max_packets <= 0 or len(data.wire) > self.max_bytes:
            return
        name = data.name
        entries = self._entries
        old = entries.pop(name, None)
        if old is not None:
            self.bytes -= len(old[0])
        elif not self._indexed:
            pass
        elif name in self._index_removes:
            self._index_removes.discard(name)
        else:
            self._index_adds.add(name)
        entries[name] = (data.wire, data.freshness, now + data.freshness / 1000.0)
        self.bytes += len(data.wire)
        while len(entries) > self.max_packets or self.bytes > self.max_bytes:
            self._evict_oldest()

    def _evict_oldest(self) -> None:
        name, entry = self._entries.popitem(last=False)
        if not self._indexed:
            pass
        elif name in self._index_adds:
            self._index_adds.discard(name)
        else:
            self._index_removes.add(name)
        self.bytes -= len(entry[0])
        self.evictions += 1

    def lookup(self, interest: Interest, now: float) -> Data | None:
        iname = interest.name
        name: bytes | None = iname
        if not interest.can_be_prefix and not (len(iname) >= 34 and iname[-34] == IMPLICIT_DIGEST):
            # the usual case (no CanBePrefix, no implicit digest), without _find's call
            entry = self._entries.get(iname)
            if entry is None or (interest.must_be_fresh and entry[2] <= now):
                name = None
        else:
            name = self._find(interest, now)
        if name is None:
            self.misses += 1
            return None
        self.hits += 1
        self._entries.move_to_end(name)
        wire, freshness, _ = self._entries[name]
        return Data(wire, name, freshness)

    def _find(self, interest: Interest, now: float) -> bytes | None:
        """The name of the Data this Interest takes from the store, or None."""
        mbf = interest.must_be_fresh
        digest = implicit_digest(interest.name)
        if digest is not None:
            # a full name: only the Data of that name whose whole TLV hashes to the digest
            # (nothing can be longer, so CanBePrefix changes nothing)
            name = interest.name[:-34]
            entry = self._entries.get(name)
            if entry is not None and (not mbf or entry[2] > now) \
                    and digest_component(entry[0])[2:] == digest:
                return name
            return None
        if not interest.can_be_prefix:
            entry = self._entries.get(interest.name)
            if entry is not None and (not mbf or entry[2] > now):
                return interest.name
            return None
        prefix = interest.name
        self._sync_index()
        for i, name in enumerate(self._index.irange(minimum=prefix)):
            if not name.startswith(prefix) or i >= _MAX_PREFIX_SCAN:
                return None
            if not mbf or self._entries[name][2] > now:
                return name
        return None

    def _sync_index(self) -> None:
        if not self._indexed:
            self._index = SortedList(self._entries)
            self._indexed = True
            return
        if self._index_removes:
            for name in self._index_removes:
                self._index.remove(name)
            self._index_removes.clear()
        if self._index_adds:
            self._index.update(self._index_adds)
            self._index_adds.clear()

    def erase_all(self) -> None:
        self._entries.clear()
        self._index.clear()
        self._index_adds.clear()
        self._index_removes.clear()
        self.bytes = 0
