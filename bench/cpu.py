"""Where a version's CPU goes: per packet per hop and per role, system calls and context
switches per version, copies per pushed segment — the compiled core (the default install) and
the pure Python sources (NDNPS_PURE=1) side by side in one run.

    python -m bench cpu [--model 100k|1M] [--workers 4] [--versions 30] [--rounds 2]
                        [--quick] [--keep DIR] [--no-save]

Each round runs the `sync-sgd` scenario (one forwarder, the PS and N workers on this machine,
unix faces) with bench.iteration's MLP, once per build, alternating. Per run, over the steady
versions (the PS's records after the warm-up):
- CPU µs per packet: the forwarder's CPU ÷ the packets it received (every packet the apps sent:
  one hop each); the PS's ÷ the packets it sent and received; a worker's, its gradient's
  compute taken off, ÷ its own packets. And each role's CPU ms per version.
- system calls and context switches per version: `perf stat -e raw_syscalls:sys_enter,
  context-switches` attached to the forwarder, the PS and one worker for a window of steady
  versions (left out, saying so, where perf or the tracepoint is missing);
- copies of a segment per process part (`copies_per_segment`, bench.micro.copies): a short
  training in one process (the real PS, forwarder core and workers on the unit tests'
  in-memory network) under an allocation counter; the bytes written into new buffers of at
  least 15/16 of a segment, per segment of content each part handled (its docstring says how
  and what it cannot see).
Writes bench/results.json key "cpu" and prints one JSON line last.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from .common import bench_parser, emit, jsonl_records, log, median, rnd, save, stamp
from .scenario_runs import CpuSampler, RunError, model_sets, run_scenario
from .iteration import MODELS, N_SAMPLES

BUILDS = {"compiled": {}, "python": {"NDNPS_PURE": "1"}}
WARMUP = 3                         # versions before the measured window
PERF_EVENTS = "raw_syscalls:sys_enter,context-switches"


def perf_available() -> str | None:
    """None if `perf stat` can count system calls here, else why not."""
    if shutil.which("perf") is None:
        return "perf is not installed (Debian: linux-perf)"
    probe = subprocess.run(["perf", "stat", "-x", ",", "-e", PERF_EVENTS, "true"],
                           capture_output=True, text=True)
    if probe.returncode != 0 or "not supported" in probe.stderr or "<not" in probe.stderr:
        return f"perf cannot count {PERF_EVENTS} here: {probe.stderr.strip()[:200]}"
    return None


class PerfWindow:
    """`perf stat` attached to one process of each role once the PS has reached WARMUP
    versions, for `seconds`; the versions the PS made meanwhile are the denominator."""

    def __init__(self, run_dir: Path, seconds: float) -> None:
        self.run_dir, self.seconds = run_dir, seconds
        self.counts: dict[str, dict[str, float]] = {}
        self.versions = 0
        self.error: str | None = None
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> "PerfWindow":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._thread.join(self.seconds + 60)

    def _pids(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if str(self.run_dir) not in cmd:
                continue
            role = CpuSampler.role(" " + cmd)
            if role == "worker" and "--name w1 " not in cmd + " ":
                continue
            if role is not None and role not in found:
                found[role] = int(pid)
        return found

    def _version(self) -> int:
        recs = jsonl_records(self.run_dir / "metrics" / "ps.jsonl")
        vs = [r["version"] for r in recs if "version" in r and "event" not in r]
        return max(vs, default=0)

    def _watch(self) -> None:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and self._version() < WARMUP:
            time.sleep(0.1)
        pids = self._pids()
        if len(pids) < 3:
            self.error = f"found only {sorted(pids)} running"
            return
        v0 = self._version()
        procs = {role: subprocess.Popen(
            ["perf", "stat", "-x", ",", "-e", PERF_EVENTS, "-p", str(pid), "--", "sleep",
             str(self.seconds)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            for role, pid in pids.items()}
        outs = {role: p.communicate(timeout=self.seconds + 30)[1] for role, p in procs.items()}
        self.versions = self._version() - v0
        for role, text in outs.items():
            counts: dict[str, float] = {}
            for line in text.splitlines():
                parts = line.split(",")
                if len(parts) > 2 and parts[0].replace(".", "").isdigit():
                    counts[parts[2]] = float(parts[0])
            self.counts[role] = counts


def steady(records: list[dict]) -> list[dict]:
    return [r for r in records if r.get("version", 0) > WARMUP and "event" not in r
            and "packets_sent" in r]


def per_packet(run_dir: Path, cpu: dict[str, float | None]) -> dict[str, Any]:
    """CPU µs per packet per role over the steady versions, and CPU ms per version."""
    ps = steady(jsonl_records(run_dir / "metrics" / "ps.jsonl"))
    workers = [steady(jsonl_records(p)) for p in sorted((run_dir / "metrics").glob("w*.jsonl"))]
    n = len(ps)
    if n < 2 or not all(workers):
        return {}
    ps_packets = sum(r["packets_sent"] + r["packets_received"] for r in ps) / n
    w_packets = [sum(r["packets_sent"] + r["packets_received"] for r in w) / len(w)
                 for w in workers]
    w_compute = [sum(r.get("compute", 0.0) for r in w) / len(w) for w in workers]
    # every packet an app sends is one the forwarder receives (one hop)
    fwd_in = (sum(r["packets_sent"] for r in ps) / n
              + sum(sum(r["packets_sent"] for r in w) / len(w) for w in workers))
    out: dict[str, Any] = {"packets_per_version": {"forwarder_in": rnd(fwd_in),
                                                   "ps": rnd(ps_packets),
                                                   "worker": rnd(sum(w_packets) / len(w_packets))}}
    ms = {role: (None if c is None else 1000 * c) for role, c in cpu.items()}
    out["cpu_ms_per_version"] = {k: rnd(v) for k, v in ms.items()}
    us: dict[str, float | None] = {}
    fwd_ms, ps_ms, w_ms = ms.get("forwarder"), ms.get("ps"), ms.get("worker")
    if fwd_ms is not None:
        us["forwarder"] = rnd(1000 * fwd_ms / fwd_in)
    if ps_ms is not None:
        us["ps"] = rnd(1000 * ps_ms / ps_packets)
    if w_ms is not None:
        # the sampler sums the workers: each worker's network CPU, its compute taken off
        net = w_ms / len(workers) - 1000 * sum(w_compute) / len(workers)
        us["worker"] = rnd(1000 * net / (sum(w_packets) / len(w_packets)))
    out["cpu_us_per_packet"] = us
    return out


def one_run(build: str, sets: list[str], out: Path, perf_seconds: float | None) -> dict:
    sampler = CpuSampler(str(out))
    window = PerfWindow(out, perf_seconds) if perf_seconds else None
    with sampler:
        if window is not None:
            with window:
                run = run_scenario("sync-sgd", sets, out, extra_env=BUILDS[build])
        else:
            run = run_scenario("sync-sgd", sets, out, extra_env=BUILDS[build])
    # the last version's record left out: a worker that sent its last gradient may be gone
    # before the PS writes it, and a role not sampled at both ends of the window has no figure
    vs = [r for r in run.ps_versions if r["version"] >= WARMUP and "ts" in r][:-1]
    res: dict[str, Any] = {"iteration_s": rnd(run.iteration_median())}
    if len(vs) >= 2:
        n = len(vs) - 1
        cpu = {role: (None if c is None else c / n)
               for role, c in sampler.cpu_between(vs[0]["ts"], vs[-1]["ts"]).items()}
        res.update(per_packet(out, cpu))
    if window is not None:
        if window.error or not window.versions:
            res["syscalls_error"] = window.error or "no version within the window"
        else:
            res["per_version"] = {
                role: {"syscalls": rnd(c.get("raw_syscalls:sys_enter", 0) / window.versions),
                       "context_switches": rnd(c.get("context-switches", 0) / window.versions)}
                for role, c in window.counts.items()}
    log(f"  {build}: {res}")
    return res


def copies_per_segment() -> dict[str, Any]:
    """The push path in one process (bench.micro.copies): allocations of a segment's size per
    pushed segment, by part."""
    proc = subprocess.run([sys.executable, "-m", "bench.micro.copies", "--json"],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip()[-500:]}
    import json
    return json.loads(proc.stdout.strip().splitlines()[-1])


def summarize(runs: dict[str, list[dict]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for build, rs in runs.items():
        fig: dict[str, Any] = {"iteration_s": median([r.get("iteration_s") for r in rs])}
        for key in ("cpu_us_per_packet", "cpu_ms_per_version"):
            roles = {k for r in rs for k in r.get(key, {})}
            fig[key] = {role: median([r.get(key, {}).get(role) for r in rs]) for role in
                        sorted(roles)}
        pv = [r["per_version"] for r in rs if "per_version" in r]
        if pv:
            fig["per_version"] = {role: {k: median([p.get(role, {}).get(k) for p in pv])
                                         for k in ("syscalls", "context_switches")}
                                  for role in sorted({r for p in pv for r in p})}
        out[build] = fig
    c, p = out.get("compiled", {}), out.get("python", {})
    if c and p:
        out["python_over_compiled"] = {
            role: rnd(p["cpu_us_per_packet"][role] / c["cpu_us_per_packet"][role])
            for role in c.get("cpu_us_per_packet", {})
            if p.get("cpu_us_per_packet", {}).get(role) and c["cpu_us_per_packet"][role]}
    return out


def main(argv: list[str] | None = None) -> int:
    p = bench_parser("python -m bench cpu", __doc__, "one round of 10 versions")
    p.add_argument("--model", default="1M", choices=sorted(MODELS))
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--versions", type=int, default=30)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--perf-seconds", type=float, default=3.0)
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.versions = 1, 10
    from ndnps.forwarder import USE_COMPILED
    builds = list(BUILDS) if USE_COMPILED else ["python"]
    if not USE_COMPILED:
        log("this installation has no compiled core: only the Python sources are measured")
    why = perf_available()
    if why:
        log(f"system calls not counted: {why}")
    model = MODELS[args.model]
    sets = [*model_sets(model["n_features"], model["hidden"], N_SAMPLES),
            f"topology.workers={args.workers}", f"training.max_versions={args.versions}",
            f"training.eval_every={args.versions}"]
    base = args.keep or Path(tempfile.mkdtemp(prefix="bench-cpu-"))
    runs: dict[str, list[dict]] = {b: [] for b in builds}
    try:
        for r in range(args.rounds):
            for build in builds:
                log(f"cpu round {r + 1}/{args.rounds} {build}")
                try:
                    runs[build].append(one_run(build, sets, base / f"{build}-{r}",
                                               None if why else args.perf_seconds))
                except RunError as e:
                    log(f"  {build}: failed: {e}")
        fig = summarize(runs)
        fig["copies_per_segment"] = copies_per_segment()
        fig.update(model=args.model, workers=args.workers, versions=args.versions,
                   rounds=args.rounds, syscalls_skipped=why, runs=runs, **stamp())
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    if not args.no_save:
        save("cpu", None, fig)
    emit({k: fig[k] for k in ("compiled", "python", "python_over_compiled",
                              "copies_per_segment") if k in fig})
    return 0


def rows(sec: dict) -> list[tuple[str, str, str, str]]:
    out = []
    for build in ("compiled", "python"):
        f = sec.get(build)
        if not f:
            continue
        us = f.get("cpu_us_per_packet", {})
        pv = f.get("per_version", {})
        figure = ", ".join(f"{role} {v}" for role, v in us.items())
        if pv:
            figure += "; syscalls/version " + ", ".join(
                f"{role} {v.get('syscalls')}" for role, v in pv.items())
        out.append((f"CPU µs per packet per hop, {build} ({sec.get('model')}, "
                    f"N = {sec.get('workers')})", figure, "report", "–"))
    cps = sec.get("copies_per_segment", {})
    if cps and "error" not in cps:
        parts = ("ps", "forwarder", "worker", "worker_model", "collect_worker",
                 "collect_forwarder", "collect_ps", "framing")
        out.append(("copies of a segment's bytes, by part", ", ".join(
            f"{k} {cps[k]}" for k in parts if isinstance(cps.get(k), (int, float))),
            "≤ 1 per process", "–"))
    return out


if __name__ == "__main__":
    sys.exit(main())
