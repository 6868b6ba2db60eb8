"""One peer's side of one all-reduce (docs/collectives.md), sans-I/O: the schedule's steps in order,
what the peer serves and what it must fetch at each, its vector updated as the parts arrive.

Built on the schedules of ndnps.exchanges.collectives.schedules (ring, BCube): at step s a peer
serves the ranges others fetch from it (`offers`: its current values of them, final for this step
once every earlier step is done) and fetches the ranges it needs (`wants`); each arrival is added
(reduce) or copied (distribute) into its vector; when every want of the step is in, the next step
opens. A schedule never has a peer send a range it updates in the same step (the parts a switch's
peers exchange are disjoint), so what it serves needs no copy. Every part's sum is made once, by
one peer, then copied: every peer ends with the same bytes. The I/O — names, fetches with loss
recovery, pushes — is the caller's (ndnps.apps.peer).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .schedules import Range, Transfer


class AllReduceError(ValueError):
    """A part that does not fit the schedule (unknown step or peer, wrong size)."""


@dataclass
class AllReduce:
    peer: int
    vector: np.ndarray                  # this peer's gradient (float32), summed in place
    schedule: list[Transfer]
    _got: set[tuple[int, int, Range]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.vector = np.array(self.vector, dtype=np.float32).reshape(-1)
        self._steps = sorted({t.step for t in self.schedule})
        self._wants: dict[int, list[Transfer]] = {s: [] for s in self._steps}
        self._offers: dict[int, list[Transfer]] = {s: [] for s in self._steps}
        for t in self.schedule:
            if t.dst == self.peer:
                self._wants[t.step].append(t)
            if t.src == self.peer:
                self._offers[t.step].append(t)
        self._served: dict[tuple[int, Range], np.ndarray] = {}
        self._index = -1
        self._open_next()

    def _open_next(self) -> None:
        """Open the next step: what it serves is its values now (copied: a later step may
        change them before a slow peer fetches); a step with nothing to fetch is done at once."""
        while True:
            self._index += 1
            if self.done:
                return
            step = self._steps[self._index]
            for t in self._offers[step]:
                if (step, t.range) not in self._served:
                    self._served[(step, t.range)] = self.values(t.range).copy()
            if self._wants[step]:
                return

    @property
    def done(self) -> bool:
        return self._index >= len(self._steps)

    @property
    def current(self) -> int | None:
        """The open step (None: done)."""
        return None if self.done else self._steps[self._index]

    def served(self, step: int, r: Range) -> np.ndarray | None:
        """This peer's part `r` of `step` for whoever fetches it, once that step has opened
        (None before: the caller holds the request until then)."""
        return self._served.get((step, r))

    def wants(self) -> list[Transfer]:
        """What this peer still needs at the open step."""
        if self.done:
            return []
        return [t for t in self._wants[self._steps[self._index]]
                if (t.step, t.src, t.range) not in self._got]

    def values(self, r: Range) -> np.ndarray:
        return self.vector[r[0]:r[1]]

    def arrived(self, step: int, src: int, r: Range, values: np.ndarray) -> bool:
        """`src`'s part `r` of `step`. False: already had it (a duplicate), or a part of a
        step not open yet (the caller keeps it and gives it again when its step opens).
        Opens the next step once the open one is complete."""
        if step not in self._wants:
            raise AllReduceError(f"no step {step} in the schedule")
        match = [t for t in self._wants[step] if t.src == src and t.range == r]
        if not match:
            raise AllReduceError(f"peer {self.peer} expects no part {r} from {src} at step "
                                 f"{step}")
        if self.done or step != self._steps[self._index] or (step, src, r) in self._got:
            return False
        v = np.asarray(values, dtype=np.float32).reshape(-1)
        if v.size != r[1] - r[0]:
            raise AllReduceError(f"part {r} from {src}: {v.size} values")
        if match[0].reduce:
            self.vector[r[0]:r[1]] += v
        else:
            self.vector[r[0]:r[1]] = v
        self._got.add((step, src, r))
        if not self.wants():
            self._open_next()
        return True
