"""Pipeline + data-parallel training on devices of different speeds in a scenario
(docs/hetero.md): its Feature — the tables read, the plan made before the run, the stage apps
started — and what the run reports: summary.json's `pipeline` block, the final table's rows,
the loss figure. The `[[device_kinds]]` and `[pipeline]` tables and the plan: pipeline_plan.py.
"""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .feature import Feature, Launch, Rows
from .figures import SERIES_COLOURS, TIME_AXIS, legend, save
from .marks import read_summary
from .metrics import read_metrics
from .pipeline_plan import Pipeline, make_plan, parse, training_table, write_plan
from .profiling import profile_layers
from .values import ScenarioError, fmt

if TYPE_CHECKING:
    from ndnps.protocol.config import TrainingSpec

    from .config import Scenario
    from .nodes import AppNode

WARMUP_STEPS = 2            # the first steps carry start-up (as report.WARMUP_VERSIONS)
STAGES_DIR = "stages"       # the run directory's folder of each stage's final parameters


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
    layers, devices = p.planner_inputs(profile_layers(p.plan["profile"]),
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
        return Launch("stage", ["ndnps.apps.stage", "--save",
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
