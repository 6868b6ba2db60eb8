"""What a peer serves under its own prefix (PS-less training): signed objects by key — a partial or
final sum of an all-reduce step, or its gradient's summable segments for an aggregator — for its
last few versions. An Interest for an object not published yet (the step has not opened, the
gradient is being computed) is held until it is, as a worker holds the PS's collect
(ndnps.client.pending); one for a version already forgotten gets no answer (its asker moved on or
will time out). Bounded: `keep` versions, HeldInterests' limit."""
from __future__ import annotations

from typing import Callable

from ndnps.client.pending import HeldInterests

Key = tuple            # (version, ...): what the object is, version first
Reply = Callable[[bytes], object]


class Published:
    """`on_sent(key, nbytes)`: each Data sent (the peer counts bytes by level)."""

    def __init__(self, keep: int = 3,
                 on_sent: Callable[[Key, int], None] = lambda _k, _n: None) -> None:
        self.keep = keep
        self.on_sent = on_sent
        self.objects: dict[Key, list[bytes]] = {}
        self.held: HeldInterests[tuple[Key, int]] = HeldInterests()
        self.newest = -1                 # the newest version published
        self.unknown = 0                 # Interests for a forgotten version or a segment past
                                         # an object's end
        self.repeated = 0                # Data sent again (a re-expressed Interest reached us)
        self._answered: set[tuple[Key, int]] = set()

    def publish(self, key: Key, wires: list[bytes]) -> None:
        """`key`'s segments, answered from now on (held Interests for them at once)."""
        self.objects[key] = wires
        for k in [k for k in self.held.keys() if k[0] == key]:
            seg = k[1]
            if seg < len(wires):
                for _ in range(self.held.release(k, wires[seg])):
                    self._sent(key, seg, len(wires[seg]))
        if key[0] > self.newest:
            self.newest = key[0]
            self.forget_before(self.newest - self.keep + 1)

    def ask(self, key: Key, seg: int, reply: Reply, deadline_ms: int) -> None:
        """An Interest for segment `seg` of `key`: answered, held, or ignored."""
        wires = self.objects.get(key)
        if wires is None:
            if key[0] > self.newest - self.keep:
                self.held.hold((key, seg), reply, deadline_ms)
            else:
                self.unknown += 1
            return
        if seg >= len(wires):
            self.unknown += 1
            return
        reply(wires[seg])
        self._sent(key, seg, len(wires[seg]))

    def _sent(self, key: Key, seg: int, nbytes: int) -> None:
        if (key, seg) in self._answered:
            self.repeated += 1
        else:
            self._answered.add((key, seg))
        self.on_sent(key, nbytes)

    def counts(self) -> dict[str, int]:
        """For the end record: Interests held until they expired, asked for what is gone, and
        Data sent again."""
        return {"held_expired": self.held.expired, "unknown_asked": self.unknown,
                "answers_repeated": self.repeated}

    def forget_before(self, version: int) -> None:
        for key in [k for k in self.objects if k[0] < version]:
            del self.objects[key]
        self._answered = {a for a in self._answered if a[0][0] >= version}
        self.held.purge()
