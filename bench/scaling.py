"""Scaling: the PS's egress per version and the sync iteration time as the number of worker
processes grows to 32, persistent PIT against the unicast baseline, side by side for each N.

    python -m bench.scaling [--workers 1,2,4,8,16,32] [--versions 12] [--quick] [--keep DIR]

The same runs as `push` (bench/sweep.py; memoized, so `python -m bench` pays once): star
scenario, one forwarder, ~100k-parameter MLP. For each mode the figures are relative to the
smallest N of the same mode and run: egress(N) / egress(N0) and iteration(N) / iteration(N0),
and how each grows: the exponent b of a least-squares fit figure ∝ N^b over all N (b = 0:
flat, b = 1: linear in N). The persistent PIT should keep the PS's egress flat (b ≈ 0)
while unicast grows linearly (b ≈ 1). Iteration time is expected to grow on this 2-core host
whatever the protocol (N processes share 2 cores); the comparison is the two modes' slopes.
Writes bench/results.json key "scaling"; the last line printed is one JSON object.
"""
from __future__ import annotations

import math
import sys

from bench.common import emit, fmt, log, rnd, save, stamp
from bench.sweep import MODEL, model_label, sweep_main


def growth(ns: list[int], ys: list[float]) -> float | None:
    """Least-squares exponent b of y ∝ N^b."""
    pts = [(math.log(n), math.log(y)) for n, y in zip(ns, ys) if y and y > 0]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sxx if sxx else None


def analyse(points: dict[str, dict[int, dict]]) -> dict:
    out = {}
    for mode, pts in points.items():
        ns = sorted(pts)
        n0 = ns[0]
        egress = [pts[n]["ps_bytes_out_per_version"] for n in ns]
        iters = [pts[n]["iteration_median"] for n in ns]
        out[mode] = {
            "workers": ns,
            "ps_egress_per_version_bytes": egress,
            "ps_egress_over_model": [rnd(e / pts[n]["model_bytes"]) for e, n in zip(egress, ns)],
            "ps_egress_vs_smallest_n": [rnd(e / egress[0]) for e in egress],
            "iteration_median_s": iters,
            "iteration_vs_smallest_n": [rnd(i / iters[0]) if iters[0] else None for i in iters],
            "compute_median_s": [pts[n]["compute_median"] for n in ns],
            "collect_wait_median_s": [pts[n]["collect_wait_median"] for n in ns],
            "retransmissions": [pts[n]["retransmissions"] for n in ns],
            "cpu_ms_per_iteration": [pts[n].get("cpu_ms_per_iteration") for n in ns],
            "probes": [pts[n]["probes"] for n in ns],
            "egress_growth_exponent": rnd(growth(ns, egress), 3),
            "iteration_growth_exponent": rnd(growth(ns, iters), 3),
            "smallest_n": n0,
        }
    if "persistent" in out and "unicast" in out:
        p, u = points["persistent"], points["unicast"]
        both = sorted(set(p) & set(u))
        out["unicast_over_persistent"] = {
            "workers": both,
            "iteration": [rnd(u[n]["iteration_median"] / p[n]["iteration_median"]) for n in both],
            "egress": [rnd(u[n]["ps_bytes_out_per_version"] / p[n]["ps_bytes_out_per_version"])
                       for n in both]}
    return out


def main(argv: list[str] | None = None) -> int:
    args, points, ns, versions = sweep_main("python -m bench.scaling", __doc__, "1,2,4,8,16,32",
                                            argv)
    res = analyse(points)
    figures = {"model": model_label(MODEL), "versions": versions, **res, "quick": args.quick,
               **stamp()}
    if not args.no_save:
        save("scaling", None, figures)
    for mode in ("persistent", "unicast"):
        r = res[mode]
        log(f"{mode:10s} N {r['workers']}: egress/model {r['ps_egress_over_model']} "
            f"(exponent {r['egress_growth_exponent']}); iteration s {r['iteration_median_s']} "
            f"(exponent {r['iteration_growth_exponent']})")
    emit({m: {"egress_growth_exponent": res[m]["egress_growth_exponent"],
              "iteration_growth_exponent": res[m]["iteration_growth_exponent"],
              "egress_vs_smallest_n": res[m]["ps_egress_vs_smallest_n"][-1],
              "iteration_vs_smallest_n": res[m]["iteration_vs_smallest_n"][-1]}
          for m in ("persistent", "unicast")} | {"workers": ns})
    return 0


def rows(sec: dict) -> list[tuple[str, str, str, str]]:
    out = []
    for mode in ("persistent", "unicast"):
        r = sec.get(mode)
        if not r:
            continue
        n0, n1 = r["workers"][0], r["workers"][-1]
        out.append((f"PS egress/version, N={n0}→{n1}, {mode}",
                    f"×{fmt(r['ps_egress_vs_smallest_n'][-1], '.2f')} "
                    f"(∝ N^{fmt(r['egress_growth_exponent'], '.2f')})",
                    "report (expected: flat N^0)" if mode == "persistent"
                    else "report (expected: ∝ N^1)", "-"))
        out.append((f"iteration time, N={n0}→{n1}, {mode}",
                    f"×{fmt(r['iteration_vs_smallest_n'][-1], '.2f')} "
                    f"(∝ N^{fmt(r['iteration_growth_exponent'], '.2f')}); "
                    f"{fmt(r['iteration_median_s'][0] * 1000, '.0f')} → "
                    f"{fmt(r['iteration_median_s'][-1] * 1000, '.0f')} ms",
                    "report", "-"))
    return out


if __name__ == "__main__":
    sys.exit(main())
