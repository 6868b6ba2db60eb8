"""The app's pending Interest table: the Interests it expressed that await their Data.

Per-packet module (typed, no dynamic tricks: compilable with mypyc).

Each entry is a plain asyncio future the caller awaits (or adds a callback to), settled by
the app: with the Data its validator accepts, ValidationFailure, InterestNack, InterestTimeout
at its lifetime, or InterestCanceled when the face closes.  Exact names sit in a dict keyed by
the name's TLV-VALUE (one lookup per Data); CanBePrefix entries in a second dict, looked up
under each prefix of a Data's name (only while there are any).  An Interest whose name ends
with an ImplicitSha256DigestComponent is kept under the name without it and matches only the
Data of that digest.

Lifetimes share one loop timer: entries wait in a heap by deadline and the timer is set for
the earliest, so an Interest costs a heap push rather than a loop timer of its own.  Entries
end lazily: one answered, or cancelled by its caller (the future alone says so: no callback
per entry), is dropped when its deadline comes up or when its name's list is next read.
"""
from __future__ import annotations

import asyncio
import hashlib
from heapq import heappop, heappush
from typing import Callable, Final

from ndnps.ndn.rto import HALF_TICK
from ndnps.ndn.tlv import IMPLICIT_DIGEST, DecodeError, component_offsets

from .wire import Data

Settle = Callable[["Pending"], None]
_DIGEST_LEN: Final = 34          # an ImplicitSha256DigestComponent: type, length, 32 octets


class Pending:
    """One expressed Interest: `future` (the caller's), its name's `key` (without an implicit
    digest), `digest` (the implicit digest it asks for, or None), `can_be_prefix`, its
    `validator`, and its `deadline` (loop time)."""

    __slots__ = ("future", "key", "digest", "can_be_prefix", "validator", "deadline")

    def __init__(self, future: asyncio.Future, key: bytes, digest: bytes | None,
                 can_be_prefix: bool, validator: Callable[[Data], bool],
                 deadline: float) -> None:
        self.future = future
        self.key = key
        self.digest = digest
        self.can_be_prefix = can_be_prefix
        self.validator = validator
        self.deadline = deadline

    def matches(self, digest: bytes | None) -> bool:
        """A Data of that implicit digest answers it (its name checked by the caller)."""
        return self.digest is None or self.digest == digest


def split_digest(key: bytes) -> tuple[bytes, bytes | None]:
    """A name's TLV-VALUE without an ImplicitSha256DigestComponent that ends it, and that
    digest (None when it has none)."""
    if len(key) >= _DIGEST_LEN and key[-_DIGEST_LEN] == IMPLICIT_DIGEST and \
            key[-_DIGEST_LEN + 1] == 32:
        offsets = component_offsets(key)
        if len(key) - (offsets[-2] if len(offsets) > 1 else 0) == _DIGEST_LEN:
            return key[:-_DIGEST_LEN], key[-32:]
    return key, None


class PendingTable:
    """`expired(entry)` ends an entry whose lifetime passed (the app sets InterestTimeout)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, expired: Settle) -> None:
        self.loop = loop
        self._expired = expired
        self.exact: dict[bytes, list[Pending]] = {}
        self.prefixed: dict[bytes, list[Pending]] = {}
        self._heap: list[tuple[float, int, Pending]] = []
        self._seq = 0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0

    def __len__(self) -> int:
        """Entries still waiting (answered or cancelled ones not counted)."""
        return sum(1 for lst in (*self.exact.values(), *self.prefixed.values())
                   for p in lst if not p.future.done())

    def add(self, key: bytes, can_be_prefix: bool, validator: Callable[[Data], bool],
            lifetime: float) -> Pending:
        """A new entry for the name `key` (TLV-VALUE, an implicit digest included), waiting
        `lifetime` seconds."""
        loop = self.loop
        key, digest = split_digest(key)
        deadline = loop.time() + lifetime
        entry = Pending(loop.create_future(), key, digest, can_be_prefix, validator, deadline)
        table = self.prefixed if can_be_prefix else self.exact
        waiting = table.get(key)
        if waiting is None:
            table[key] = [entry]
        else:
            waiting.append(entry)
        self._seq += 1
        heappush(self._heap, (deadline, self._seq, entry))
        if self._timer is None or deadline < self._timer_at:
            self._arm(deadline)
        return entry

    def match(self, data: Data) -> list[Pending]:
        """The waiting entries `data` answers, taken out of the table (ended ones dropped)."""
        key = data.key
        out: list[Pending] = []
        digest: list[bytes] = []          # the Data's implicit digest, computed once if asked
        exact = self.exact.pop(key, None) if self.exact else None
        if exact is not None:
            kept = _take(exact, data, digest, out)
            if kept:
                self.exact[key] = kept
        if self.prefixed:
            try:
                ends = component_offsets(key)
            except DecodeError:
                ends = []
            for end in ends:
                waiting = self.prefixed.get(key[:end])
                if waiting is None:
                    continue
                kept = _take(waiting, data, digest, out)
                if kept:
                    self.prefixed[key[:end]] = kept
                else:
                    del self.prefixed[key[:end]]
        return out

    def nacked(self, key: bytes) -> list[Pending]:
        """The waiting entries of the name `key` (a Nack's Interest's), taken out."""
        key, _ = split_digest(key)
        out: list[Pending] = []
        for table in (self.exact, self.prefixed):
            waiting = table.pop(key, None)
            if waiting is not None:
                out += [entry for entry in waiting if not entry.future.done()]
        return out

    def clear(self) -> list[Pending]:
        """Every waiting entry, the table emptied (the face closed)."""
        out = [entry for table in (self.exact, self.prefixed) for waiting in table.values()
               for entry in waiting if not entry.future.done()]
        self.exact.clear()
        self.prefixed.clear()
        self._heap.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        return out

    # ---- lifetimes --------------------------------------------------------------------------

    def _arm(self, at: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        # half a tick late: uvloop's millisecond clock may round a delay down, and a timer
        # that came early would find nothing due (ndnps.ndn.rto.HALF_TICK)
        self._timer = self.loop.call_later(max(0.0, at - self.loop.time()) + HALF_TICK,
                                           self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        heap = self._heap
        now = self.loop.time()
        while heap and (heap[0][0] <= now or heap[0][2].future.done()):
            entry = heappop(heap)[2]
            self._forget(entry)
            if not entry.future.done():
                self._expired(entry)
        if heap:
            self._arm(heap[0][0])

    def _forget(self, entry: Pending) -> None:
        """Take `entry` out of its name's list, if it is still there (a cancelled one is)."""
        table = self.prefixed if entry.can_be_prefix else self.exact
        waiting = table.get(entry.key)
        if waiting is not None and entry in waiting:
            waiting.remove(entry)
            if not waiting:
                del table[entry.key]


def _take(entries: list[Pending], data: Data, digest: list[bytes],
          out: list[Pending]) -> list[Pending]:
    """`entries` that `data` answers go to `out`; returns those still waiting (ended ones
    dropped). `digest` holds the Data's implicit digest once an entry has asked for it."""
    kept: list[Pending] = []
    for entry in entries:
        if entry.future.done():
            continue
        if entry.digest is not None and not digest:
            digest.append(hashlib.sha256(data.wire).digest())
        if entry.matches(digest[0] if digest else None):
            out.append(entry)
        else:
            kept.append(entry)
    return kept
