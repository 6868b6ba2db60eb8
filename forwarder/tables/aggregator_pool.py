"""Aggregator slots: the memory an aggregating forwarder sums gradient segments in (the `000_…`
method's aggregators, issue 24), sans-I/O.

A fixed number of slots, as a switch's register arrays: a segment's slot is chosen by hashing
(training, segment number), so the forwarder never searches. A slot holding another segment is
*unavailable*: the caller does not wait, the segment falls back (to the PS's edge, or the PS),
and the collision is counted. A slot remembers which contributors have been added (a bitmap),
so a contribution that comes twice — a re-expressed Interest answered again, a retransmission —
is added once. It is freed when its sum is answered, when the next version's `*distribute*`
push of its training goes by (the method's ACK), or at its deadline (a contributor that never
answers: the partial sum is dropped and the caller falls back). What is summed, and how, is the
caller's (`combine(acc, value) -> acc`, acc None at first; ndnps.ndn.summable.FixedPointSum is
meant for it): the pool holds the accumulator and never looks inside it.

Driven by the `*aggregate*` stage, forwarder/aggregator.py.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Final

MAX_CONTRIBUTORS: Final = 256     # per slot: the bitmap's bound
_GOLDEN: Final = 0x9E3779B1       # Knuth's multiplicative hash: consecutive segments spread


@dataclass(frozen=True)
class SlotKey:
    training: bytes               # the training's prefix, /<ps>/<train> (its TLV bytes)
    version: int
    segment: int


@dataclass
class Slot:
    key: SlotKey
    contributors: tuple[str, ...]     # who is expected, in bitmap order
    deadline: float
    received: int = 0                 # bitmap over `contributors`
    acc: Any = None                   # the sum so far (the caller's type)

    @property
    def complete(self) -> bool:
        return self.received == (1 << len(self.contributors)) - 1

    def missing(self) -> list[str]:
        return [c for i, c in enumerate(self.contributors) if not self.received >> i & 1]


@dataclass
class PoolCounters:
    claimed: int = 0
    collisions: int = 0               # a slot held another segment: fell back
    added: int = 0
    duplicates: int = 0               # a contribution already added
    rejected: int = 0                 # not an expected contributor, or no such slot
    completed: int = 0
    released: int = 0                 # answered
    released_by_push: int = 0         # freed by a later version's push (the ACK)
    expired: int = 0                  # deadline passed: partial sum dropped


@dataclass
class AggregatorPool:
    slots: int = 1024
    timeout: float = 2.0              # s a slot may wait for its contributors
    counters: PoolCounters = field(default_factory=PoolCounters)

    def __post_init__(self) -> None:
        if self.slots < 1:
            raise ValueError(f"slots must be >= 1, got {self.slots}")
        if not self.timeout > 0:
            raise ValueError(f"timeout must be > 0, got {self.timeout}")
        self._slots: list[Slot | None] = [None] * self.slots
        self._held: dict[int, Slot] = {}        # the occupied ones: scans walk these only

    def index(self, training: bytes, segment: int) -> int:
        """The slot of a training's segment (the version does not move it: a segment's slot is
        free again by the time the next version's segment comes, or it collides)."""
        return ((segment * _GOLDEN + zlib.crc32(training)) & 0xFFFFFFFF) % self.slots

    def get(self, key: SlotKey) -> Slot | None:
        slot = self._slots[self.index(key.training, key.segment)]
        return slot if slot is not None and slot.key == key else None

    def stale(self, key: SlotKey, now: float) -> Slot | None:
        """The slot `key` would take, when another segment holds it past its deadline: freed
        (expired, as `expire` would) and returned, for the caller to end what it held."""
        i = self.index(key.training, key.segment)
        slot = self._slots[i]
        if slot is None or slot.key == key or slot.deadline > now:
            return None
        self._free(i)
        self.counters.expired += 1
        return slot

    def claim(self, key: SlotKey, contributors: tuple[str, ...], now: float) -> Slot | None:
        """The slot for `key`: its own if it has one already (a re-expressed Interest), a free
        one taken for it, or None when another segment holds it (unavailable: fall back)."""
        if not 1 <= len(contributors) <= MAX_CONTRIBUTORS or \
                len(set(contributors)) != len(contributors):
            raise ValueError(f"need 1 to {MAX_CONTRIBUTORS} distinct contributors")
        i = self.index(key.training, key.segment)
        slot = self._slots[i]
        if slot is not None and slot.key == key:
            return slot
        if slot is not None and slot.deadline > now:
            self.counters.collisions += 1
            return None
        if slot is not None:                       # expired but not yet collected: reuse
            self.counters.expired += 1
        slot = self._slots[i] = self._held[i] = Slot(key, tuple(contributors),
                                                     now + self.timeout)
        self.counters.claimed += 1
        return slot

    def add(self, key: SlotKey, contributors: tuple[str, ...], value: Any,
            combine: Callable[[Any, Any], Any]) -> Slot | None:
        """Add `value`, the sum of `contributors`' (one worker's, or a sub-group's partial
        sum), to `key`'s sum, once: a value covering any contributor already added is a
        repeat, counted and ignored. Returns the slot (check `complete`), or None when there
        is no such slot or a contributor is not one it expects (rejected)."""
        slot = self.get(key)
        if slot is None or not contributors or \
                any(c not in slot.contributors for c in contributors):
            self.counters.rejected += 1
            return None
        bits = 0
        for c in contributors:
            bits |= 1 << slot.contributors.index(c)
        if slot.received & bits:
            self.counters.duplicates += 1
            return slot
        slot.acc = combine(slot.acc, value)        # (None at first) raises: nothing recorded
        slot.received |= bits
        self.counters.added += 1
        if slot.complete:
            self.counters.completed += 1
        return slot

    def release(self, key: SlotKey) -> Slot | None:
        """Free `key`'s slot (its sum was answered)."""
        slot = self.get(key)
        if slot is not None:
            self._free(self.index(key.training, key.segment))
            self.counters.released += 1
        return slot

    def _free(self, i: int) -> None:
        self._slots[i] = None
        self._held.pop(i, None)

    def release_before(self, training: bytes, version: int) -> int:
        """A push of `training`'s `version` went by: free its slots of earlier versions."""
        gone = [i for i, s in self._held.items()
                if s.key.training == training and s.key.version < version]
        for i in gone:
            self._free(i)
        self.counters.released_by_push += len(gone)
        return len(gone)

    def expire(self, now: float) -> list[Slot]:
        """Slots past their deadline, freed: their partial sums are dropped, their segments
        are the caller's to fall back."""
        out = []
        for i in [i for i, s in self._held.items() if s.deadline <= now]:
            out.append(self._held[i])
            self._free(i)
        self.counters.expired += len(out)
        return out

    def next_timer(self) -> float | None:
        """When `expire` has something to do next (None: no slot held)."""
        return min((s.deadline for s in self._held.values()), default=None)

    def __len__(self) -> int:
        return len(self._held)
