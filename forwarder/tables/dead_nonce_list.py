"""Dead Nonce List: (name, nonce) pairs of Interests recently forwarded and no longer in the
PIT, so a looping Interest is still recognised after its PIT entry is gone (as NFD)."""
from __future__ import annotations


class DeadNonceList:
    def __init__(self, lifetime: float = 6.0, capacity: int = 1 << 16) -> None:
        self.lifetime = lifetime
        self.capacity = capacity
        # insertion order == expiry order, since every item lives `lifetime`
        self._items: dict[tuple[bytes, bytes], float] = {}

    def __len__(self) -> int:
        return len(self._items)

    def add(self, name: bytes, nonce: bytes, now: float) -> None:
        items = self._items
        key = (name, nonce)
        items.pop(key, None)
        items[key] = now + self.lifetime
        if len(items) > self.capacity:
            del items[next(iter(items))]

    def has(self, name: bytes, nonce: bytes, now: float) -> bool:
        expires = self._items.get((name, nonce))
        return expires is not None and expires > now

    def expire(self, now: float) -> None:
        items = self._items
        while items:
            key = next(iter(items))
            if items[key] > now:
                break
            del items[key]
