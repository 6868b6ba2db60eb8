"""Pipeline + data-parallel training on devices of different speeds in a scenario
(docs/hetero.md): the `[[device_kinds]]` and `[pipeline]` tables, the plan made before the run,
and summary.json's `pipeline` block.

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
to the split chosen; each stage app (python -m apps.stage) then runs from the scenario as run.
"""
from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .feature import Feature, Launch, Rows
from .figures import SERIES_COLOURS, TIME_AXIS, legend, save
from .marks import read_summary
from .metrics import read_metrics
from .profiling import load_profile, profile_layers, profile_model
from .values import ScenarioError, fmt, known_keys, number

if TYPE_CHECKING:
    from ndnps.protocol.config import TrainingSpec

    from .config import Scenario
    from .nodes import AppNode

SPLITS = ("planned", "equal-layers", "equal-devices")
KEYS = {"machines", "micro_batches", "split", "recompute", "device_scale", "device_time",
        "profile_samples", "profile", "bandwidth_mbps", "latency_ms"}
DEVICE_TIMES = ("profiled", "measured")
WARMUP_STEPS = 2            # the first steps carry start-up (as report.WARMUP_VERSIONS)
STAGES_DIR = "stages"       # the run directory's folder of each stage's final parameters


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
    n_train = len(load_dataset(t.model.dataset, t.model.seed, **t.model.dataset_kwargs()).X_train)
    if steps_per_epoch(n_train, p.machines, t.sgd.batch) < 1:
        raise ScenarioError(f"training.batch: {n_train} samples over {p.machines} machines "
                            f"hold no mini-batch of {t.sgd.batch}")
    micro = -(-t.sgd.batch // p.micro_batches)
    measured = load_profile(p.profile, t, micro) if p.profile else \
        profile_model(t, micro, p.profile_samples, "pipeline.profile_samples")
    layers, devices = _planner_inputs(p, measured, [(k, v) for k, v in p.kinds])
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


def _planner_inputs(p: Pipeline, measured: list, kinds: list[tuple[str, float]]
                    ) -> tuple[list, list]:
    """The profile as the devices run it and the devices (`kinds` in their order), as the
    planner takes them."""
    from ndnps.planner.partition import Device
    from ndnps.planner.plan import on_devices
    return (on_devices(measured, p.device_scale, p.recompute),
            [Device(k, v, p.bandwidth_mbps * 1e6 / 8, p.latency_ms / 1000) for k, v in kinds])


# ---- the summary ------------------------------------------------------------------------------

def _steady(records: list[dict]) -> list[dict]:
    steps = [r for r in records if "version" in r and "event" not in r]
    return steps[WARMUP_STEPS:] if len(steps) > WARMUP_STEPS + 2 else steps


def _median(values: list[Any]) -> float | None:
    known = [float(v) for v in values if v is not None]
    return statistics.median(known) if known else None


def pipeline_summary(run_dir: Path, sc: "Scenario") -> dict[str, Any]:
    """summary.json's `pipeline` block and the top-level figures a pipeline replaces."""
    p: Pipeline = sc.pipeline
    t = sc.training
    grid = t.stages.stage_apps()
    recs = {a: read_metrics(run_dir / "metrics" / f"{a}.jsonl")
            if (run_dir / "metrics" / f"{a}.jsonl").exists() else [] for row in grid for a in row}
    steady = {a: _steady(r) for a, r in recs.items()}
    recorder = [r for r in steady[t.recorder]]
    times = [r["t"] for r in recorder]
    iteration = _median([b - a for a, b in zip(times, times[1:])])
    kinds = t.stages.stage_devices()
    profiled = _profiled_step(p, t)
    stages = []
    for s, (kind, speed) in enumerate(kinds):
        column = [row[s] for row in grid]
        busy = _median([r.get("busy") for a in column for r in steady[a]])
        cpu = _median([r.get("cpu") for a in column for r in steady[a]])
        device = _median([r.get("device") for a in column for r in steady[a]])
        factor = next((r.get("device_factor") for a in column for r in recs[a]
                       if r.get("event") == "start"), None)
        measured = _median([r.get("measured_factor") for a in column for r in steady[a]])
        held = max((r.get("peak_activation_bytes", 0) for a in column for r in steady[a]),
                   default=0)
        kept = max((r.get("peak_activation_bytes_kept", 0) for a in column for r in steady[a]),
                   default=0)
        stages.append({
            "stage": s + 1, "kind": kind, "speed": speed, "device_factor": factor,
            "layers": (p.plan or {}).get("stage_layers", [[]] * len(kinds))[s],
            "busy_seconds": busy,
            "cpu_seconds": cpu,
            # the step's CPU time (rehearsals not counted) and device time ÷ the profile's
            "cpu_vs_profile": _ratio(cpu, profiled[s] / factor if profiled and factor else None),
            "device_vs_profile": _ratio(device, profiled[s] if profiled else None),
            "measured_factor": measured,
            "speed_followed": measured / factor if measured and factor else None,
            "idle_fraction": 1 - busy / iteration if busy is not None and iteration else None,
            "pipeline_seconds": _median([r.get("pipeline") for a in column for r in steady[a]]),
            "sync_seconds": _median([r.get("sync") for a in column for r in steady[a]]),
            "peak_activation_bytes": held, "peak_activation_bytes_kept": kept,
            "recompute_seconds": _median([r.get("recompute_device") for a in column
                                          for r in steady[a]])})
    times = [st["busy_seconds"] for st in stages if st["busy_seconds"] is not None]
    predicted = (p.plan or {}).get("predicted_seconds")
    identical, mismatches = _identical(recs, grid)
    scales = [st["device_vs_profile"] for st in stages]
    again = _predict(p, t, scales) if None not in scales else None
    out: dict[str, Any] = {
        "plan": p.plan, "split": p.split, "recompute": p.recompute,
        "device_time": t.device.device_time, "stages": stages,
        "stage_imbalance": max(times) / statistics.mean(times) if times else None,
        "iteration_seconds": iteration, "predicted_iteration_seconds": predicted,
        "predicted_vs_measured": predicted / iteration if predicted and iteration else None,
        # the prediction had it known each stage's compute as it ran: ÷ measured is what the
        # transfers, the synchronisation and the event loops add beyond the plan's model
        "predicted_from_run_compute": again,
        "run_compute_predicted_vs_measured": _ratio(again, iteration),
        "samples_per_second": t.stages.machines * t.sgd.batch / iteration if iteration else None,
        "parameters_identical": identical, "digest_mismatches": mismatches,
        "speed_followed_within_10_percent": all(
            st["speed_followed"] is not None and abs(st["speed_followed"] - 1) <= 0.1
            for st in stages),
        "memory_saved": (1 - sum(st["peak_activation_bytes"] for st in stages)
                         / sum(st["peak_activation_bytes_kept"] for st in stages))
        if sum(st["peak_activation_bytes_kept"] for st in stages) else None}
    out.update(_accuracy(run_dir, sc, recs, grid))
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _split_of(p: Pipeline, t: "TrainingSpec") -> tuple[Any, list]:
    """The split run and the layers as its devices run them, rebuilt from the plan."""
    from ndnps.planner.partition import split_by_bounds
    assert p.plan is not None
    layers, devices = _planner_inputs(p, profile_layers(p.plan["profile"]),
                                      t.stages.stage_devices())
    return split_by_bounds(layers, devices, t.stages.stage_layers, p.micro_batches,
                           p.machines), layers


def _profiled_step(p: Pipeline, t: "TrainingSpec") -> list[float] | None:
    """Each stage's device seconds per step as the plan's profile has them (its micro-batches'
    rows in proportion to the profile's micro-batch)."""
    if not p.plan or not p.plan.get("profile"):
        return None
    split, layers = _split_of(p, t)
    fastest = max(d.speed for d in split.devices)
    profiled = t.sgd.batch / -(-t.sgd.batch // p.micro_batches)     # profiled micro-batches a step
    return [profiled * sum(layers[i].forward + layers[i].backward for i in idx)
            * fastest / d.speed for idx, d in zip(split.stages, split.devices)]


def _predict(p: Pipeline, t: "TrainingSpec", compute: list[float]) -> float | None:
    from ndnps.planner.plan import predict
    if not p.plan or not p.plan.get("profile"):
        return None
    split, layers = _split_of(p, t)
    return predict(split, layers, p.micro_batches, compute)


def _identical(recs: dict[str, list[dict]], grid: list[list[str]]) -> tuple[bool, list[int]]:
    """The same stage of every machine holds the same parameters after every step."""
    bad: set[int] = set()
    for s in range(len(grid[0])):
        by_version: dict[int, set[str]] = {}
        for row in grid:
            for r in recs[row[s]]:
                if "digest" in r:
                    by_version.setdefault(r["version"], set()).add(r["digest"])
        bad |= {v for v, d in by_version.items() if len(d) > 1}
    return not bad, sorted(bad)


def _accuracy(run_dir: Path, sc: "Scenario", recs: dict[str, list[dict]],
              grid: list[list[str]]) -> dict[str, Any]:
    """The model of the first machine's stages (their saved parameters) on the test set, and
    the single-process reference of the same mini-batches beside it, with both loss curves
    (per epoch: the mean over steps and machines)."""
    from ndnps.ml.data import load_dataset
    from ndnps.ml.models import build_model
    from ndnps.ml.train import steps_per_epoch, train_sync_reference
    t = sc.training
    ds = load_dataset(t.model.dataset, t.model.seed, **t.model.dataset_kwargs())
    spec = {"n_in": ds.n_features, "n_classes": ds.n_classes, **t.model.model_spec()}
    model = build_model(spec, t.model.seed)
    params: dict[str, np.ndarray] = {}
    for a in grid[0]:
        path = run_dir / STAGES_DIR / f"{a}.npz"
        if not path.exists():
            return {"final_accuracy": None, "accuracy_note": f"{path.name} missing"}
        with np.load(path) as f:
            params.update({k: f[k] for k in f.files})
    if set(params) != set(model.params):
        return {"final_accuracy": None, "accuracy_note": "the stages' parameters do not make "
                "the model"}
    model.load_params(params)
    accuracy = model.accuracy(ds.X_test, ds.y_test)
    out: dict[str, Any] = {"final_accuracy": accuracy}
    sgd, machines = t.sgd, t.stages.machines
    spe = steps_per_epoch(len(ds.X_train), machines, sgd.batch)
    total = min(sgd.epochs * spe, sgd.max_versions) if sgd.max_versions else sgd.epochs * spe
    ref = train_sync_reference(ds, t.model.model_spec(), machines, -(-total // spe), sgd.batch,
                               sgd.lr, sgd.momentum, sgd.weight_decay, t.model.seed)
    losses: dict[int, list[float]] = {}
    for row in grid:
        for r in recs[row[-1]]:
            if r.get("loss") is not None and "event" not in r:
                losses.setdefault((r["version"] - 1) // spe, []).append(r["loss"])
    # whole epochs only (every machine's every step), beside the reference's same epochs
    whole = [e for e in range(total // spe) if len(losses.get(e, [])) == t.stages.machines * spe]
    curve = [float(np.mean(losses[e])) for e in whole]
    ref_curve = [ref["history"][e]["loss"] for e in whole]
    if total % spe:             # the reference trained the last epoch whole: not comparable
        out["reference_note"] = (f"the reference trains whole epochs: {total} steps are not a "
                                 f"multiple of {spe}; accuracy not compared")
    else:
        out.update({"reference_accuracy": ref["final_accuracy"],
                    "accuracy_vs_reference": accuracy - ref["final_accuracy"]})
    return {**out, "loss_curve": curve, "reference_loss_curve": ref_curve,
            "loss_max_difference": max((abs(a - b) for a, b in zip(curve, ref_curve)),
                                       default=None)}


def write_plan(run_dir: Path, plan: dict[str, Any]) -> None:
    (run_dir / "plan.json").write_text(json.dumps(plan, indent=2))


def stage_rows(p: dict) -> list[tuple[str, object]]:
    """The final table of a pipeline run: the stages, then the figures docs/hetero.md reports."""
    rows: list[tuple[str, object]] = [
        (f"stage {st['stage']}: {st['kind']} x{fmt(st['device_factor'], '.0f')}, layers "
         f"{st['layers'][0]}-{st['layers'][-1]}" if st["layers"] else f"stage {st['stage']}",
         f"busy {fmt(st['busy_seconds'], '.3f')} s, idle {fmt(st['idle_fraction'], '.2f')}")
        for st in p["stages"]]
    return rows + [
        ("final accuracy (reference)", f"{fmt(p['final_accuracy'], '.4f')} "
                                       f"({fmt(p.get('reference_accuracy'), '.4f')})"),
        ("iteration (median, s; predicted)", f"{fmt(p['iteration_seconds'], '.3f')} "
                                             f"({fmt(p['predicted_iteration_seconds'], '.3f')})"),
        ("samples/s", fmt(p["samples_per_second"], ".1f")),
        ("stage imbalance (max / mean busy)", fmt(p["stage_imbalance"], ".3f")),
        ("stages identical across machines", p["parameters_identical"]),
        ("activation memory saved (recompute)", fmt(p["memory_saved"], ".2f"))]


def plot_loss(run_dir: Path, sc: "Scenario", path: Path) -> Path:
    """The loss each machine's last stage computed, step by step, and the final accuracy of
    the stages' model on the test set (the stages evaluate nothing while they train)."""
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4.5))
    end = 0.0                               # the last step's time: where the accuracy goes
    for i, row in enumerate(sc.training.stages.stage_apps()):
        last = run_dir / "metrics" / f"{row[-1]}.jsonl"
        recs = [r for r in (read_metrics(last) if last.exists() else [])
                if r.get("loss") is not None and "event" not in r and "t" in r]
        ax.plot([r["t"] for r in recs], [r["loss"] for r in recs],
                color=SERIES_COLOURS[i % len(SERIES_COLOURS)], lw=0.8,
                label=f"training loss (machine {i + 1}, stage {row[-1]})")
        end = max([end, *(r["t"] for r in recs)])
    accuracy = read_summary(run_dir).get("final_accuracy")
    handles = list(ax.get_lines())
    if accuracy is not None:
        ax2 = ax.twinx()
        ax2.set_ylim(0, 1.05)
        ax2.set_ylabel("test accuracy")
        handles += ax2.plot([end], [accuracy], "o", color="tab:blue",
                            label=f"final test accuracy {accuracy:.4f} (the stages' model)")
    ax.set_xlabel(TIME_AXIS)
    ax.set_ylabel("loss")
    legend(ax, handles)
    ax.set_title(f"{sc.name}: the stages' loss, and the final accuracy")
    fig.tight_layout()
    return save(fig, path)


class PipelineFeature(Feature):
    """[[device_kinds]] and [pipeline]: pipeline + data parallel on devices of different
    speeds, planned before the run."""
    name = "pipeline"
    tables = ("device_kinds", "pipeline")
    draws_loss = True

    def active(self, sc: "Scenario") -> bool:
        return sc.pipeline is not None

    def training(self, doc: dict[str, Any], sc: "Scenario",
                 table: dict[str, Any]) -> dict[str, Any]:
        if "pipeline" not in doc and "device_kinds" not in doc:
            return table
        if "workers" in doc.get("training", {}):
            raise ScenarioError("training.workers: a pipeline names its stage apps "
                                "m<j>-<kind> itself")
        sc.pipeline = parse(doc, sc)
        table = training_table(sc.pipeline, table)
        sc.workers = len(table["workers"])
        return table

    def check_host(self, sc: "Scenario") -> None:
        if sc.netns:
            raise ScenarioError("pipeline: on a local star, not with --netns (not built)")

    def prepare(self, sc: "Scenario", run_dir: Path) -> list[str]:
        # the planner on this machine: the stages and their layers, before anything runs
        write_plan(run_dir, make_plan(sc))
        return []

    def program(self, sc: "Scenario", run_dir: Path, app: "AppNode") -> Launch | None:
        if app.role != "peer" or not sc.job_of(app.name).stages.machines:
            return None
        # a stage saves its final parameters: the model the summary evaluates
        return Launch("stage", ["apps.stage", "--save",
                                str(run_dir / STAGES_DIR / f"{app.name}.npz")])

    def loss_policy(self, job: "TrainingSpec", name: str, role: str) -> str | None:
        if role != "stage":
            return None
        return (f"the pipeline stops: it cannot go on without stage {name} (its other stages "
                f"stop once it is silent for training.worker_timeout = "
                f"{job.liveness.worker_timeout:g} s)")

    def summarize(self, run_dir: Path, sc: "Scenario", summary: dict[str, Any],
                  wall_seconds: float) -> None:
        block = summary["pipeline"] = pipeline_summary(run_dir, sc)
        for key in ("final_accuracy", "parameters_identical", "digest_mismatches"):
            summary[key] = block.get(key)
        summary["collective"] = "pipeline"

    def rows(self, summary: dict[str, Any], rows: Rows) -> Rows:
        return [("scenario", summary["scenario"]), *stage_rows(summary["pipeline"]),
                ("wall seconds", summary["wall_seconds"])]

    def plot(self, run_dir: Path, sc: "Scenario", plots: Path) -> list[Path]:
        return [plot_loss(run_dir, sc, plots / "loss_accuracy.png")]
