"""Sync iteration time, N = 4 workers, models of ~100k and ~1M parameters: ndnps with the
persistent PIT vs unicast NDN vs a plain asyncio TCP parameter server vs compute alone.

    python -m bench.iteration [--models 100k,1M] [--rounds 2] [--quick] [--keep DIR]

For each model, side by side in one run (rounds alternate persistent, unicast, tcp, compute):

- `persistent`, `unicast`: the star scenario (one forwarder, PS + 4 worker processes) through
  the scenario runner, sync SGD on the synthetic dataset, PS evaluation off (eval_every large:
  the TCP PS does not evaluate either). Iteration = seconds between consecutive versions at
  the PS (its metrics), median over the versions after the first WARMUP_VERSIONS.
- `tcp`: bench/tcp_ps.py, the same training over plain TCP (same model, data, codec, loop).
- `gloo` (only when torch is installed: pip install -e '.[baselines]'): bench/gloo.py, the same
  model, data and SGD as data-parallel ranks allreducing each gradient with torch.distributed
  (backend gloo), no PS.
- `compute alone`: one process computing the same gradients back to back (the worker's code
  path from load_params to flatten, one BLAS thread, no I/O): bench.tcp_ps `compute`.
- `transfer`: one model's bytes (4 x parameters) sent to another process over a unix stream
  socket (the apps' transport to the forwarder) and over TCP loopback (the TCP PS's), median.

Figures: iteration / (compute + transfer) for ndnps (compute = its own workers' median
`compute` in that run, transfer over the unix socket) and for the TCP PS (its workers' compute,
TCP transfer): target <= 1.05; ndnps / TCP PS: target <= 1.0; unicast / persistent;
with torch, ndnps / gloo, TCP PS / gloo and gloo / (its ranks' compute + TCP transfer), reported.
The PS's own per-version split (collect_wait, apply, push) says where an iteration goes.
Writes bench/results.json key "iteration" -> model; the last line printed is one JSON object.
"""
from __future__ import annotations

import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import gloo, tcp_ps, transfer
from bench.common import bench_parser, emit, fmt, interleave, log, median, ratio, rnd, save, stamp
from bench.scenario_runs import (CpuSampler, MlpShape, TrainingRun, cpu_per_iteration, mlp_params,
                                 model_sets, run_scenario)


class Model(MlpShape):
    """An MLP and the versions to train it for (--quick: quick_versions)."""
    versions: int
    quick_versions: int


MODELS: dict[str, Model] = {
    "100k": {"n_features": 256, "hidden": [256, 128], "versions": 30, "quick_versions": 10},
    "1M": {"n_features": 1024, "hidden": [768, 256], "versions": 12, "quick_versions": 6},
}
WORKERS = 4
N_SAMPLES = 4000
TARGET_BOUND = 1.05
TARGET_VS_TCP = 1.0
# gloo only where torch is installed (the optional `baselines` extra): never a figure without it
GLOO = importlib.util.find_spec("torch") is not None
GLOO_ABSENT = f"gloo baseline absent: {gloo.INSTALL}"
TRAININGS = ["persistent", "unicast", "tcp", *(["gloo"] if GLOO else [])]
CONFIGS = [*TRAININGS, "compute"]
BASELINES = {"tcp": tcp_ps.run_training, "gloo": gloo.run_training}
# the PS's per-version split; gloo's ranks have no PS: the allreduce, then the SGD step
SPLIT = {"gloo": ("allreduce", "apply")}
PS_SPLIT = ("collect_wait", "apply", "push")
GLOO_KEYS = ("ndnps_over_gloo", "tcp_over_gloo", "gloo_over_bound")


def one(config: str, model: MlpShape, versions: int, out: Path) -> dict:
    nf, hidden = model["n_features"], model["hidden"]
    cpu = None
    run: TrainingRun
    if config in ("persistent", "unicast"):
        with CpuSampler(str(out)) as sampler:
            run = run_scenario("sync-sgd", [
                f"topology.workers={WORKERS}", f"training.push_mode=\"{config}\"",
                f"training.max_versions={versions}", "training.eval_every=100000",
                "run.timeout=1800", "training.key=\"iteration-key\"",
                *model_sets(nf, hidden, N_SAMPLES)], out)
        cpu = cpu_per_iteration(run, sampler)
    elif config in BASELINES:
        with CpuSampler(str(out)) as sampler:
            run = TrainingRun(BASELINES[config](out, nf, hidden, N_SAMPLES, WORKERS, versions))
        cpu = cpu_per_iteration(run, sampler)
    else:
        run = TrainingRun(tcp_ps.run_compute(out, nf, hidden, N_SAMPLES, WORKERS,
                                             max(20, versions)))
    res: dict[str, Any] = {
        "iteration_median": run.iteration_median(), "iteration_mean": run.iteration_mean(),
        "compute_median": run.compute_median(),
        **{f"{k}_median": run.ps_median(k) for k in SPLIT.get(config, PS_SPLIT)},
        "cpu_ms_per_iteration": cpu, "notes": getattr(run, "notes", [])}
    if config != "compute":
        wait = SPLIT.get(config, PS_SPLIT)[0]
        log(f"    {config:10s}: iteration {fmt(res['iteration_median'] and res['iteration_median'] * 1e3, '.1f')} ms"
            f"  compute {fmt(res['compute_median'] and res['compute_median'] * 1e3, '.2f')} ms"
            f"  {wait} {fmt(res[f'{wait}_median'] and res[f'{wait}_median'] * 1e3, '.1f')} ms"
            f"  CPU ms/iteration {cpu}")
    else:
        log(f"    compute alone: {res['compute_median'] * 1e3:.2f} ms")
    return res


def measure(name: str, rounds: int, quick: bool, keep: Path | None) -> dict:
    model = MODELS[name]
    versions = model["quick_versions"] if quick else model["versions"]
    n_params = mlp_params(model["n_features"], model["hidden"])
    nbytes = 4 * n_params
    base = keep or Path(tempfile.mkdtemp(prefix="iter-"))
    log(f"iteration {name}: MLP {model['n_features']}-{'-'.join(map(str, model['hidden']))}-10, "
        f"{n_params} parameters, {WORKERS} workers, {versions} versions, {rounds} round(s)")
    transfers: dict[str, list[float]] = {"unix": [], "tcp": []}

    def run(config: str, tag: str) -> dict:
        if config == "compute":                  # the transfers ride with compute alone
            for kind in transfers:
                transfers[kind].append(transfer.transfer_time(nbytes, kind)["seconds"])
        return one(config, model, versions, base / name / f"{config}-{tag}")

    try:
        runs = interleave(CONFIGS, rounds, run)
    finally:
        if keep is None:
            shutil.rmtree(base, ignore_errors=True)

    def med(config: str, key: str) -> float | None:
        return median(r[key] for r in runs[config])

    it = {c: med(c, "iteration_median") for c in TRAININGS}
    comp = {c: med(c, "compute_median") for c in CONFIGS}
    xfer = {k: median(v) for k, v in transfers.items()}

    def bound(config: str, transfer: str) -> float:
        """A config's compute + one model transfer (both measured in every round)."""
        c, x = comp[config], xfer[transfer]
        assert c is not None and x is not None, (config, transfer)
        return c + x

    bound_ndn = bound("persistent", "unix")
    bound_tcp = bound("tcp", "tcp")
    fig: dict[str, Any] = {
        "model_params": n_params, "model_bytes": nbytes, "workers": WORKERS,
        "versions": versions, "rounds": rounds,
        "iteration_median_s": {k: rnd(v, 6) for k, v in it.items()},
        "iteration_mean_s": {c: rnd(med(c, "iteration_mean"), 6) for c in TRAININGS},
        "compute_median_s": {("alone" if k == "compute" else k): rnd(v, 6)
                             for k, v in comp.items()},
        "transfer_s": {k: rnd(v, 7) for k, v in xfer.items()},
        "ps_split_median_s": {c: {k: rnd(med(c, f"{k}_median"), 6)
                                  for k in SPLIT.get(c, PS_SPLIT)}
                              for c in TRAININGS},
        "bound_s": {"ndnps": rnd(bound_ndn, 6), "tcp": rnd(bound_tcp, 6)},
        "ndnps_over_bound": rnd(ratio(it["persistent"], bound_ndn), 3),
        "unicast_over_bound": rnd(ratio(it["unicast"], bound("unicast", "unix")), 3),
        "tcp_over_bound": rnd(ratio(it["tcp"], bound_tcp), 3),
        "ndnps_over_tcp": rnd(ratio(it["persistent"], it["tcp"]), 3),
        "unicast_over_persistent": rnd(ratio(it["unicast"], it["persistent"]), 3),
        "ndnps_over_compute_alone": rnd(ratio(it["persistent"], comp["compute"]), 2),
        "per_round": {c: [rnd(r["iteration_median"], 6) for r in rs] for c, rs in runs.items()},
        # CPU ms per iteration by role (first round), total, and cores kept busy: whether an
        # iteration is bounded by CPU on this 2-core host, and whose
        "cpu_ms_per_iteration": {c: runs[c][0]["cpu_ms_per_iteration"] for c in TRAININGS},
        "notes": sorted({n for rs in runs.values() for r in rs for n in r["notes"]}),
    }
    if GLOO:                    # gloo's transport is TCP loopback: its bound takes that transfer
        fig["bound_s"]["gloo"] = rnd(bound("gloo", "tcp"), 6)
        fig.update(gloo_figures(it, bound("gloo", "tcp")))
    fig["meets_bound"] = fig["ndnps_over_bound"] is not None and \
        fig["ndnps_over_bound"] <= TARGET_BOUND
    fig["meets_vs_tcp"] = fig["ndnps_over_tcp"] is not None and \
        fig["ndnps_over_tcp"] <= TARGET_VS_TCP
    return fig


def gloo_figures(it: dict[str, float | None], bound: float) -> dict:
    """ndnps and the TCP PS against the gloo allreduce, and gloo against `bound` (its ranks'
    compute + one model transfer). Reported, no target."""
    return {"gloo_over_bound": rnd(ratio(it["gloo"], bound), 3),
            "ndnps_over_gloo": rnd(ratio(it["persistent"], it["gloo"]), 3),
            "tcp_over_gloo": rnd(ratio(it["tcp"], it["gloo"]), 3)}


def main(argv: list[str] | None = None) -> int:
    p = bench_parser("python -m bench.iteration", __doc__, "1 round, fewer versions", rounds=2)
    p.add_argument("--models", default="100k,1M", help="comma-separated: " + ",".join(MODELS))
    args = p.parse_args(argv)
    rounds = 1 if args.quick else args.rounds
    if not GLOO:
        log(GLOO_ABSENT)
    out = {}
    for name in args.models.split(","):
        fig = measure(name, rounds, args.quick, args.keep)
        fig.update(quick=args.quick, **stamp())
        out[name] = fig
        if not args.no_save:
            save("iteration", name, fig)
        log(f"{name}: ndnps/bound {fig['ndnps_over_bound']}  tcp/bound {fig['tcp_over_bound']}  "
            f"ndnps/tcp {fig['ndnps_over_tcp']}  unicast/persistent "
            f"{fig['unicast_over_persistent']}"
            + "".join(f"  {k.replace('_over_', '/')} {fig[k]}" for k in GLOO_KEYS if k in fig))
    emit({name: {k: f[k] for k in ("ndnps_over_bound", "tcp_over_bound", "ndnps_over_tcp",
                                   "unicast_over_persistent", *GLOO_KEYS) if k in f}
          for name, f in out.items()}
         | {"target": {"ndnps_over_bound": TARGET_BOUND, "ndnps_over_tcp": TARGET_VS_TCP}})
    return 0


def rows(sec: dict) -> list[tuple[str, str, str, str]]:
    out = []
    for name, f in sec.items():
        it = f["iteration_median_s"]
        out.append((f"iteration {name}, N=4: ndnps ÷ (compute + 1 model transfer)",
                    f"{fmt(f['ndnps_over_bound'], '.2f')} ({fmt(it['persistent'] * 1e3, '.1f')} ms"
                    f" vs {fmt(f['bound_s']['ndnps'] * 1e3, '.2f')} ms); TCP PS "
                    f"{fmt(f['tcp_over_bound'], '.2f')}",
                    f"≤ {TARGET_BOUND}", "met" if f["meets_bound"] else "missed"))
        out.append((f"iteration {name}, N=4: ndnps ÷ TCP PS",
                    f"{fmt(f['ndnps_over_tcp'], '.2f')} (TCP {fmt(it['tcp'] * 1e3, '.1f')} ms; "
                    f"unicast ÷ persistent {fmt(f['unicast_over_persistent'], '.2f')})",
                    f"≤ {TARGET_VS_TCP}", "met" if f["meets_vs_tcp"] else "missed"))
        if "ndnps_over_gloo" in f:
            out.append((f"iteration {name}, N=4: ndnps ÷ gloo allreduce",
                        f"{fmt(f['ndnps_over_gloo'], '.2f')} (gloo {fmt(it['gloo'] * 1e3, '.1f')} ms;"
                        f" TCP PS ÷ gloo {fmt(f['tcp_over_gloo'], '.2f')}; gloo ÷ (compute + 1 "
                        f"transfer) {fmt(f['gloo_over_bound'], '.2f')})", "report", "–"))
    return out


if __name__ == "__main__":
    sys.exit(main())
