"""Aggregator slots: the memory an aggregating forwarder sums gradient segments in (in-network
aggregation's aggregators, docs/aggregation.md), sans-I/O; one pool per forwarder, shared by the
trainings it sums for (jobs taking turns at it: docs/sharing.md).

A fixed number of slots, as a switch's register arrays: a segment's slot is chosen by hashing
(training, segment number) within its training's *range* of the pool ([first, first + span),
`assign`), so the forwarder never searches. Trainings given the same range share those slots
in time (their rounds, when they meet, compete for them); disjoint ranges split the pool (each
training has slots of its own, ATP-style). A slot holding another segment — of its own training
or another's — is *unavailable*: the caller does not wait, the segment falls back (to the PS's
edge, or the PS), and the collision is counted. A slot remembers which contributors have been
added (a bitmap), so a contribution that comes twice — a re-expressed Interest answered again,
a retransmission — is added once. It is freed when its sum is answered, when the next
version's `*distribute*` push of its training goes by (the push is the acknowledgement), at its
deadline (its training's timeout: a contributor that never answers; the partial sum is dropped
and the caller falls back), or when its training is configured again or removed. What is summed, and
how, is the caller's (`combine(acc, value) -> acc`, acc None at first;
ndnps.ndn.summable.FixedPointSum is meant for it): the pool holds the accumulator and never
looks inside it.

Each training's held slots are kept in claim order, which is deadline order (one timeout per
training, a clock that does not go back): scans walk held slots only, and whether another
training holds a live slot in a range (`overlapping`) is answered from the newest ones. Busy
time (seconds during which at least one slot was held, per training and for the pool) is
accumulated on the held count's transitions 0 -> 1 and 1 -> 0, so every path that frees a slot
takes `now`.

Driven by the `*aggregate*` stage, ndnps/forwarder/aggregator.py.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Final

MAX_CONTRIBUTORS: Final = 1024    # per slot: the bitmap's bound (a plan's workers at most)
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
class Busy:
    """Seconds during which something was held, accumulated on the transitions."""
    total: float = 0.0
    since: float | None = None        # held since then (None: nothing held)

    def start(self, now: float) -> None:
        if self.since is None:
            self.since = now

    def stop(self, now: float) -> None:
        if self.since is not None:
            self.total += max(0.0, now - self.since)
            self.since = None

    def seconds(self, now: float) -> float:
        """The total, with the period still open counted up to `now`."""
        return self.total + (max(0.0, now - self.since) if self.since is not None else 0.0)


@dataclass
class TrainingUse:
    """A training's part of the pool: its range, the slots it holds, what it did with them."""
    first: int
    span: int
    salt: int                          # crc32 of the training: its segments' hash offset
    held: dict[int, Slot] = field(default_factory=dict)   # index -> slot, in claim order
    busy: Busy = field(default_factory=Busy)
    claimed: int = 0
    collisions: int = 0
    # the other trainings whose ranges meet this one's (kept by the pool on every assignment)
    neighbours: list["TrainingUse"] = field(default_factory=list, repr=False, compare=False)

    @property
    def end(self) -> int:
        return self.first + self.span

    def meets(self, other: "TrainingUse") -> bool:
        return self.first < other.end and other.first < self.end


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
    dropped: int = 0                  # its training configured again, or removed


@dataclass
class AggregatorPool:
    slots: int = 1024                 # the pool's size
    timeout: float = 2.0              # s a slot may wait for its contributors (by default)
    counters: PoolCounters = field(default_factory=PoolCounters)

    def __post_init__(self) -> None:
        if self.slots < 1:
            raise ValueError(f"slots must be >= 1, got {self.slots}")
        if not self.timeout > 0:
            raise ValueError(f"timeout must be > 0, got {self.timeout}")
        self._slots: list[Slot | None] = [None] * self.slots
        self._held: dict[int, Slot] = {}        # the occupied ones: scans walk these only
        self._uses: dict[bytes, TrainingUse] = {}
        self.busy = Busy()                      # at least one slot held, whoever's

    # ---- ranges ------------------------------------------------------------------------------

    def assign(self, training: bytes, first: int = 0, span: int | None = None) -> TrainingUse:
        """Hash `training`'s segments over [first, first + span) (span None: the whole pool),
        growing the pool to hold the range. A training assigned again keeps its counts; its
        held slots must be dropped first if the range moves (they would be lost)."""
        span = self.slots - first if span is None else span
        if first < 0 or span < 1:
            raise ValueError(f"bad range: first {first}, span {span}")
        use = self._uses.get(training)
        if use is not None and use.held and (use.first, use.span) != (first, span):
            raise ValueError("the training holds slots: drop them before moving its range")
        if first + span > self.slots:
            self.resize(first + span)
        if use is None:
            use = self._uses[training] = TrainingUse(first, span, zlib.crc32(training))
        use.first, use.span = first, span
        self._link()
        return use

    def unassign(self, training: bytes, now: float) -> list[Slot]:
        """Forget `training`: its slots are dropped (returned), its counts go."""
        gone = self.drop(training, now)
        if self._uses.pop(training, None) is not None:
            self._link()
        return gone

    def use(self, training: bytes) -> TrainingUse | None:
        return self._uses.get(training)

    def resize(self, size: int) -> None:
        """Grow (held slots stay where they are) or shrink the pool; a shrink that would cut a
        held slot or an assigned range is refused."""
        if size < 1:
            raise ValueError(f"slots must be >= 1, got {size}")
        if size < self.slots and (any(i >= size for i in self._held) or
                                  any(u.end > size for u in self._uses.values())):
            raise ValueError(f"cannot shrink the pool to {size}: slots or ranges beyond it")
        del self._slots[size:]
        self._slots.extend([None] * (size - len(self._slots)))
        self.slots = size

    def _link(self) -> None:
        uses = list(self._uses.values())
        for u in uses:
            u.neighbours = [v for v in uses if v is not u and u.meets(v)]

    def _use(self, training: bytes) -> TrainingUse:
        """The training's part; one never assigned gets the whole pool, recorded at its
        first claim so that growing the pool does not move its slots."""
        use = self._uses.get(training)
        return use if use is not None else self.assign(training)

    # ---- slots ------------------------------------------------------------------------------

    def index(self, training: bytes, segment: int) -> int:
        """The slot of a training's segment (the version does not move it: a segment's slot is
        free again by the time the next version's segment comes, or it collides)."""
        use = self._uses.get(training)
        if use is None:
            return _spread(segment, zlib.crc32(training), self.slots)
        return use.first + _spread(segment, use.salt, use.span)

    def get(self, key: SlotKey) -> Slot | None:
        slot = self._slots[self.index(key.training, key.segment)]
        return slot if slot is not None and slot.key == key else None

    def stale(self, key: SlotKey, now: float) -> Slot | None:
        """The slot `key` would take, when another segment (of any training) holds it past its
        deadline: freed (expired, as `expire` would) and returned, for the caller to end what
        it held."""
        i = self.index(key.training, key.segment)
        slot = self._slots[i]
        if slot is None or slot.key == key or slot.deadline > now:
            return None
        self._free(i, now)
        self.counters.expired += 1
        return slot

    def claim(self, key: SlotKey, contributors: tuple[str, ...], now: float,
              timeout: float | None = None) -> Slot | None:
        """The slot for `key`: its own if it has one already (a re-expressed Interest), a free
        one taken for it until now + `timeout` (None: the pool's), or None when another
        segment holds it (unavailable: fall back)."""
        if not 1 <= len(contributors) <= MAX_CONTRIBUTORS or \
                len(set(contributors)) != len(contributors):
            raise ValueError(f"need 1 to {MAX_CONTRIBUTORS} distinct contributors")
        use = self._use(key.training)
        i = use.first + _spread(key.segment, use.salt, use.span)
        slot = self._slots[i]
        if slot is not None and slot.key == key:
            return slot
        if slot is not None and slot.deadline > now:
            self.counters.collisions += 1
            use.collisions += 1
            return None
        if slot is not None:                       # expired but not yet collected: reuse
            self._free(i, now)
            self.counters.expired += 1
        slot = Slot(key, tuple(contributors), now + (self.timeout if timeout is None else timeout))
        if not self._held:
            self.busy.start(now)
        if not use.held:
            use.busy.start(now)
        self._slots[i] = self._held[i] = use.held[i] = slot
        self.counters.claimed += 1
        use.claimed += 1
        return slot

    def overlapping(self, training: bytes, now: float) -> Slot | None:
        """A live slot (deadline not passed) of another training held inside `training`'s
        range, the newest found, or None. Each other training's held slots are walked newest
        first and the walk stops at the first one past its deadline (the older ones are past
        theirs too): one look for a range equal to or inside this one, the time-division
        case; a range that only partly meets this one may walk its live slots outside."""
        use = self._uses.get(training)
        if use is None:
            return None
        for other in use.neighbours:
            for i, slot in reversed(other.held.items()):
                if slot.deadline <= now:
                    break
                if use.first <= i < use.end:
                    return slot
        return None

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

    def release(self, key: SlotKey, now: float) -> Slot | None:
        """Free `key`'s slot (its sum was answered, or abandoned)."""
        slot = self.get(key)
        if slot is not None:
            self._free(self.index(key.training, key.segment), now)
            self.counters.released += 1
        return slot

    def release_before(self, training: bytes, version: int, now: float) -> int:
        """A push of `training`'s `version` went by: free its slots of earlier versions."""
        use = self._uses.get(training)
        if use is None:
            return 0
        gone = [i for i, s in use.held.items() if s.key.version < version]
        for i in gone:
            self._free(i, now)
        self.counters.released_by_push += len(gone)
        return len(gone)

    def drop(self, training: bytes, now: float) -> list[Slot]:
        """Free every slot `training` holds (configured again, or removed); the others'
        stay."""
        use = self._uses.get(training)
        if use is None:
            return []
        gone = list(use.held.items())
        for i, _ in gone:
            self._free(i, now)
        self.counters.dropped += len(gone)
        return [s for _, s in gone]

    def expire(self, now: float) -> list[Slot]:
        """Slots past their deadline, freed: their partial sums are dropped, their segments
        are the caller's to fall back."""
        out = []
        for i in [i for i, s in self._held.items() if s.deadline <= now]:
            out.append(self._held[i])
            self._free(i, now)
        self.counters.expired += len(out)
        return out

    def next_timer(self) -> float | None:
        """When `expire` has something to do next (None: no slot held)."""
        return min((s.deadline for s in self._held.values()), default=None)

    def _free(self, i: int, now: float) -> None:
        slot = self._held.pop(i)
        self._slots[i] = None
        use = self._uses[slot.key.training]
        del use.held[i]
        if not use.held:
            use.busy.stop(now)
        if not self._held:
            self.busy.stop(now)

    def __len__(self) -> int:
        return len(self._held)


def _spread(segment: int, salt: int, span: int) -> int:
    return ((segment * _GOLDEN + salt) & 0xFFFFFFFF) % span
