"""Dead Nonce List: (name, nonce) pairs of Interests recently forwarded and no longer in the
PIT, so a looping Interest is still recognised after its PIT entry is gone (as NFD)."""
from __future__ import annotations

from collections import OrderedDict


class DeadNonceList:
    def __init__(self, lifetime: float = 6.0, capacity: int = 1 << 16) -> None:
        self.lifetime = lifetime
        self.capacity = capacity
        # insertion order == expiry order, since every item lives `lifetime`.  An OrderedDict,
        # not a dict: a dict deleted from the front makes each `next(iter())` skip every slot
        # deleted since its last resize (expire and eviction went quadratic: 10 % of a
        # forwarder's samples in training)
        self._items: OrderedDict[tuple[bytes, bytes], float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def add(self, name: bytes, nonce: bytes, now: float) -> None:
        items = self._items
        key = (name, nonce)
        if key in items:
            items.move_to_end(key)
        items[key] = now + self.lifetime
        if len(items) > self.capacity:
            items.popitem(last=False)

    def has(self, name: bytes, nonce: bytes, now: float) -> bool:
        expires = self._items.get((name, nonce))
        return expires is not None and expires > now

    def expire(self, now: float) -> None:
        items = self._items
        while items:
            key = next(iter(items))
            if items[key] > now:
                break
            items.popitem(last=False)
