"""Loss recovery: sync training at 0, 5, 10 and 20% loss (both directions), on every app face
or on the link between two forwarders, against the lossless run of the same model and place
side by side; probes vs retransmissions.

    python -m bench.loss [--losses 0,0.05,0.1,0.2] [--models digits,100k] [--rounds 2]
                         [--link-reliability both|on|off] [--where apps,link] [--versions N]
                         [--quick] [--keep DIR]

Each point is one run of the lossy scenario (PS + 4 workers, persistent PIT) with `links.loss`
set, in one of two places (`--where`, both by default, each against its own lossless run):
- `apps`: a star; the forwarder drops that share of the packets on every app face, both ways,
  so pushes, gradients and the collect and probe Interests are all lost alike, on each of the
  four hops a collect crosses;
- `link`: a tree of two forwarders, the PS on one and the workers on the other (two sites), and
  the loss on the UDP link between them only, both ways: the apps' faces are their forwarders'
  local sockets, lossless, as NFD deployments have them (NDNLPv2 runs on such links, never on
  an app's local face). With link reliability the apps wait for the link's repair
  (`--link-repair`) instead of racing it.
Models:
`100k` (bench/sweep.py's MLP, 51 segments per version) and `digits` (the shipped `lossy`
scenario's MLP, 3 segments). Rounds alternate the loss levels (0, 2, 5, 10, 0, 2, ...).
Each level runs twice: with end-to-end recovery alone (the apps' fetchers and probes), and with
NDNLPv2 link reliability on every app face as well (`links.reliability = true`: each loss
repaired on its hop, `lp_*` counters), both against the same lossless run without it.

Two ratios to the lossless run. `span`: the PS's start to its end (`ps_span`: start-up,
task assignment, the workers' content and registration, every version and the end) — the
training as a user waits for it, and the measure the loss targets are on. `mean`: iteration = seconds between
versions at the PS after WARMUP_VERSIONS, the MEAN at loss p ÷ the mean lossless one (a
recovery stalls one iteration, which a median would hide); medians are given too. Also the
longest any version waited (`longest_wait_s`, the first version from the training's start)
and the final accuracy, against the lossless run's. Recovery counters, summed over the PS and the workers: `probes` (probe-timer expiries),
`gap_fetches` (fetches started by a gap in a push), `collect_probes` (a collect for a version
the worker lacks), `probe_segments` (segments so fetched), `retransmissions` (re-expressed
Interests, gradients and parameters alike), `probes_answered_by_ps` (the rest came from the
forwarder's cache), and with link reliability `lp_retransmitted` (frames the link layer sent
again, apps' side), `lp_given_up` and `fw_lp_retransmitted` (the forwarders' side of every
link that has it). While each run goes on, every process's CPU time is
sampled from /proc (`cpu_ms_per_iteration`: CPU ms per steady iteration by role, median over
the rounds) — what link reliability costs, and whom, apart from the wall clock. Targets,
loss on every app face: span at 10% <= 2 x lossless end to end and <= 1.4 x with link
reliability, at 20% <= 4 x and <= 2 x; no version waits more than 1 s at 20%; accuracy within
1 point of lossless (TARGETS, printed per model); mean iteration at 5% <= 1.15 x.
Writes bench/results.json key "loss" -> model, or model@link for the loss between forwarders
("per_loss": end-to-end alone, "per_loss_lp": with link reliability); the last line printed is
one JSON object.
"""
from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, TypedDict

from bench.common import bench_parser, emit, fmt, interleave, log, median, ratio, rnd, save, stamp
from bench.scenario_runs import CpuSampler, cpu_per_iteration, model_sets, run_scenario
from bench.sweep import MODEL

TARGET = 1.15
TARGET_LOSS = 0.05
# loss on every app face: the span at loss p <= x lossless, end to end and with
# link reliability; no version waits longer than MAX_WAIT at MAX_WAIT_LOSS; accuracy within
# ACCURACY_POINTS of lossless
TARGETS = {"0.1": {"end_to_end": 2.0, "link_reliability": 1.4},
           "0.2": {"end_to_end": 4.0, "link_reliability": 2.0}}
MAX_WAIT, MAX_WAIT_LOSS = 1.0, "0.2"
ACCURACY_POINTS = 0.01


class Model(TypedDict):
    sets: Callable[[], list[str]]        # its --set overrides for the scenario
    versions: int
    quick_versions: int


MODELS: dict[str, Model] = {
    # the lossy scenario as shipped (10 epochs: 100 versions), as a user runs it
    "digits": {"sets": lambda: [], "versions": 100, "quick_versions": 25},
    "100k": {"sets": lambda: model_sets(MODEL["n_features"], MODEL["hidden"]),
             "versions": 30, "quick_versions": 6}}
COUNTERS = ("probes", "gap_fetches", "collect_probes", "probe_segments", "retransmissions",
            "timeouts", "lp_retransmitted", "lp_given_up")
LP = "+lp"          # a condition's suffix: link reliability on
# where the loss is (see the docstring): the scenario settings for each place
WHERE = {"apps": [],
         "link": ['topology.kind="tree"', "topology.leaves=1", "links.app_faces=false"]}


def point(condition: str, model: str, versions: int, out: Path, where: str = "apps") -> dict:
    loss, lp = float(condition.removesuffix(LP)), condition.endswith(LP)
    sets = ["topology.workers=4", f"links.loss={loss}", f"links.reliability={str(lp).lower()}",
            f"training.max_versions={versions}", "training.eval_every=100000",
            "run.timeout=1800", *WHERE[where], *MODELS[model]["sets"]()]
    with CpuSampler(str(out)) as sampler:
        run = run_scenario("lossy", sets, out)
    res: dict[str, Any] = {
        "ps_span": run.ps_span(), "longest_wait": run.longest_wait(),
        "accuracy": run.summary.get("final_accuracy"),
        "iteration_mean": run.iteration_mean(), "iteration_median": run.iteration_median(),
        "cpu_ms_per_iteration": cpu_per_iteration(run, sampler),
        "versions": len(run.ps_versions),
        "probes_answered_by_ps": int(run.summary["ps_end"].get("probes_answered", 0) or 0),
        # the forwarders' side of every link with link reliability (between forwarders, and
        # toward the apps that asked for it)
        "fw_lp_retransmitted": run.forwarder_link_counter("retransmitted"),
        **{c: run.counter(c) for c in COUNTERS}}
    log(f"    loss {condition:>7}: span {res['ps_span']:.2f} s, longest wait "
        f"{res['longest_wait'] * 1e3:.0f} ms; iteration mean {res['iteration_mean'] * 1e3:8.1f} ms, "
        f"median {res['iteration_median'] * 1e3:8.1f} ms; probes {res['probes']}, gap fetches "
        f"{res['gap_fetches']}, retransmissions {res['retransmissions']}"
        + (f", link retransmissions {res['lp_retransmitted']} (apps), "
           f"{res['fw_lp_retransmitted']} (forwarders)" if lp else "")
        + f"; CPU ms/iteration {res['cpu_ms_per_iteration']}")
    return res


def measure(model: str, losses: list[float], rounds: int, quick: bool,
            keep: Path | None, reliability: str = "both", versions: int | None = None,
            where: str = "apps") -> dict:
    versions = versions or MODELS[model]["quick_versions" if quick else "versions"]
    base = keep or Path(tempfile.mkdtemp(prefix="loss-"))
    conditions = [str(x) for x in losses] if reliability != "on" else [str(losses[0])]
    if reliability != "off":
        conditions += [f"{x}{LP}" for x in losses]
    log(f"loss {model}, on the {where}: {conditions}, {versions} versions, {rounds} round(s)")
    try:
        runs = interleave(conditions, rounds,
                          lambda c, tag: point(c, model, versions,
                                               base / model / where / f"loss{c}-{tag}", where))
    finally:
        if keep is None:
            shutil.rmtree(base, ignore_errors=True)
    # every ratio is over the lossless run without link reliability (what it costs counts)
    base_runs = runs[str(losses[0])]
    base_mean = median(r["iteration_mean"] for r in base_runs)
    base_med = median(r["iteration_median"] for r in runs[str(losses[0])])
    base_span = median(r["ps_span"] for r in base_runs)
    base_accuracy = median(r["accuracy"] for r in base_runs)
    per: dict[str, dict] = {}
    per_lp: dict[str, dict] = {}
    for c, rs in runs.items():
        m = median(r["iteration_mean"] for r in rs)
        md = median(r["iteration_median"] for r in rs)
        versions_total = sum(r["versions"] for r in rs)
        span = median(r["ps_span"] for r in rs)
        accuracy = min((r["accuracy"] for r in rs if r["accuracy"] is not None), default=None)
        per[c] = {"ps_span_s": rnd(span, 3), "span_over_lossless": rnd(ratio(span, base_span), 3),
                  "paired_span_over_lossless": _paired(rs, base_runs, "ps_span"),
                  "longest_wait_s": rnd(max(r["longest_wait"] for r in rs), 3),
                  "accuracy": accuracy,
                  "accuracy_delta": None if accuracy is None or base_accuracy is None
                  else rnd(accuracy - base_accuracy, 4),
                  "iteration_mean_s": rnd(m, 5), "iteration_median_s": rnd(md, 5),
                  "mean_over_lossless": rnd(ratio(m, base_mean), 3),
                  "median_over_lossless": rnd(ratio(md, base_med), 3),
                  # each round's ratio to its own lossless run, then their median: the host's
                  # drift over minutes cancels within a round (a round's runs are minutes apart
                  # at most, the rounds' are not)
                  "paired_mean_over_lossless": _paired(rs, base_runs, "iteration_mean"),
                  **{k: sum(r[k] for r in rs)
                     for k in (*COUNTERS, "probes_answered_by_ps", "fw_lp_retransmitted")},
                  "per_version": {k: rnd(sum(r[k] for r in rs) / versions_total, 2)
                                  for k in ("probes", "gap_fetches", "retransmissions")},
                  "rounds": [rnd(r["iteration_mean"], 5) for r in rs],
                  "cpu_ms_per_iteration": _median_cpu(r["cpu_ms_per_iteration"] for r in rs)}
        if c.endswith(LP):
            per_lp[c.removesuffix(LP)] = per.pop(c)
    at, at_lp = per.get(str(TARGET_LOSS)), per_lp.get(str(TARGET_LOSS))
    return {"where": where, "versions": versions, "rounds": rounds, "per_loss": per,
            "per_loss_lp": per_lp,
            "target": TARGET, "target_loss": TARGET_LOSS,
            "meets_target": _meets(at), "meets_target_lp": _meets(at_lp),
            "targets": verdicts(per, per_lp) if where == "apps" else {}}


def verdicts(per: dict[str, dict], per_lp: dict[str, dict]) -> dict[str, dict]:
    """The loss targets (TARGETS), each with the figure measured: {"span at 0.2 end_to_end":
    {"figure", "target", "met"}, ...}; a loss level not measured is left out."""
    out: dict[str, dict] = {}
    for loss, bound in TARGETS.items():
        for how, table in (("end_to_end", per), ("link_reliability", per_lp)):
            row = table.get(loss)
            if row is not None:
                fig = row["span_over_lossless"]
                out[f"span at {loss} {how}"] = {"figure": fig, "target": f"<= {bound[how]}",
                                                 "met": fig is not None and fig <= bound[how]}
    for how, table in (("end_to_end", per), ("link_reliability", per_lp)):
        row = table.get(MAX_WAIT_LOSS)
        if row is not None:
            out[f"longest wait at {MAX_WAIT_LOSS} {how}"] = {
                "figure": row["longest_wait_s"], "target": f"<= {MAX_WAIT} s",
                "met": row["longest_wait_s"] <= MAX_WAIT}
        deltas = [r["accuracy_delta"] for r in table.values() if r["accuracy_delta"] is not None]
        if deltas:
            worst = max(deltas, key=abs)
            out[f"accuracy {how}"] = {"figure": worst, "target": f"within {ACCURACY_POINTS}",
                                      "met": abs(worst) <= ACCURACY_POINTS}
    return out


def _paired(rs: list[dict], base_runs: list[dict], key: str) -> float | None:
    pairs = [ratio(r[key], b[key]) for r, b in zip(rs, base_runs)]
    pairs = [x for x in pairs if x is not None]
    return rnd(median(pairs), 3) if pairs else None


def _median_cpu(samples) -> dict[str, float | None] | None:
    """Each role's median over the rounds of its CPU ms per steady iteration (rounds where a
    role's figure is missing left out)."""
    samples = [s for s in samples if s]
    if not samples:
        return None
    keys = sorted({k for s in samples for k in s})
    return {k: rnd(median(s.get(k) for s in samples), 2) for k in keys}


def _meets(at: dict | None) -> bool:
    return bool(at and at["mean_over_lossless"] is not None
                and at["mean_over_lossless"] <= TARGET)


def main(argv: list[str] | None = None) -> int:
    p = bench_parser("python -m bench.loss", __doc__, "1 round, fewer versions", rounds=2)
    p.add_argument("--losses", default="0,0.05,0.1,0.2")
    p.add_argument("--models", default="digits,100k")
    p.add_argument("--link-reliability", choices=("both", "on", "off"), default="both",
                   help="runs with NDNLPv2 link reliability on the app faces, without, or both "
                        "(default)")
    p.add_argument("--versions", type=int, help="versions per run (default: digits 100, 100k "
                                                 "30; --quick 25 and 6)")
    p.add_argument("--where", default="apps,link",
                   help="where the loss is: apps (every app face of a star), link (between "
                        "two forwarders); default both")
    args = p.parse_args(argv)
    losses = [float(x) for x in args.losses.split(",")]
    if losses[0] != 0.0:
        p.error("--losses must start with 0 (the lossless reference)")
    places = args.where.split(",")
    if not places or any(w not in WHERE for w in places):
        p.error(f"--where: a comma-separated list of {', '.join(WHERE)}")
    rounds = 1 if args.quick else args.rounds
    out = {}
    for model in args.models.split(","):
        for where in places:
            fig = measure(model, losses, rounds, args.quick, args.keep, args.link_reliability,
                          args.versions, where)
            fig.update(quick=args.quick, **stamp())
            key = model if where == "apps" else f"{model}@{where}"
            out[key] = fig
            if not args.no_save:
                save("loss", key, fig)
            for per, tag in (("per_loss", ""), ("per_loss_lp", LP)):
                for c, r in fig[per].items():
                    log(f"  {key} loss {c}{tag}: span x{r['span_over_lossless']} (paired "
                        f"x{r['paired_span_over_lossless']}), longest wait "
                        f"{r['longest_wait_s']} s, accuracy {r['accuracy']}; mean "
                        f"x{r['mean_over_lossless']} median "
                        f"x{r['median_over_lossless']} paired x{r['paired_mean_over_lossless']}"
                        f"  probes {r['probes']} retx {r['retransmissions']} link retx "
                        f"{r['lp_retransmitted']} (apps) {r['fw_lp_retransmitted']} "
                        "(forwarders)")
            for name, v in fig["targets"].items():
                log(f"  {key} target {name}: {v['figure']} (target {v['target']}): "
                    f"{'met' if v['met'] else 'MISSED'}")
    emit({m: {"span": {"end_to_end": {c: r["span_over_lossless"]
                                       for c, r in f["per_loss"].items()},
                       "link_reliability": {c: r["span_over_lossless"]
                                            for c, r in f["per_loss_lp"].items()}},
              "end_to_end": {c: r["mean_over_lossless"] for c, r in f["per_loss"].items()},
              "link_reliability": {c: r["mean_over_lossless"]
                                   for c, r in f["per_loss_lp"].items()},
              "targets_met": {k: v["met"] for k, v in f["targets"].items()}}
          for m, f in out.items()} | {"target": TARGET, "at_loss": TARGET_LOSS})
    return 0


def rows(sec: dict) -> list[tuple[str, str, str, str]]:
    out = []
    key_how = {"per_loss": "end_to_end", "per_loss_lp": "link_reliability"}
    for model, f in sec.items():
        for key, meets, how in (("per_loss", "meets_target", "end-to-end"),
                                ("per_loss_lp", "meets_target_lp", "link reliability")):
            per = f.get(key) or {}
            if not per:
                continue
            cells = ", ".join(f"{float(c) * 100:g}%: ×{fmt(r['mean_over_lossless'], '.2f')}"
                              for c, r in per.items())
            at = per.get(str(TARGET_LOSS), {})
            place = {"apps": "on every app face", "link": "on the link between two "
                     "forwarders"}[f.get("where", "apps")]
            targets = {k: v for k, v in (f.get("targets") or {}).items()
                       if k.endswith(key_how[key])}
            if targets:
                spans = ", ".join(f"{float(c) * 100:g}%: ×{fmt(r.get('span_over_lossless'), '.2f')}"
                                  for c, r in per.items())
                wait = per.get(MAX_WAIT_LOSS, {}).get("longest_wait_s")
                out.append((f"loss ({model.split('@')[0]}, {place}, {how}): the PS's start to "
                            "end ÷ lossless",
                            f"{spans}; longest wait at 20%: {fmt(wait, '.3f')} s",
                            "; ".join(f"{k.split(' ')[0]} {k.split(' ')[-2]}: {v['target']}"
                                      for k, v in targets.items()),
                            "met" if all(v["met"] for v in targets.values()) else "missed"))
            out.append((f"loss recovery ({model.split('@')[0]}, {place}, {how}): mean "
                        "iteration ÷ lossless",
                        f"{cells} (at 5%: probes {at.get('probes')}, retransmissions "
                        f"{at.get('retransmissions')}, link {at.get('lp_retransmitted')} apps' "
                        f"side, {at.get('fw_lp_retransmitted', '-')} forwarders')",
                        f"≤ {TARGET} at 5%", "met" if f.get(meets) else "missed"))
    return out


if __name__ == "__main__":
    sys.exit(main())
