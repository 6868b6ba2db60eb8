"""Heterogeneous workers (pipeline + data parallel, docs/hetero.md), one run, the splits side by side:

    python -m bench hetero [--repeat 2] [--variants ...] [--quick] [--keep DIR] [--no-save]
                           [--analyse DIR]

The hetero scenario (scenarios/hetero.toml: 2 virtual machines × 3 device kinds, speeds
1 : 2 : 4, the digits MLP of 8 hidden layers in 3 pipeline stages, data parallel across the
machines) with its layers split:

* planned: the planner's integer program (ndnps.planner) on this machine's profile;
* equal-layers: the same number of layers per stage;
* equal-devices: the split the planner makes when it takes every device as equally fast;
* planned-recompute: planned, the stages recomputing their activations (memory for time);
* planned-measured: planned, each device's time its factor × the work's CPU time as it ran
  (`device_time = "measured"`; each operation rehearsed first, untimed, so that it finds its
  parameters in the caches: ndnps.ml.device), not × its profiled cost;
* data-parallel: no pipeline: a PS and 6 workers (one per device), each holding the whole model
  and computing 1/6 of the 2 machines' mini-batches (the same samples per step), its device
  emulated by `--slowdown` (its factor) on the same basis as the stages' (the profiled cost of
  its gradient), synchronised by the PS (persistent push);
* data-parallel-measured: the same, each device's time its factor × its CPU time as it ran
  (the baseline of planned-measured; a worker's one gradient a step is not rehearsed: one
  cold operation a step, where a stage has eight).

Every pipeline variant is planned from one profile: the first pipeline run's (its plan.json,
`pipeline.profile`), so that the variants differ in what they compare, not in a profile the
shared host's load moved. Per variant: iteration (median steady step), samples/s, stage
imbalance (max ÷ mean stage busy time), the planner's prediction ÷ measured and the same
prediction given each stage's compute as it ran ÷ measured (what the transfers and the event
loops add), each stage's CPU time ÷ the profile's, each stage's measured factor ÷ its
device's, accuracy against the single-process reference. The variants alternate `--repeat`
times; each figure is the median of its repeats. Separately, the integer program's solve time
for 8 to 20 layers. Targets: imbalance ≤ 1.15; prediction within 15 %; throughput ≥ 1.3 ×
equal-layers and ≥ data parallel, on each basis (planned with profiled devices,
planned-measured with measured ones: imbalance, prediction, ÷ data-parallel-measured); the
program solves in < 5 s for ≤ 20 layers.
"""
from __future__ import annotations

import json
import random
import shutil
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

from .common import ROOT, emit, fmt, log, median, ratio, rnd, save
from .scenario_runs import RunError, run_scenario, run_variants, variants_parser

SCENARIO = ROOT / "scenarios" / "hetero.toml"
VARIANTS = ("planned", "equal-layers", "equal-devices", "planned-recompute", "planned-measured",
            "data-parallel", "data-parallel-measured")
SETS = {"planned": [], "equal-layers": ['pipeline.split="equal-layers"'],
        "equal-devices": ['pipeline.split="equal-devices"'],
        "planned-recompute": ["pipeline.recompute=true"],
        "planned-measured": ['pipeline.device_time="measured"'], "data-parallel": [],
        "data-parallel-measured": ['training.device_time="measured"']}
DATA_PARALLEL = ("data-parallel", "data-parallel-measured")
PROFILE = "profile.json"    # in the runs' directory: the first pipeline run's plan.json
IMBALANCE, PREDICTION, OVER_EQUAL, SOLVE = 1.15, 0.15, 1.3, 5.0


def scenario_doc() -> dict:
    with open(SCENARIO, "rb") as f:
        return tomllib.load(f)


def data_parallel_doc() -> dict:
    """The hetero scenario as a PS's job: one worker per device (machine by machine), each the
    whole model on 1/(m·n) of the machines' samples per step, its device's factor its
    --slowdown."""
    doc = scenario_doc()
    kinds = {k["name"]: float(k["speed"]) for k in doc["device_kinds"]}
    p, t = doc["pipeline"], dict(doc["training"])
    machines, fastest = int(p["machines"]), max(kinds.values())
    workers = machines * len(kinds)
    if (machines * t["batch"]) % workers:
        raise RunError(f"data-parallel: {machines} × {t['batch']} samples do not split over "
                       f"{workers} workers")
    names = [f"w{i + 1}" for i in range(workers)]
    speeds = [v for _ in range(machines) for v in kinds.values()]
    t["batch"] = machines * t["batch"] // workers
    t["device_time"] = p.get("device_time", "profiled")    # the runner profiles the model
    return {"description": "data-parallel baseline of the hetero scenario",
            "topology": {"kind": "star", "workers": workers}, "training": t,
            "workers": {"slowdown": {w: float(p.get("device_scale", 1.0)) * fastest / v
                                     for w, v in zip(names, speeds)}}}


def write_data_parallel(out: Path) -> Path:
    from ndnps.lab.tomltext import to_toml
    path = out.parent / f"{out.name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_toml(data_parallel_doc()))
    return path


def figures(out: Path, variant: str) -> dict:
    s = json.loads((out / "summary.json").read_text())
    if variant in DATA_PARALLEL:
        it = s.get("iteration_seconds")
        batch = s.get("workers", 0) * data_parallel_doc()["training"]["batch"]
        return {"iteration_s": rnd(it), "samples_per_s": rnd(ratio(batch, it), 1),
                "accuracy": s.get("final_accuracy")}
    p = s["pipeline"]
    return {"iteration_s": rnd(p["iteration_seconds"]),
            "samples_per_s": rnd(p["samples_per_second"], 1),
            "imbalance": rnd(p["stage_imbalance"]),
            "predicted_s": rnd(p["predicted_iteration_seconds"]),
            "predicted_vs_measured": rnd(p["predicted_vs_measured"]),
            "run_compute_predicted_vs_measured": rnd(p.get("run_compute_predicted_vs_measured")),
            "cpu_vs_profile": [rnd(st.get("cpu_vs_profile")) for st in p["stages"]],
            "device_vs_profile": [rnd(st.get("device_vs_profile")) for st in p["stages"]],
            "split": [len(x) for x in p["plan"]["stage_layers"]],
            "order": [st["kind"] for st in p["stages"]],
            "speed_followed": [rnd(st["speed_followed"]) for st in p["stages"]],
            "idle": [rnd(st["idle_fraction"]) for st in p["stages"]],
            "busy_s": [rnd(st["busy_seconds"]) for st in p["stages"]],
            "memory_saved": rnd(p["memory_saved"]),
            "recompute_s": [rnd(st["recompute_seconds"]) for st in p["stages"]],
            "accuracy": p["final_accuracy"], "accuracy_vs_reference":
                rnd(p.get("accuracy_vs_reference")),
            "identical": p["parameters_identical"]}


def run_variant(variant: str, keep: Path, rep: int, analyse: bool) -> dict:
    out = keep / f"{variant}-r{rep}"
    if not analyse:
        log(f"hetero: {out.name}")
        if variant in DATA_PARALLEL:
            run_scenario(str(write_data_parallel(out)), SETS[variant], out)
        else:
            shared = keep / PROFILE
            run_scenario("hetero", SETS[variant] + ([f'pipeline.profile="{shared}"']
                                                    if shared.exists() else []), out)
            if not shared.exists():
                shutil.copyfile(out / "plan.json", shared)
    return figures(out, variant)


def combine(repeats: list[dict]) -> dict:
    out = dict(repeats[-1])
    for k in ("iteration_s", "samples_per_s", "imbalance", "predicted_s",
              "predicted_vs_measured", "run_compute_predicted_vs_measured", "memory_saved"):
        if k in out:
            out[k] = rnd(median(r.get(k) for r in repeats))
    return out


def solve_times(sizes: tuple[int, ...] = (8, 12, 16, 20), seeds: int = 3) -> dict[str, float]:
    """The integer program's solve time (the worst of a few random profiles) by layers, on the
    1 : 2 : 4 devices, 2 machines, 8 micro-batches."""
    from ndnps.planner.partition import Device, Layer, partition
    devs = [Device("fast", 4), Device("mid", 2), Device("slow", 1)]
    out = {}
    for n in sizes:
        worst = 0.0
        for seed in range(seeds):
            rng = random.Random(seed)
            ls = [Layer(f"l{i}", rng.uniform(1e-3, 5e-3), rng.uniform(2e-3, 1e-2),
                        rng.uniform(1e4, 1e5), rng.uniform(1e5, 1e6)) for i in range(n)]
            t0 = time.perf_counter()
            partition(ls, devs, 8, machines=2)
            worst = max(worst, time.perf_counter() - t0)
        out[str(n)] = round(worst, 3)
    return out


def verdicts(res: dict) -> dict:
    v = res["variants"]
    out: dict[str, Any] = {}
    plan = v.get("planned", {})
    out["imbalance"] = plan.get("imbalance")
    out["prediction_error"] = rnd(abs(plan["predicted_vs_measured"] - 1)) \
        if plan.get("predicted_vs_measured") else None
    for base in ("equal-layers", "equal-devices"):
        if base in v:
            out[f"throughput_over_{base}"] = rnd(ratio(plan.get("samples_per_s"),
                                                       v[base]["samples_per_s"]))
    if "data-parallel" in v:
        out["throughput_over_data_parallel"] = rnd(ratio(plan.get("samples_per_s"),
                                                         v["data-parallel"]["samples_per_s"]))
    measured = v.get("planned-measured", {})
    if measured:
        out["measured_imbalance"] = measured.get("imbalance")
        out["measured_prediction_error"] = rnd(abs(measured["predicted_vs_measured"] - 1)) \
            if measured.get("predicted_vs_measured") else None
    if "data-parallel-measured" in v:
        out["measured_over_data_parallel_measured"] = rnd(ratio(
            v.get("planned-measured", {}).get("samples_per_s"),
            v["data-parallel-measured"]["samples_per_s"]))
    if "planned-recompute" in v:
        out["recompute_memory_saved"] = v["planned-recompute"].get("memory_saved")
        out["recompute_time_cost"] = rnd(ratio(v["planned-recompute"]["iteration_s"],
                                               plan.get("iteration_s")))
    out["solve_max_s"] = max(res.get("solve_seconds", {"0": 0.0}).values())
    out["misses"] = [m for m, bad in [
        ("imbalance", (out["imbalance"] or 9) > IMBALANCE),
        ("prediction", (out["prediction_error"] or 9) > PREDICTION),
        ("imbalance (measured)", (out.get("measured_imbalance") or 0) > IMBALANCE),
        ("prediction (measured)", (out.get("measured_prediction_error") or 0) > PREDICTION),
        ("over equal-layers", (out.get("throughput_over_equal-layers") or 0) < OVER_EQUAL),
        ("over data parallel", min(out.get("throughput_over_data_parallel") or 0,
                                   out.get("measured_over_data_parallel_measured") or 9) < 1.0),
        ("solve", out["solve_max_s"] >= SOLVE)] if bad]
    return out


def rows(sec: dict) -> list[tuple[str, str, str, str]]:
    out = []
    for name, x in sec.get("variants", {}).items():
        out.append((f"{name}: samples/s", fmt(x.get("samples_per_s"), ".1f"), "",
                    f"iteration {fmt(x.get('iteration_s'))} s"))
    ver = sec.get("verdicts", {})
    miss = ver.get("misses", [])
    for label, key, target, m in [
            ("stage imbalance (planned)", "imbalance", f"<= {IMBALANCE}", "imbalance"),
            ("|predicted ÷ measured − 1|", "prediction_error", f"<= {PREDICTION}",
             "prediction"),
            ("stage imbalance (planned-measured)", "measured_imbalance", f"<= {IMBALANCE}",
             "imbalance (measured)"),
            ("|predicted ÷ measured − 1| (planned-measured)", "measured_prediction_error",
             f"<= {PREDICTION}", "prediction (measured)"),
            ("planned ÷ equal-layers", "throughput_over_equal-layers", f">= {OVER_EQUAL}",
             "over equal-layers"),
            ("planned ÷ data parallel", "throughput_over_data_parallel", ">= 1.0",
             "over data parallel"),
            ("planned-measured ÷ data parallel (measured)",
             "measured_over_data_parallel_measured", ">= 1.0", "over data parallel"),
            ("integer program, 20 layers (s)", "solve_max_s", f"< {SOLVE}", "solve")]:
        out.append((label, fmt(ver.get(key)), target, "miss" if m in miss else "ok"))
    return out


def main(argv: list[str] | None = None) -> int:
    p = variants_parser("bench.hetero", __doc__,
                        "one repeat: planned, equal-layers, data-parallel", VARIANTS, 2)
    args = p.parse_args(argv)
    results = run_variants(
        "hetero", args, VARIANTS, ["planned", "equal-layers", "data-parallel"], run_variant,
        combine, lambda v, x: {"samples_per_s": x["samples_per_s"],
                               "iteration_s": x["iteration_s"], "imbalance": x.get("imbalance"),
                               "predicted_vs_measured": x.get("predicted_vs_measured"),
                               "run_compute_predicted_vs_measured":
                                   x.get("run_compute_predicted_vs_measured"),
                               "cpu_vs_profile": x.get("cpu_vs_profile")})
    if results is None:
        return 1
    results["solve_seconds"] = solve_times()
    results["verdicts"] = verdicts(results)
    if not args.no_save:
        save("hetero", None, results)
    emit({"bench": "hetero", **results["verdicts"]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
