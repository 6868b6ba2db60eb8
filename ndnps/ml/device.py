"""A device of another speed, emulated on this machine's CPU (issue 27; also a straggler's
`--slowdown`).

The numpy work is done for real, then the caller waits (sleeps: the core is free for the
others meanwhile, as a GPU kernel leaves the CPU) until it took the device's time:

    device time = factor × the work's cost,   factor = scale × fastest speed ÷ its speed

The work's cost is either **measured** — its CPU time, the calling thread's, so the other
processes competing for the cores do not count — or **profiled**: what the same work cost on
this machine's core when the planner profiled it (ndnps.planner.profile), given by the caller.
Measured is what a straggler's `--slowdown` uses. A pipeline's stages use profiled costs by
default, because on this (virtual) machine the CPU time of a piece of work depends on what the
core did before it: after the core idled for the device's wait, the same 24 × 256 × 256 layer
costs 2 to 3.4 times its back-to-back CPU time (haltpoll idle: the vCPU is halted, and wakes
cold), an excess of 0.1–0.3 ms per operation that `factor` then multiplies (×64 for the slow
kind: 13 ms of pretend compute per operation). docs/hetero.md has the measurements.

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
    """One piece of work: its CPU seconds, the wall seconds it took, its cost (the CPU seconds
    measured, or the profiled cost given) and the device's seconds (factor × cost)."""
    cpu: float
    wall: float
    device: float
    cost: float = 0.0

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
    device's time holds over many small operations, not only over each."""

    def __init__(self, factor: float = 1.0,
                 cpu_clock: Callable[[], float] = time.thread_time,
                 wall_clock: Callable[[], float] = time.perf_counter,
                 quantum: float = QUANTUM) -> None:
        if factor < 1.0:
            raise ValueError(f"a device factor is >= 1, got {factor}")
        self.factor, self.quantum = factor, quantum
        self._cpu, self._wall = cpu_clock, wall_clock
        self.debt = 0.0                 # s owed (negative: waited more than owed)

    def run(self, work: Callable[[], T], cost: float | None = None) -> tuple[T, Timed]:
        """Do `work`; its cost on this machine's core is `cost` (profiled) or, if None, its
        CPU time (measured)."""
        c0, w0 = self._cpu(), self._wall()
        out = work()
        cpu, wall = self._cpu() - c0, self._wall() - w0
        basis = cpu if cost is None else cost
        return out, Timed(cpu, wall, basis * self.factor, basis)

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
    ops: int = 0

    def add(self, t: Timed) -> None:
        self.cpu += t.cpu
        self.cost += t.cost
        self.device += t.device
        self.busy += t.wall
        self.ops += 1

    def wait(self, seconds: float) -> None:
        self.busy += seconds

    def measured_factor(self) -> float | None:
        """Busy ÷ cost: the device's factor as it ran (its speed followed when it equals
        Device.factor; above it, the machine did not keep up)."""
        return self.busy / self.cost if self.cost > 0 else None
