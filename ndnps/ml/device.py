"""A device of another speed, emulated on this machine's CPU (docs/hetero.md; also a straggler's
`--slowdown`).

The numpy work is done for real, then the caller waits (sleeps: the core is free for the
others meanwhile, as a GPU kernel leaves the CPU) until it took the device's time:

    device time = factor × the work's cost,   factor = scale × fastest speed ÷ its speed

The work's cost is either **measured** — its CPU time, the calling thread's, so the other
processes competing for the cores do not count (its wall time would: a work preempted halfway
took up to 2.3 × its CPU time in wall time in the pipeline's runs) — or **profiled**: what the
same work cost on this machine's core when the planner profiled it (ndnps.planner.profile),
given by the caller. Measured is what a straggler's `--slowdown` uses.

**Warm-up** (measured only): the CPU time of a piece of work depends on how long ago it last
ran. The planner's profile runs its work back to back; a device's work comes after its wait,
within which the host's other work empties the caches of its parameters whether or not this
core idles (a 10 ms spin costs the next operation about as much as a 10 ms sleep: 1.95–2.08 ×
against 2.26–2.44 × back to back). A real device keeps its parameters in its own memory, so
the caller may pass `warm`: the same work's arithmetic once, untimed and thrown away (a
stage's `StageWork.rehearse`), right before the timed run. In the hetero scenario it took
25–45 % off each stage's CPU time per step (the slow stage, whose waits are the longest, the
most). Its wall time counts in the device's time (the device is busy from the moment its work
could start; the rehearsal is far shorter than the device's time). docs/hetero.md has the
measurements.

Either way the m × n devices of a heterogeneous cluster share this machine's cores and each runs
at its own speed as long as their CPU work together fits the cores: otherwise the work's wall
time exceeds the device's, nothing is owed, and the records show a device slower than its speed
(`Busy.measured_factor`). `scale` ≥ 1 makes even the fastest kind that much slower than one core
of this machine (docs/hetero.md measures why the cluster needs it).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, TypeVar

from ndnps.ndn.clock import monotonic

T = TypeVar("T")


def factor(speed: float, fastest: float, scale: float = 1.0) -> float:
    """How many times longer than this machine's core a device of `speed` takes, when the
    fastest kind's speed is `fastest` and takes `scale` times longer."""
    if speed <= 0 or fastest < speed or scale < 1.0:
        raise ValueError(f"need 0 < speed <= fastest and scale >= 1, got {speed}, {fastest}, "
                         f"{scale}")
    return scale * fastest / speed


@dataclass(frozen=True)
class Timed:
    """One piece of work: its CPU seconds, the wall seconds it took (its warm-up's included),
    its cost (the CPU seconds measured, or the profiled cost given), the device's seconds
    (factor × cost) and the wall seconds of its warm-up."""
    cpu: float
    wall: float
    device: float
    cost: float = 0.0
    warm: float = 0.0

    @property
    def owed(self) -> float:
        """How long to wait after the work so that it took the device's time."""
        return max(0.0, self.device - self.wall)


# The shortest wait worth a sleep: the event loop's timers have a millisecond's resolution, so
# a shorter sleep overshoots to about that; shorter debts are carried to the next work
QUANTUM = 0.002


class Device:
    """Runs work and says how long the emulated device would have taken (`factor` ≥ 1), and
    how long to wait for it: what each piece of work owes is summed (`debt`) and waited out
    once it reaches `quantum`; a wait longer than asked is credited to the next work. So the
    device's time holds over many small operations, not only over each.

    `wall_clock` is the process's clock (ndnps.ndn.clock; perf_counter's resolution on Linux).
    Under a simulator's virtual clock the work takes no time, so the whole device time is owed
    and waited out virtually: the caller must wait with `await asyncio.sleep`, never block."""

    def __init__(self, factor: float = 1.0,
                 cpu_clock: Callable[[], float] = time.thread_time,
                 wall_clock: Callable[[], float] = monotonic,
                 quantum: float = QUANTUM) -> None:
        if factor < 1.0:
            raise ValueError(f"a device factor is >= 1, got {factor}")
        self.factor, self.quantum = factor, quantum
        self._cpu, self._wall = cpu_clock, wall_clock
        self.debt = 0.0                 # s owed (negative: waited more than owed)

    def run(self, work: Callable[[], T], cost: float | None = None,
            warm: Callable[[], object] | None = None) -> tuple[T, Timed]:
        """Do `work`; its cost on this machine's core is `cost` (profiled) or, if None, its
        CPU time (measured), after `warm` (the same arithmetic, its result dropped) if given."""
        w0 = self._wall()
        if cost is None and warm is not None:
            warm()
        c0, w1 = self._cpu(), self._wall()
        out = work()
        cpu, wall = self._cpu() - c0, self._wall() - w0
        basis = cpu if cost is None else cost
        return out, Timed(cpu, wall, basis * self.factor, basis, w1 - w0)

    def owe(self, t: Timed) -> float:
        """How long to wait now after work `t` (0: carry the debt)."""
        self.debt += t.owed
        return self.debt if self.debt >= self.quantum else 0.0

    def settle(self) -> float:
        """How long to wait before the device is free (the end of a step): every debt."""
        return max(0.0, self.debt)

    def waited(self, seconds: float) -> None:
        self.debt -= seconds

    def idle(self) -> None:
        """The device waits for its input: a credit from a sleep that overshot is spent (the
        next operation starts late anyway, not early)."""
        self.debt = max(self.debt, 0.0)


@dataclass
class Busy:
    """A device's work over a period (a step): what it computed and how long it was busy.
    `busy` is the wall time of the work and its waits: the device's time, when the machine
    kept up."""
    cpu: float = 0.0
    cost: float = 0.0
    device: float = 0.0
    busy: float = 0.0
    work: float = 0.0               # wall seconds of the work alone (no waits, no warm-ups)
    warm: float = 0.0               # wall seconds of the warm-ups
    ops: int = 0

    def add(self, t: Timed) -> None:
        self.cpu += t.cpu
        self.cost += t.cost
        self.device += t.device
        self.busy += t.wall
        self.work += t.wall - t.warm
        self.warm += t.warm
        self.ops += 1

    def wait(self, seconds: float) -> None:
        self.busy += seconds

    def measured_factor(self) -> float | None:
        """Busy ÷ cost: the device's factor as it ran (its speed followed when it equals
        Device.factor; above it, the machine did not keep up)."""
        return self.busy / self.cost if self.cost > 0 else None
