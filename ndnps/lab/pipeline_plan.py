"""Pipeline + data-parallel training on devices of different speeds in a scenario
(docs/hetero.md): the `[[device_kinds]]` and `[pipeline]` tables and the plan made before the
run; the Feature and what the run reports (summary.json's `pipeline` block): pipeline.py.

    [[device_kinds]]
    name = "slow"
    speed = 1.0                # relative; each machine has one device of every kind
    ...
    [pipeline]
    machines = 2               # m virtual machines, data parallel
    micro_batches = 4          # k per mini-batch (training.batch samples per machine)
    split = "planned"          # the planner's integer program | "equal-layers" | "equal-devices"
    recompute = false          # stages drop activations after the forward, recompute them
    device_scale = 16.0        # the fastest kind is this many times slower than one core here
    device_time = "profiled"   # a device's time: factor × the work's profiled cost | "measured":
                               # × its CPU time as it ran (ndnps.ml.device says why not)
    profile_samples = 512      # the planner's pre-training (a, docs/hetero.md)
    profile = ""               # a plan.json of an earlier run: plan from its profile instead
                               # of profiling again (runs compared side by side: one profile)
    bandwidth_mbps = 120.0     # the planner's model of a transfer: bytes / bandwidth ...
    latency_ms = 2.0           # ... + latency (this machine's NDN stack: docs/hetero.md)

Before the apps start, the runner profiles the model on this machine (ndnps.planner.profile:
CPU time per layer, the same measure the devices scale), orders the kinds into stages and
splits the layers (ndnps.planner.plan), writes `plan.json` and sets the training's
`stage_kinds`, `stage_layers` and `workers` (m<j>-<kind>, machine by machine in stage order)
to the split chosen; each stage app (python -m ndnps.apps.stage) then runs from the scenario as run.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .profiling import load_profile, profile_model
from .values import ScenarioError, known_keys, number

if TYPE_CHECKING:

    from .config import Scenario

SPLITS = ("planned", "equal-layers", "equal-devices")
KEYS = {"machines", "micro_batches", "split", "recompute", "device_scale", "device_time",
        "profile_samples", "profile", "bandwidth_mbps", "latency_ms"}
DEVICE_TIMES = ("profiled", "measured")


@dataclass
class Pipeline:
    kinds: list[tuple[str, float]] = field(default_factory=list)   # [[device_kinds]]
    machines: int = 2
    micro_batches: int = 4
    split: str = "planned"
    recompute: bool = False
    device_scale: float = 1.0
    device_time: str = "profiled"
    profile_samples: int = 512
    profile: str = ""                           # a plan.json whose profile to plan from
    bandwidth_mbps: float = 120.0
    latency_ms: float = 2.0
    plan: dict[str, Any] | None = None          # made by `make_plan` before the run

    def planner_inputs(self, measured: list, kinds: list[tuple[str, float]]) -> tuple[list, list]:
        """The profile as the devices run it and the devices (`kinds` in their order), as the
        planner takes them."""
        from ndnps.planner.partition import Device
        from ndnps.planner.plan import on_devices
        return (on_devices(measured, self.device_scale, self.recompute),
                [Device(k, v, self.bandwidth_mbps * 1e6 / 8, self.latency_ms / 1000)
                 for k, v in kinds])


def parse(doc: dict[str, Any], sc: "Scenario") -> Pipeline:
    """[[device_kinds]] and [pipeline] (errors name the key); the training gets the
    pipeline's fields and an equal split until `make_plan` replaces it."""
    kinds_doc, table = doc.get("device_kinds"), doc.get("pipeline")
    if kinds_doc is None or table is None:
        raise ScenarioError(("device_kinds" if kinds_doc is None else "pipeline")
                            + ": a pipeline needs both [[device_kinds]] and [pipeline]")
    if not isinstance(kinds_doc, list) or not kinds_doc or \
            not all(isinstance(k, dict) for k in kinds_doc):
        raise ScenarioError("device_kinds: expected an array of tables ([[device_kinds]] "
                            "name = \"slow\", speed = 1.0)")
    p = Pipeline()
    for i, entry in enumerate(kinds_doc):
        where = f"device_kinds[{i}]"
        for key in entry:
            if key not in ("name", "speed"):
                raise ScenarioError(f"{where}.{key}: unknown key (known: name, speed)")
        name = entry.get("name")
        if not isinstance(name, str) or not name or "/" in name or ":" in name:
            raise ScenarioError(f"{where}.name: a name without '/' or ':', got {name!r}")
        if name in [k for k, _ in p.kinds]:
            raise ScenarioError(f"{where}.name: {name!r} named twice")
        p.kinds.append((name, number(entry.get("speed", 0.0), f"{where}.speed", 1e-6)))
    known_keys(table, "pipeline", KEYS)
    p.machines = number(table.get("machines", p.machines), "pipeline.machines", 1, 16, True)
    p.micro_batches = number(table.get("micro_batches", p.micro_batches),
                              "pipeline.micro_batches", 1, 256, True)
    p.split = table.get("split", p.split)
    if p.split not in SPLITS:
        raise ScenarioError(f"pipeline.split: one of {', '.join(SPLITS)}, got {p.split!r}")
    p.recompute = table.get("recompute", p.recompute)
    if not isinstance(p.recompute, bool):
        raise ScenarioError(f"pipeline.recompute: expected true or false, got {p.recompute!r}")
    p.device_scale = number(table.get("device_scale", p.device_scale), "pipeline.device_scale",
                             1.0, 1000.0)
    p.device_time = table.get("device_time", p.device_time)
    if p.device_time not in DEVICE_TIMES:
        raise ScenarioError(f"pipeline.device_time: one of {', '.join(DEVICE_TIMES)}, got "
                            f"{p.device_time!r}")
    p.profile_samples = number(table.get("profile_samples", p.profile_samples),
                                "pipeline.profile_samples", 1, 1 << 20, True)
    p.profile = table.get("profile", p.profile)
    if not isinstance(p.profile, str):
        raise ScenarioError(f"pipeline.profile: a plan.json's path, got {p.profile!r}")
    p.bandwidth_mbps = number(table.get("bandwidth_mbps", p.bandwidth_mbps),
                               "pipeline.bandwidth_mbps", 0.001)
    p.latency_ms = number(table.get("latency_ms", p.latency_ms), "pipeline.latency_ms", 0.0)
    _check_training(doc.get("training", {}), p)
    if "jobs" in doc or "share" in doc or "ina" in doc:
        raise ScenarioError("pipeline: one job, without [share] or [ina] (not built)")
    if sc.topology != "star" or sc.netns:
        raise ScenarioError("pipeline: on a local star (topology.kind = \"star\", not "
                            "--netns: not built)")
    return p


def _check_training(t: Any, p: Pipeline) -> None:
    """What a pipeline asks of [training], said in the keys the file has (the training's
    pipeline fields are filled from [pipeline] after)."""
    if not isinstance(t, dict):
        return                              # the training's own check names it
    if t.get("model", "mlp") != "mlp":
        raise ScenarioError(f"training.model: a pipeline cuts an mlp's layers into stages, "
                            f"got {t['model']!r}")
    if t.get("mode", "sync") != "sync":
        raise ScenarioError("training.mode: a pipeline trains in sync mode")
    hidden = t.get("hidden", [64])
    if isinstance(hidden, list):
        _check_layers(len(hidden) + 1, p)
    batch = t.get("batch", 32)
    if isinstance(batch, int) and batch < p.micro_batches:
        raise ScenarioError(f"pipeline.micro_batches: {p.micro_batches} micro-batches of a "
                            f"mini-batch of training.batch = {batch}")


def _check_layers(layers: int, p: Pipeline) -> None:
    if layers < len(p.kinds):
        raise ScenarioError(f"training.hidden: {layers} layers cannot make {len(p.kinds)} "
                            f"stages (one per device kind)")


def training_table(p: Pipeline, training: dict[str, Any]) -> dict[str, Any]:
    """[training] as the pipeline runs it, an equal split standing in for the plan."""
    from ndnps.planner.plan import equal_sizes
    hidden = training.get("hidden", [64])
    n = len(p.kinds)
    sizes = equal_sizes((len(hidden) if isinstance(hidden, list) else 1) + 1, n)
    kinds = [f"{k}:{v:g}" for k, v in p.kinds]
    return {**training, "machines": p.machines, "collective": "ring",
            "micro_batches": p.micro_batches, "recompute": p.recompute,
            "device_scale": p.device_scale, "stage_kinds": kinds,
            "stage_layers": sizes if min(sizes, default=0) >= 1 else [1] * n,
            "workers": [f"m{j + 1}-{k}" for j in range(p.machines) for k, _ in p.kinds]}


def make_plan(sc: "Scenario") -> dict[str, Any]:
    """The planner on this machine: profile, order, split (ndnps.planner); the scenario's
    training set to the split its pipeline's `split` chooses. Returns the plan as written to
    plan.json."""
    from ndnps.planner.plan import make_plan as plan_of
    from ndnps.protocol.config import ConfigError
    p, t = sc.pipeline, sc.training
    _check_layers(len(t.model.hidden) + 1, p)
    from ndnps.ml.data import load_dataset
    from ndnps.ml.train import steps_per_epoch
    n_train = len(load_dataset(t.model.dataset, t.model.seed,
                               **t.model.dataset_kwargs()).X_train)
    if steps_per_epoch(n_train, p.machines, t.sgd.batch) < 1:
        raise ScenarioError(f"training.batch: {n_train} samples over {p.machines} machines "
                            f"hold no mini-batch of {t.sgd.batch}")
    micro = -(-t.sgd.batch // p.micro_batches)
    measured = load_profile(p.profile, t, micro) if p.profile else \
        profile_model(t, micro, p.profile_samples, "pipeline.profile_samples")
    layers, devices = p.planner_inputs(measured, [(k, v) for k, v in p.kinds])
    plan = plan_of(layers, devices, p.micro_batches, p.machines)
    stages = {"planned": plan.split.stages, **plan.baseline_splits}[
        {"planned": "planned", "equal-layers": "equal_layers",
         "equal-devices": "equal_devices"}[p.split]]
    predicted = plan.predicted if p.split == "planned" else \
        plan.baselines[p.split.replace("-", "_")]
    order = [(d.name, d.speed) for d in plan.devices]
    split = replace(t.stages, stage_kinds=tuple(f"{k}:{v:g}" for k, v in order),
                    stage_layers=tuple(len(s) for s in stages))
    changes: dict[str, Any] = {
        "stage_kinds": split.stage_kinds, "stage_layers": split.stage_layers,
        "device_time": p.device_time,
        "workers": [a for row in split.stage_apps() for a in row]}
    if p.device_time == "profiled":     # per sample, this machine's core (the apps scale it)
        changes["layer_seconds"] = [c / micro for l in measured for c in (l.forward, l.backward)]
    try:
        sc.replace_job(t, t.with_values(**changes))
    except ConfigError as e:
        raise ScenarioError(str(e)) from None
    p.plan = {**plan.as_dict(), "split": p.split, "stage_layers": stages,
              "predicted_seconds": round(predicted, 6), "device_scale": p.device_scale,
              "bandwidth_mbps": p.bandwidth_mbps, "latency_ms": p.latency_ms,
              "profile": [{"layer": l.name, "forward": l.forward, "backward": l.backward,
                           "activation_bytes": l.activation_bytes,
                           "param_bytes": l.param_bytes} for l in measured]}
    return p.plan


def write_plan(run_dir: Path, plan: dict[str, Any]) -> None:
    (run_dir / "plan.json").write_text(json.dumps(plan, indent=2))
