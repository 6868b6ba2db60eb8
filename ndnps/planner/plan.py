"""The plan (the planner's Order, Split and Predict steps put together, docs/hetero.md): devices in
stage order, the layers' split, each stage's predicted time, the iteration's predicted time (the
1F1B pipeline simulated, then the slowest stage's synchronisation), and the baselines beside it —
the equal layer split, the split that takes every device as equally fast, and pure data parallel
(every device the whole model, equal shares of the batch, as a PS gives them)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from ndnps.exchanges.pipeline.schedule import simulate

from .partition import Device, Layer, Split, order_devices, partition, split_by_bounds


@dataclass
class Plan:
    devices: list[Device]
    split: Split
    micro: int
    machines: int
    predicted: float                    # s per mini-batch
    solve_seconds: float
    baselines: dict[str, float] = field(default_factory=dict)   # predicted s per mini-batch
    baseline_splits: dict[str, list[list[int]]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"machines": self.machines, "micro_batches": self.micro,
                "stages": [{"stage": s + 1, "device": d.name, "speed": d.speed,
                            "layers": idx, "seconds_per_micro_batch": round(t, 6),
                            "sync_seconds": round(y, 6)}
                           for s, (d, idx, t, y) in enumerate(zip(
                               self.devices, self.split.stages, self.split.stage_seconds,
                               self.split.sync_seconds))],
                "predicted_iteration_seconds": round(self.predicted, 6),
                "solve_seconds": round(self.solve_seconds, 3),
                "optimal": self.split.optimal,
                "baselines": {k: round(v, 6) for k, v in self.baselines.items()},
                "baseline_splits": self.baseline_splits}


def on_devices(profile: Sequence[Layer], scale: float = 1.0,
               recompute: bool = False) -> list[Layer]:
    """The profile (this machine's core) as the devices run it: the fastest kind `scale` times
    slower; with recomputation, each backward runs the layer's forward again first."""
    again = 1.0 if recompute else 0.0
    return [replace(l, forward=l.forward * scale, backward=(l.backward + again * l.forward)
                    * scale, recomputed=again * l.forward * scale) for l in profile]


def predict(split: Split, layers: Sequence[Layer], micro: int,
            compute: Sequence[float] | None = None) -> float:
    """A mini-batch's time: the 1F1B pipeline of the split's stages simulated (each stage's
    forward and backward on its device, the boundaries' transfers), each stage then
    synchronised with the other machines from its last backward on; the last to finish.
    `compute`: each stage's forward and backward × this (a run's own compute ÷ the profile's:
    the prediction had the plan known what the run's devices took)."""
    fastest = max(d.speed for d in split.devices)
    fwd, bwd, links = [], [], []
    scales = list(compute) if compute is not None else [1.0] * len(split.stages)
    if len(scales) != len(split.stages):
        raise ValueError(f"compute: one factor per stage ({len(split.stages)}), got "
                         f"{len(scales)}")
    for s, (idx, dev) in enumerate(zip(split.stages, split.devices)):
        slow = fastest / dev.speed * scales[s]
        fwd.append(sum(layers[i].forward for i in idx) * slow)
        bwd.append(sum(layers[i].backward for i in idx) * slow)
        if s < len(split.stages) - 1:
            links.append(dev.transfer(layers[idx[-1]].activation_bytes))
    run = simulate(fwd, bwd, micro, links)
    return max(f + y for f, y in zip(run.finish, split.sync_seconds))


def equal_sizes(layers: int, stages: int) -> list[int]:
    return [layers // stages + (1 if s < layers % stages else 0) for s in range(stages)]


def data_parallel(layers: Sequence[Layer], devices: Sequence[Device], micro: int,
                  machines: int) -> float:
    """Every one of the machines × devices holds the whole model and computes an equal share of
    the mini-batches' micro-batches; the slowest paces, then the whole model is synchronised
    among all of them.  Nobody recomputes: a worker keeps its whole model's activations."""
    fastest = max(d.speed for d in devices)
    workers = machines * len(devices)
    share = micro * machines / workers                  # micro-batches each
    compute = max(sum(l.forward + l.backward - l.recomputed for l in layers) * share
                  * fastest / d.speed
                  for d in devices)
    model = sum(l.param_bytes for l in layers)
    sync = model * 2 * (workers - 1) / workers / min(d.bandwidth for d in devices)
    return compute + sync


def make_plan(layers: Sequence[Layer], devices: Sequence[Device], micro: int,
              machines: int) -> Plan:
    model_bytes = sum(l.param_bytes for l in layers)
    ordered = order_devices(devices, model_bytes, machines)
    t0 = time.perf_counter()
    split = partition(layers, ordered, micro, machines)
    solve = time.perf_counter() - t0
    plan = Plan(ordered, split, micro, machines, predict(split, layers, micro), solve)
    equal = split_by_bounds(layers, ordered, equal_sizes(len(layers), len(ordered)), micro,
                            machines)
    # planned as if every device were as fast as the fastest, run on the real ones
    same = partition(layers, [replace(d, speed=1.0) for d in ordered], micro,
                     machines)
    as_if = split_by_bounds(layers, ordered, [len(s) for s in same.stages], micro, machines)
    plan.baselines = {"equal_layers": predict(equal, layers, micro),
                      "equal_devices": predict(as_if, layers, micro),
                      "data_parallel": data_parallel(layers, devices, micro, machines)}
    plan.baseline_splits = {"equal_layers": equal.stages, "equal_devices": as_if.stages}
    return plan
