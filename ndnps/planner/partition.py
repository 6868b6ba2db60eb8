"""Splitting a model's layers into pipeline stages (the planner's Order and Split steps,
docs/hetero.md), pure computation: the stages' order from the devices, and the integer program over
profiled per-layer costs (scipy's HiGHS `milp`).

A profile gives each layer its forward and backward time per micro-batch on the fastest device,
the bytes of its output activation per micro-batch (what crosses to the next stage forward, and
its gradient backward) and its parameter bytes (what a stage synchronises with the same stage of
the other virtual machines once per mini-batch). A device of speed v computes in time
t × (fastest speed ÷ v).

**Order**: were every stage's compute time equal, a device's share of the model
would be proportional to its speed, and its data-parallel synchronisation (same stage across
the m machines) proportional to that share: its communication cost = share × model bytes ×
2(m − 1)/m ÷ its bandwidth + 2(m − 1) latencies (a ring all-reduce: Device.sync). Stages go to
devices by the ratio of speed to that cost (the communication ratio), largest first; ties
(equal bandwidths make the ratio the same for every device): the fastest first.

**Partition**: binary x[l, s] — layer l in stage s —, contiguous stages, none empty; t_s = stage
s's time per micro-batch (its compute on its device + its boundary's activation and gradient
transfers), z ≥ every t_s, w ≥ each stage's synchronisation per mini-batch;
minimise Σ_s t_s + (k − 1)·z + w: a micro-batch's way through every stage and back (the 1F1B
pipeline's fill and drain), the other k − 1 at the slowest stage's pace, then the slowest synchronisation — the usual pipeline
estimate "slowest stage + (micro-batches − 1) × the slowest stage", with the fill counted stage by
stage (a pipeline with one slow stage fills through the fast ones at their pace; the 1F1B simulator
gives exactly this when the slowest stage is the last and every stage's backward is the same
multiple of its forward, at most this when the slowest is earlier, and can exceed it when stages'
forward : backward ratios differ: tests). Transfers count here as the sending stage's time; the
simulator takes them as delay on the link. The plan's prediction simulates the 1F1B schedule
instead (ndnps.exchanges.pipeline.schedule.simulate), each stage's synchronisation after its own
last backward.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class Layer:
    name: str
    forward: float              # s per micro-batch on the fastest device
    backward: float
    activation_bytes: float     # its output, per micro-batch
    param_bytes: float
    recomputed: float = 0.0     # of backward: the forward run again (a recomputing stage)


@dataclass(frozen=True)
class Device:
    name: str
    speed: float                # relative compute speed
    bandwidth: float = 1.25e7   # bytes/s of its links (100 Mbit/s)
    latency: float = 0.0        # s a transfer takes besides its bytes (a round trip)

    def transfer(self, nbytes: float) -> float:
        return self.latency + nbytes / self.bandwidth

    def sync(self, nbytes: float, machines: int) -> float:
        """A ring all-reduce of `nbytes` among the same stage of `machines` machines: 2(m − 1)
        steps of nbytes / m each."""
        if machines < 2:
            return 0.0
        return 2 * (machines - 1) * (self.latency + nbytes / machines / self.bandwidth)


@dataclass
class Split:
    stages: list[list[int]]     # layer indices per stage, in stage order
    devices: list[Device]       # the device of each stage
    stage_seconds: list[float]  # per micro-batch: compute + boundary transfers
    sync_seconds: list[float]   # per mini-batch: the stage's data-parallel synchronisation
    objective: float            # Σ stages + (k − 1) · max stage + max sync
    optimal: bool = True        # False: the solver stopped at its time limit (the best found)

    @property
    def bounds(self) -> list[tuple[int, int]]:
        return [(s[0], s[-1]) for s in self.stages]


def order_devices(devices: Sequence[Device], model_bytes: float, machines: int) -> list[Device]:
    """Order: the devices in stage order (stage 1 first)."""
    total = sum(d.speed for d in devices)

    def ratio(d: Device) -> float:
        cost = d.sync(d.speed / total * model_bytes, machines)
        return d.speed / cost if cost > 0 else float("inf")
    return sorted(devices, key=lambda d: (-round(ratio(d), 9), -d.speed))


def stage_costs(layers: Sequence[Layer], devices: Sequence[Device], stages: list[list[int]],
                machines: int) -> tuple[list[float], list[float]]:
    """Each stage's time per micro-batch and synchronisation per mini-batch."""
    fastest = max(d.speed for d in devices)
    times, syncs = [], []
    for s, (idx, dev) in enumerate(zip(stages, devices)):
        slow = fastest / dev.speed
        compute = sum(layers[i].forward + layers[i].backward for i in idx) * slow
        # the boundary: its last layer's activation out, the gradient back (and the previous
        # stage's in: counted on the sender's side, once)
        out = 2 * dev.transfer(layers[idx[-1]].activation_bytes) if s < len(stages) - 1 \
            else 0.0
        times.append(compute + out)
        syncs.append(dev.sync(sum(layers[i].param_bytes for i in idx), machines))
    return times, syncs


def objective(times: Sequence[float], syncs: Sequence[float], micro: int) -> float:
    """The integer program's estimate of a mini-batch: every stage once (a micro-batch's way
    through the pipeline and back), k − 1 more micro-batches at the slowest stage's pace (1F1B's
    steady state), then the slowest synchronisation."""
    return sum(times) + (micro - 1) * max(times) + max(syncs)


def partition(layers: Sequence[Layer], devices: Sequence[Device], micro: int,
              machines: int = 1, time_limit: float = 10.0) -> Split:
    """Split: the contiguous split of `layers` over `devices` (in stage order) minimising
    Σ stages + (micro − 1) × the slowest stage + the slowest synchronisation (the module's
    docstring). ValueError: fewer layers than
    stages, or no solution within `time_limit`."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    L, n = len(layers), len(devices)
    if n < 1 or L < n:
        raise ValueError(f"{L} layers cannot make {n} non-empty stages")
    fastest = max(d.speed for d in devices)
    factor = 2 * (machines - 1) / machines if machines > 1 else 0.0
    # variables: x[l, s] (L·n binaries), b[l, s] for l < L - 1, s < n - 1 (boundaries), z, w
    nx, nb = L * n, (L - 1) * max(n - 1, 0)
    N = nx + nb + 2
    X = lambda l, s: l * n + s                       # noqa: E731 (index helpers)
    B = lambda l, s: nx + l * (n - 1) + s            # noqa: E731
    Z, W = nx + nb, nx + nb + 1
    rows: list[np.ndarray] = []
    lo: list[float] = []
    hi: list[float] = []

    def row(coefs: dict[int, float], low: float, high: float) -> None:
        r = np.zeros(N)
        for i, c in coefs.items():
            r[i] += c
        rows.append(r)
        lo.append(low)
        hi.append(high)
    for l in range(L):                               # each layer in one stage
        row({X(l, s): 1.0 for s in range(n)}, 1.0, 1.0)
    for l in range(L - 1):                           # stages in layer order
        row({**{X(l, s): float(s) for s in range(n)},
             **{X(l + 1, s): -float(s) for s in range(n)}}, -np.inf, 0.0)
    for s in range(n):                               # none empty
        row({X(l, s): 1.0 for l in range(L)}, 1.0, np.inf)
    for l in range(L - 1):                           # b >= x[l, s] - x[l+1, s]
        for s in range(n - 1):
            row({B(l, s): 1.0, X(l, s): -1.0, X(l + 1, s): 1.0}, 0.0, np.inf)
    for s, dev in enumerate(devices):
        slow = fastest / dev.speed
        stage = {X(l, s): (layers[l].forward + layers[l].backward) * slow for l in range(L)}
        if s < n - 1:
            for l in range(L - 1):
                stage[B(l, s)] = 2 * dev.transfer(layers[l].activation_bytes)
        row({**{i: -c for i, c in stage.items()}, Z: 1.0}, 0.0, np.inf)       # z >= stage
        steps = 2 * (machines - 1) if machines > 1 else 0                     # w >= sync
        row({**{X(l, s): -layers[l].param_bytes * factor / dev.bandwidth for l in range(L)},
             W: 1.0}, steps * dev.latency, np.inf)
    # minimise Σ_s t_s + (k − 1)·z + w: a micro-batch's pass through every stage (the fill and
    # drain of the 1F1B pipeline), k − 1 more at the slowest stage's pace, the slowest sync
    c = np.zeros(N)
    for s, dev in enumerate(devices):
        slow = fastest / dev.speed
        for l in range(L):
            c[X(l, s)] += (layers[l].forward + layers[l].backward) * slow
        if s < n - 1:
            for l in range(L - 1):
                c[B(l, s)] += 2 * dev.transfer(layers[l].activation_bytes)
    c[Z], c[W] = float(micro - 1), 1.0
    integrality = np.zeros(N)
    integrality[:nx] = 1
    upper = np.full(N, np.inf)
    upper[:nx] = 1.0
    res = milp(c, constraints=LinearConstraint(np.array(rows), lo, hi),
               integrality=integrality, bounds=Bounds(np.zeros(N), upper),
               options={"time_limit": time_limit})
    if res.x is None:
        raise ValueError(f"no split found: {res.message}")
    x = np.round(res.x[:nx]).reshape(L, n)
    stages = [[l for l in range(L) if x[l, s] > 0.5] for s in range(n)]
    times, syncs = stage_costs(layers, devices, stages, machines)
    return Split(stages, list(devices), times, syncs, objective(times, syncs, micro),
                 optimal=res.status == 0)


def split_by_bounds(layers: Sequence[Layer], devices: Sequence[Device], sizes: Sequence[int],
                    micro: int, machines: int = 1) -> Split:
    """A split given by its stages' sizes (the baselines: equal layers, ...)."""
    if sum(sizes) != len(layers) or any(k < 1 for k in sizes):
        raise ValueError(f"stage sizes {list(sizes)} do not cover {len(layers)} layers")
    stages, at = [], 0
    for k in sizes:
        stages.append(list(range(at, at + k)))
        at += k
    times, syncs = stage_costs(layers, devices, stages, machines)
    return Split(stages, list(devices), times, syncs, objective(times, syncs, micro))
