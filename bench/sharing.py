"""Several jobs, one aggregator (time-division sharing, docs/sharing.md), one run, the policies side by side:

    python -m bench sharing [--repeat 3] [--variants ...] [--quick] [--keep DIR] [--no-save]
                            [--analyse DIR]

The multi-job scenario (scenarios/multi-job.toml: two PS jobs and one of in-network all-reduce
peers, MLPs of three sizes and step times, on a two-leaf tree whose root aggregates, its pool
fitting one job's round; links 50 Mbit/s, 5 ms) under:

* td-time-saved, td-shortest: time-division — the share controller's decision rule (s1–s3 of docs/sharing.md) with
  each CalcScore (ndnps.exchanges.sharing.decision);
* always-wait: a FIFO lock (a round waits for the aggregators);
* never: no in-network aggregation (the PSs sum; the peers run a ring);
* spatial: each job 1/J of the slots, always (ATP-style), no controller;
* dedicated: each job a whole pool of its own (J × the slots, disjoint), no controller — the
  jobs run together, none contends for the aggregators;
* exclusive: each job alone, the aggregator its own (one run per job).

Per variant: each job's completion time (its first to its last version), mean and p99 round
wait (the time a round waited for the controller's answer), rounds aggregated / ordinary, the
aggregator's busy fraction, the controller's aborts and rounds given up, and the invariants
(`ina_overlap_violations`, `decision_mismatches`). The variants alternate `--repeat` times;
each figure is the median of its repeats. Targets: sharing efficiency (exclusive completion ÷
time-division's, averaged over jobs) ≥ 0.9; time-division's mean completion ≤ 0.9 × the better
of always-wait and never; 0 violations. The efficiency against `dedicated` is reported beside
it: on this 2-core machine a job alone also has the CPU to itself (docs/sharing.md).
"""
from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from typing import Any

from .common import ROOT, emit, fmt, log, median, ratio, rnd, save
from .scenario_runs import run_scenario, run_variants, variants_parser

SCENARIO = ROOT / "scenarios" / "multi-job.toml"
VARIANTS = ("td-time-saved", "td-shortest", "always-wait", "never", "spatial", "dedicated",
            "exclusive")
SETS = {"td-time-saved": ['share.policy="time-division"', 'share.score="time-saved"'],
        "td-shortest": ['share.policy="time-division"', 'share.score="shortest-round"'],
        "always-wait": ['share.policy="always-wait"'],
        "never": ['share.policy="never"'],
        "spatial": ['share.policy="spatial"'],
        "dedicated": ['share.policy="spatial"'],          # slots × J: below
        "exclusive": ['share.policy="spatial"']}          # one job: the whole pool
EFFICIENCY = 0.9
OVER_BASELINES = 0.9


def scenario_doc() -> dict:
    with open(SCENARIO, "rb") as f:
        return tomllib.load(f)


def write_variant(variant: str, out: Path, job: int | None = None) -> Path:
    """The scenario file a variant runs: as shipped, but `dedicated` J times the slots and
    `exclusive` job `job` alone (started at once)."""
    from ndnps.lab.tomltext import to_toml
    doc = scenario_doc()
    if variant == "dedicated":
        doc["share"]["slots"] = doc["share"]["slots"] * len(doc["jobs"])
    if variant == "exclusive":
        assert job is not None
        entry = dict(doc["jobs"][job])
        entry.pop("start", None)
        doc["jobs"] = [entry]
    path = out.parent / f"{out.name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_toml(doc))
    return path


def figures(out: Path) -> dict:
    """A run directory's figures, from its summary made again by the code as it is now."""
    from ndnps.lab import report, spec
    sc = spec.load(str(out / "scenario.toml"))
    wall = json.loads((out / "summary.json").read_text()).get("wall_seconds") or 0.0
    sh = report.summarize(out, sc, wall)["share"]
    ctl = sh.get("controller") or {}
    return {"jobs": {ps: {"completion_s": rnd(j["completion_seconds"]),
                          "wait_mean_s": rnd(j["round_wait_mean"]),
                          "wait_p99_s": rnd(j["round_wait_p99"]),
                          "rounds": j["rounds"], "accuracy": j["final_accuracy"]}
                     for ps, j in sh["jobs"].items()},
            "aggregator_busy": rnd(sh.get("aggregator_busy_fraction")),
            "aborts": ctl.get("aborts"), "gave_up": ctl.get("gave_up"),
            "violations": sh.get("ina_overlap_violations") or 0,
            "mismatches": sh.get("decision_mismatches", 0)}


def run_variant(variant: str, keep: Path, rep: int, analyse: bool) -> dict:
    """One repeat of a variant (exclusive: one run per job, merged)."""
    jobs = len(scenario_doc()["jobs"])
    parts = range(jobs) if variant == "exclusive" else [None]
    merged: dict[str, Any] = {"jobs": {}, "violations": 0, "mismatches": 0}
    for job in parts:
        out = keep / f"{variant}{'' if job is None else f'-{job}'}-r{rep}"
        if not analyse:
            log(f"sharing: {out.name}")
            run_scenario(str(write_variant(variant, out, job)), [*SETS[variant]], out)
        f = figures(out)
        merged["jobs"].update(f.pop("jobs"))
        for k in ("violations", "mismatches"):
            merged[k] += f.pop(k)
        merged.update(f)
    return merged


def combine(repeats: list[dict]) -> dict:
    """The median of each figure over the repeats (violations and mismatches: summed)."""
    out: dict[str, Any] = {"violations": sum(r["violations"] for r in repeats),
                           "mismatches": sum(r["mismatches"] for r in repeats),
                           "aggregator_busy": rnd(median(r.get("aggregator_busy")
                                                         for r in repeats)),
                           "aborts": median(r.get("aborts") for r in repeats),
                           "gave_up": median(r.get("gave_up") for r in repeats), "jobs": {}}
    for ps in repeats[0]["jobs"]:
        js = [r["jobs"][ps] for r in repeats if ps in r["jobs"]]
        out["jobs"][ps] = {k: rnd(median(j[k] for j in js))
                           for k in ("completion_s", "wait_mean_s", "wait_p99_s", "accuracy")}
        out["jobs"][ps]["rounds"] = js[-1]["rounds"]
    times = [j["completion_s"] for j in out["jobs"].values() if j["completion_s"]]
    out["mean_completion_s"] = rnd(sum(times) / len(times)) if times else None
    return out


def verdicts(res: dict) -> dict:
    v = res["variants"]
    td = v.get("td-time-saved")
    out: dict[str, Any] = {}
    if td is None:
        return out
    for base in ("exclusive", "dedicated"):
        if base in v:
            effs = [e for ps, j in td["jobs"].items() if ps in v[base]["jobs"]
                    and (e := ratio(v[base]["jobs"][ps]["completion_s"],
                                    j["completion_s"])) is not None]
            out[f"efficiency_vs_{base}"] = rnd(sum(effs) / len(effs)) if effs else None
    better = [v[b]["mean_completion_s"] for b in ("always-wait", "never") if b in v]
    better = [b for b in better if b]
    out["td_over_best_baseline"] = ratio(td["mean_completion_s"], min(better)) if better         else None
    out["violations"] = sum(x["violations"] for x in v.values())
    out["mismatches"] = sum(x["mismatches"] for x in v.values())
    out["misses"] = [m for m, bad in [
        ("efficiency", (out.get("efficiency_vs_exclusive") or 0) < EFFICIENCY),
        ("over baselines", (out["td_over_best_baseline"] or 9) > OVER_BASELINES),
        ("violations", out["violations"] > 0), ("mismatches", out["mismatches"] > 0)] if bad]
    return out


def rows(sec: dict) -> list[tuple[str, str, str, str]]:
    out = []
    for name, x in sec.get("variants", {}).items():
        out.append((f"{name}: mean completion s", fmt(x.get("mean_completion_s")), "",
                    f"busy {fmt(x.get('aggregator_busy'))}"))
    ver = sec.get("verdicts", {})
    out.append(("efficiency (exclusive ÷ td)", fmt(ver.get("efficiency_vs_exclusive")),
                f">= {EFFICIENCY}", "ok" if "efficiency" not in ver.get("misses", []) else
                "miss"))
    out.append(("td ÷ best of always-wait, never", fmt(ver.get("td_over_best_baseline")),
                f"<= {OVER_BASELINES}", "ok" if "over baselines" not in ver.get("misses", [])
                else "miss"))
    out.append(("violations, mismatches", f"{ver.get('violations')}, {ver.get('mismatches')}",
                "0, 0", "ok" if not ver.get("violations") and not ver.get("mismatches")
                else "miss"))
    return out


def main(argv: list[str] | None = None) -> int:
    p = variants_parser("bench.sharing", __doc__, "one repeat, td-time-saved/never/exclusive",
                        VARIANTS, 3)
    args = p.parse_args(argv)
    results = run_variants(
        "sharing", args, VARIANTS, ["td-time-saved", "never", "exclusive"],
        run_variant, combine,
        lambda v, x: {"mean_completion_s": x["mean_completion_s"],
                      "aggregator_busy": x["aggregator_busy"], "violations": x["violations"],
                      **{f"{ps}_completion_s": j["completion_s"]
                         for ps, j in x["jobs"].items()}})
    if results is None:
        return 1
    results["verdicts"] = verdicts(results)
    if not args.no_save:
        save("sharing", None, results)
    emit({"bench": "sharing", **results["verdicts"]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
