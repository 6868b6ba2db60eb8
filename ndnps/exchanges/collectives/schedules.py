"""Who sends which part of the gradient to whom in a PS-less all-reduce (docs/collectives.md): the
ring's and BCube's schedules, pure functions of the peers' count and shape (no I/O, no clock), so
every rule is checked against a brute-force simulation (tests/unit/test_exchanges_collective).

A *range* is a half-open interval [lo, hi) of the flat gradient's indices; `split(r, n)` cuts
it into n near-equal parts, in order.

**Ring** (reduce-scatter, then all-gather; Patarasuk and Yuan): N peers in a ring, the vector in
N chunks. Reduce-scatter step s (0..N−2): peer i sends chunk (i − s) mod N, its partial sum so
far, to peer i+1, which adds it to its own; after N−1 steps peer i holds chunk (i+1) mod N
summed over all. All-gather step s: peer i sends chunk (i + 1 − s) mod N, complete, to i+1.
Each peer sends 2(N−1)/N of the model per version.

**BCube(n, k)** (hierarchical synchronisation after BML: Wang et al., "BML: A High-performance,
Low-cost Gradient Synchronization Algorithm for DML Training", NeurIPS 2018): n^k peers with
k-digit base-n addresses; the level-l switch joins the n peers that differ only in digit l. The
parameters are cut into k sets; set j is synchronised level by level in the order j, j+1, … (mod
k), so the k sets keep all k uplinks busy at once. Reduce, depth d at level L: the peers under one
level-L switch hold partial sums of the same range (they agree on every digit used so far); each
takes the part of it numbered by its own digit L and adds the others' partial sums of that part.
After k depths each peer holds a 1/n^k part of the set summed over every peer. Distribute: the
depths in reverse, each peer sends the range it summed at that depth, complete, to the peers under
the same switch. Every exchange crosses one switch. Per version each peer sends on its level-L face
2 (n−1)/n · (M/k) · Σ_d n^(−d) over the sets' depths d at L: M·2(n−1)/n · (1 + 1/n + … +
1/n^(k−1))/k in all when every level takes each depth once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, NamedTuple

Range = tuple[int, int]


def split(r: Range, n: int) -> list[Range]:
    """`r` cut into n near-equal consecutive parts (the first ones one shorter when uneven)."""
    lo, hi = r
    m = hi - lo
    return [(lo + p * m // n, lo + (p + 1) * m // n) for p in range(n)]


class Transfer(NamedTuple):
    """One message of a schedule: `src` sends its values of `range` to `dst` at `step`;
    `reduce`: the receiver adds them to its own (else it takes them as final)."""
    step: int
    src: int
    dst: int
    range: Range
    reduce: bool
    level: int = 0          # BCube: the switch level it crosses (ring: 0)
    set: int = 0            # BCube: the parameter set (ring: 0)
    # which part of its set the range is: the ring's chunk; BCube's part at that level (the
    # digit there of the peer who sums it: the receiver when reducing, the sender after).
    # (set, level, part) and the phase name a range uniquely within a version
    part: int = 0


# ---- ring ----------------------------------------------------------------------------------

def ring(peers: int, size: int) -> list[Transfer]:
    """The ring all-reduce of a `size`-element vector over `peers` peers: 2(N−1) steps."""
    if peers < 1 or size < 0:
        raise ValueError("need at least one peer and a size >= 0")
    chunks = split((0, size), peers)
    out = []
    for s in range(peers - 1):
        for i in range(peers):
            c = (i - s) % peers
            out.append(Transfer(s, i, (i + 1) % peers, chunks[c], True, part=c))
    for s in range(peers - 1):
        for i in range(peers):
            c = (i + 1 - s) % peers
            out.append(Transfer(peers - 1 + s, i, (i + 1) % peers, chunks[c], False, part=c))
    return out


# ---- BCube ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class BCube:
    """BCube(n, k): n^k peers, k levels of n^(k−1) switches with n ports each."""
    n: int
    k: int

    def __post_init__(self) -> None:
        if self.n < 2 or self.k < 1:
            raise ValueError(f"BCube needs n >= 2 and k >= 1, got n={self.n}, k={self.k}")

    @property
    def peers(self) -> int:
        return self.n ** self.k

    def digit(self, peer: int, level: int) -> int:
        return peer // self.n ** level % self.n

    def switch(self, peer: int, level: int) -> int:
        """The index (0..n^(k−1)−1) of `peer`'s level-`level` switch: its address without
        that digit."""
        low = peer % self.n ** level
        high = peer // self.n ** (level + 1)
        return high * self.n ** level + low

    def group(self, peer: int, level: int) -> list[int]:
        """The n peers under `peer`'s level-`level` switch, by their digit at that level."""
        base = peer - self.digit(peer, level) * self.n ** level
        return [base + d * self.n ** level for d in range(self.n)]

    def order(self, s: int) -> list[int]:
        """The levels set `s` is synchronised at, depth by depth."""
        return [(s + d) % self.k for d in range(self.k)]

    def sets(self, size: int) -> list[Range]:
        """The k parameter sets of a `size`-element vector."""
        return split((0, size), self.k)

    def held(self, peer: int, s: int, depth: int, size: int) -> Range:
        """The range of set `s` that `peer` sums at `depth` (−1: the whole set)."""
        r = self.sets(size)[s]
        for d, level in enumerate(self.order(s)[:depth + 1]):
            r = split(r, self.n)[self.digit(peer, level)]
        return r

    def schedule(self, size: int) -> list[Transfer]:
        """Every message of one all-reduce of a `size`-element vector: reduce steps 0..k−1,
        then distribute steps k..2k−1; at each step every set uses a different level."""
        out = []
        for step in range(2 * self.k):
            reduce = step < self.k
            depth = step if reduce else 2 * self.k - 1 - step
            for s in range(self.k):
                level = self.order(s)[depth]
                for peer in range(self.peers):
                    for other in self.group(peer, level):
                        if other == peer:
                            continue
                        # reduce: the part the other sums at this depth, from my partial sum;
                        # distribute: the part I summed at this depth, complete
                        summer = other if reduce else peer
                        r = self.held(summer, s, depth, size)
                        if r[1] > r[0]:
                            out.append(Transfer(step, peer, other, r, reduce, level, s,
                                                self.digit(summer, level)))
        return out

    def bytes_per_face(self, size: int, itemsize: int = 4,
                       merged: bool = True) -> dict[int, float]:
        """The analytic bytes a peer sends on its face of each level per version, for a
        vector of `size` values: the reduce's (n−1)/n of the range held at each depth, and
        the distribute's part, sent once when the switch merges the n−1 peers' Interests
        for it (`merged`: NDN, one name for one part) or n−1 times (unicast, BCube
        synchronisation's own count: 2(n−1)/n per depth in all)."""
        per_level = {lvl: 0.0 for lvl in range(self.k)}
        copies = 1 if merged else self.n - 1
        for s in range(self.k):
            for d, level in enumerate(self.order(s)):
                held = (size / self.k) / self.n ** d * itemsize
                per_level[level] += (self.n - 1 + copies) / self.n * held
        return per_level


def steps(transfers: list[Transfer]) -> Iterator[list[Transfer]]:
    """The transfers grouped by step, in order (each step's sends are concurrent)."""
    by: dict[int, list[Transfer]] = {}
    for t in transfers:
        by.setdefault(t.step, []).append(t)
    for step in sorted(by):
        yield by[step]
