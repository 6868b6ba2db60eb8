"""Pipeline-parallel training's schedule (docs/hetero.md), sans-I/O: the
one-forward-one-backward (1F1B, PipeDream-Flush) order of a stage's work over a mini-batch's
micro-batches, a stage's state machine that says which operation may run next, and a simulator
of a whole pipeline (the planner's prediction, and the tests' proof that no schedule
deadlocks).

Stage s of n (0 first) runs, for k micro-batches: min(n − s − 1, k) forwards (the warm-up: the
pipeline fills), then one forward and one backward in turn, then the backwards left (the
cool-down). Its forward of micro-batch i needs stage s − 1's activation of i; its backward of i
needs its own forward of i and stage s + 1's gradient of i (the last stage's, its forward
only). A stage holds at most n − s micro-batches' activations at once (the 1F1B bound), one
with recomputation (it keeps the inputs and recomputes the rest before the backward).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

FORWARD, BACKWARD = "F", "B"


@dataclass(frozen=True)
class Op:
    kind: str               # FORWARD | BACKWARD
    mb: int                 # the micro-batch

    def __repr__(self) -> str:
        return f"{self.kind}{self.mb}"


def schedule(stage: int, stages: int, micro: int) -> list[Op]:
    """Stage `stage`'s operations, in order (1F1B)."""
    if not 0 <= stage < stages or micro < 1:
        raise ValueError(f"need 0 <= stage < stages and micro >= 1, got {stage}, {stages}, "
                         f"{micro}")
    warmup = min(stages - stage - 1, micro)
    ops = [Op(FORWARD, i) for i in range(warmup)]
    f, b = warmup, 0
    while f < micro:
        ops += [Op(FORWARD, f), Op(BACKWARD, b)]
        f, b = f + 1, b + 1
    ops += [Op(BACKWARD, i) for i in range(b, micro)]
    return ops


@dataclass
class Stage:
    """One stage's progress through its schedule: tell it what arrived and what finished; ask
    it what to run next (None: wait for an input)."""
    stage: int
    stages: int
    micro: int
    ops: list[Op] = field(init=False)
    done: int = 0                                       # ops finished, in order
    activations: set[int] = field(default_factory=set)  # inputs of forwards, arrived
    gradients: set[int] = field(default_factory=set)    # inputs of backwards, arrived
    forwarded: set[int] = field(default_factory=set)
    running: Op | None = None
    peak_held: int = 0                                  # activations held at once, at most

    def __post_init__(self) -> None:
        self.ops = schedule(self.stage, self.stages, self.micro)
        if self.stage == 0:
            self.activations = set(range(self.micro))   # the first stage reads the batch
        if self.stage == self.stages - 1:
            self.gradients = set(range(self.micro))     # ... the last computes the loss

    @property
    def finished(self) -> bool:
        return self.done == len(self.ops)

    def ready(self) -> Op | None:
        """The next operation, if its inputs are here and nothing is running."""
        if self.running is not None or self.finished:
            return None
        op = self.ops[self.done]
        if op.kind == FORWARD and op.mb in self.activations:
            return op
        if op.kind == BACKWARD and op.mb in self.forwarded and op.mb in self.gradients:
            return op
        return None

    def start(self, op: Op) -> None:
        if op != self.ready():
            raise ValueError(f"stage {self.stage}: {op} is not ready")
        self.running = op

    def finish(self) -> Op:
        op, self.running = self.running, None
        if op is None:
            raise ValueError(f"stage {self.stage}: nothing is running")
        self.done += 1
        if op.kind == FORWARD:
            self.forwarded.add(op.mb)
        else:
            self.forwarded.discard(op.mb)
        self.peak_held = max(self.peak_held, len(self.forwarded))
        return op


@dataclass
class Simulated:
    seconds: float                      # the mini-batch's time, first forward to last backward
    busy: list[float]                   # per stage
    order: list[list[Op]]               # per stage, as run
    finish: list[float] = field(default_factory=list)   # per stage: its last operation's end

    @property
    def idle(self) -> list[float]:
        return [1.0 - b / self.seconds if self.seconds else 0.0 for b in self.busy]


class Deadlock(RuntimeError):
    pass


def simulate(forward: Sequence[float], backward: Sequence[float], micro: int,
             transfer: Sequence[float] | float = 0.0) -> Simulated:
    """A pipeline of len(forward) stages over `micro` micro-batches: stage s's forward takes
    forward[s], its backward backward[s], and an activation or gradient between stages s and
    s + 1 transfer[s] (one number: every boundary). Each stage runs one operation at a time in
    its 1F1B order; Deadlock if no stage can go on."""
    n = len(forward)
    if len(backward) != n or n < 1:
        raise ValueError("forward and backward need one time per stage")
    links = [float(transfer)] * (n - 1) if isinstance(transfer, (int, float)) \
        else [float(t) for t in transfer]
    stages = [Stage(s, n, micro) for s in range(n)]
    free = [0.0] * n                                    # when each stage is free again
    arrive: list[dict[tuple[str, int], float]] = [{} for _ in range(n)]   # input -> when
    busy = [0.0] * n
    order: list[list[Op]] = [[] for _ in range(n)]
    end = 0.0
    while not all(st.finished for st in stages):
        best: tuple[float, int, Op] | None = None
        for s, st in enumerate(stages):
            op = st.ready()
            if op is None:
                continue
            start = max(free[s], arrive[s].get((op.kind, op.mb), 0.0))
            if best is None or start < best[0]:
                best = (start, s, op)
        if best is None:
            raise Deadlock(f"no stage can go on: {[st.done for st in stages]} done")
        start, s, op = best
        st = stages[s]
        st.start(op)
        took = forward[s] if op.kind == FORWARD else backward[s]
        st.finish()
        free[s] = start + took
        busy[s] += took
        end = max(end, free[s])
        order[s].append(op)
        if op.kind == FORWARD and s + 1 < n:
            stages[s + 1].activations.add(op.mb)
            arrive[s + 1][(FORWARD, op.mb)] = free[s] + links[s]
        if op.kind == BACKWARD and s > 0:
            stages[s - 1].gradients.add(op.mb)
            arrive[s - 1][(BACKWARD, op.mb)] = free[s] + links[s - 1]
    return Simulated(end, busy, order, free)

