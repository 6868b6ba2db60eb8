"""Interests a producer holds until it has the Data: a worker holds the PS's collect Interest
until its gradient is computed; the PS holds content and unicast-parameter Interests until the
object exists.  Every re-expressed Interest is held too (each has its own PIT token), and each
is answered while its lifetime lasts.  Bounded: the oldest held Interest goes first."""
from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Generic, Hashable, TypeVar

from .events import now_ms

Reply = Callable[[bytes], object]
K = TypeVar("K", bound=Hashable)          # what the producer holds an Interest under


class HeldInterests(Generic[K]):
    def __init__(self, limit: int = 1024, clock: Callable[[], int] = now_ms) -> None:
        self.limit = limit
        self._clock = clock                      # ms, the clock of an Interest's deadline
        self._held: OrderedDict[K, list[tuple[Reply, int]]] = OrderedDict()
        self._count = 0
        self.answered = 0
        self.expired = 0
        self.dropped = 0

    def __len__(self) -> int:
        return self._count

    def hold(self, key: K, reply: Reply, deadline_ms: int) -> None:
        self._held.setdefault(key, []).append((reply, deadline_ms))
        self._count += 1
        while self._count > self.limit:
            old_key, replies = next(iter(self._held.items()))
            replies.pop(0)
            self._count -= 1
            self.dropped += 1
            if not replies:
                del self._held[old_key]

    def keys(self) -> list[K]:
        return list(self._held)

    def release(self, key: K, wire: bytes) -> int:
        """Answer every live Interest held under `key` with `wire`; returns how many."""
        replies = self._held.pop(key, None)
        if not replies:
            return 0
        self._count -= len(replies)
        now = self._clock()
        n = 0
        for reply, deadline in replies:
            if deadline >= now:
                reply(wire)
                n += 1
            else:
                self.expired += 1
        self.answered += n
        return n

    def purge(self) -> None:
        """Forget Interests whose lifetime is over."""
        now = self._clock()
        for key in list(self._held):
            live = [(r, d) for r, d in self._held[key] if d >= now]
            self.expired += len(self._held[key]) - len(live)
            self._count -= len(self._held[key]) - len(live)
            if live:
                self._held[key] = live
            else:
                del self._held[key]
