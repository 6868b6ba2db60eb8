"""Runs of the scenario runner read back into figures, for the benchmarks that measure them.

A scenario run is `python -m ndnps.scenario NAME --out DIR --plain --set ...` as a child
process (exactly what a user runs: `run_scenario`); `ScenarioRun` reads what it left: the PS's
and workers' metrics (JSON lines), summary.json, and the forwarders' per-face rate traces by
packet class (`TrainingRun`: the metrics alone, bench.tcp_ps's too). `CpuSampler` samples each
role's CPU while a run goes on; `run_variants` alternates scenario variants; `model_sets` sets
a synthetic MLP's shape.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, TypedDict

from bench.common import ROOT, bench_parser, emit, env, jsonl_records, log, mean, median, stamp

# Iterations skipped at the start of every run: the first versions include start-up (the
# training content, registration, first collect estimates) and would be counted as training.
WARMUP_VERSIONS = 2


def variants_parser(prog: str, doc: str, quick: str, variants: tuple[str, ...], repeat: int):
    """bench_parser with --repeat, --variants and --analyse (a benchmark of scenario variants
    run alternately: `run_variants`)."""
    p = bench_parser(prog, doc, quick)
    p.add_argument("--repeat", type=int, default=repeat)
    p.add_argument("--variants", default=",".join(variants))
    p.add_argument("--analyse", metavar="DIR",
                   help="no runs: the figures of the runs kept in DIR (--keep) made again")
    return p


def run_variants(name: str, args: Any, known: tuple[str, ...], quick: list[str],
                 run: Callable[[str, Path, int, bool], dict],
                 combine: Callable[[list[dict]], dict],
                 line: Callable[[str, dict], dict]) -> dict | None:
    """The variants (`args.variants`, checked against `known`; `quick` with --quick, one
    repeat), alternated `args.repeat` times — `run(variant, keep_dir, repeat, analyse)` gives a
    run's figures — then each variant's repeats combined and its JSON line printed
    (`line(variant, combined)`). The results (stamp, repeat, variants), or None when a run
    failed (logged). Run directories are kept in --keep (or read from --analyse), else
    removed."""
    import shutil
    import tempfile
    variants = quick if args.quick else args.variants.split(",")
    repeat = 1 if args.quick else args.repeat
    unknown = [v for v in variants if v not in known]
    if unknown:
        log(f"{name}: --variants: unknown {unknown[0]!r} (known: {', '.join(known)})")
        return None
    keep = Path(args.analyse or args.keep or tempfile.mkdtemp(prefix=f"bench-{name}-"))
    results: dict[str, Any] = {"stamp": stamp(), "repeat": repeat, "variants": {}}
    reps: dict[str, list[dict]] = {v: [] for v in variants}
    try:
        for rep in range(repeat):                   # alternated: the noise spread alike
            for v in variants:
                reps[v].append(run(v, keep, rep, bool(args.analyse)))
        for v in variants:
            results["variants"][v] = combine(reps[v])
            emit({"bench": name, "variant": v, **line(v, results["variants"][v])})
    except RunError as e:
        log(f"{name}: {e}")
        return None
    finally:
        if not (args.keep or args.analyse):
            shutil.rmtree(keep, ignore_errors=True)
    return results


class RunError(RuntimeError):
    pass


class MlpShape(TypedDict):
    """A synthetic MLP's shape, as model_sets and mlp_params take it."""
    n_features: int
    hidden: list[int]


def model_sets(n_features: int, hidden: list[int], n_samples: int = 4000) -> list[str]:
    """--set overrides for the synthetic dataset and an MLP of the given shape (10 classes)."""
    return ["training.dataset=\"synthetic\"", f"training.n_features={n_features}",
            f"training.n_samples={n_samples}", f"training.hidden={json.dumps(hidden)}",
            "training.n_classes=10"]


def mlp_params(n_features: int, hidden: list[int], n_classes: int = 10) -> int:
    sizes = [n_features, *hidden, n_classes]
    return sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:]))


class CpuSampler:
    """Samples the CPU time (utime + stime, /proc) of every process whose command line
    mentions `tag` (a run directory), every `interval` s, from a thread, while a run goes on:
    `cpu_between(t0, t1)` gives each role's CPU seconds between two wall-clock instants.
    Roles: forwarder, ps, worker (ndnps apps; bench.tcp_ps's too; bench.gloo's ranks are
    workers)."""

    def __init__(self, tag: str, interval: float = 0.05) -> None:
        self.tag, self.interval = tag, interval
        self.samples: dict[int, list[tuple[float, float]]] = {}
        self.roles: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._tick = os.sysconf("SC_CLK_TCK")

    def __enter__(self) -> "CpuSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    @staticmethod
    def role(cmdline: str) -> str | None:
        if " -m ndnps.forwarder" in cmdline or " -m forwarder" in cmdline:
            return "forwarder"
        if " -m ndnps.apps.ps" in cmdline or "tcp_ps ps" in cmdline:
            return "ps"
        if " -m ndnps.apps.worker" in cmdline or "tcp_ps worker" in cmdline \
                or "bench.gloo rank" in cmdline:            # a gloo rank: a worker, no PS
            return "worker"
        return None

    def _loop(self) -> None:
        others: set[int] = set()            # processes not of the run: their cmdline read once
        while not self._stop.wait(self.interval):
            now = time.time()
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                p = int(pid)
                if p in others:
                    continue
                try:
                    if p not in self.roles:
                        with open(f"/proc/{pid}/cmdline", "rb") as f:
                            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
                        role = self.role(" " + cmd) if self.tag in cmd else None
                        if role is None:
                            if cmd:                 # not a process still being exec'd
                                others.add(p)
                            continue
                        self.roles[p] = role
                    with open(f"/proc/{pid}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                    cpu = (int(fields[11]) + int(fields[12])) / self._tick
                except (OSError, IndexError, ValueError):
                    continue
                self.samples.setdefault(p, []).append((now, cpu))

    def cpu_between(self, t0: float, t1: float) -> dict[str, float | None]:
        """CPU seconds per role between wall-clock instants t0 and t1 (linear between samples).
        A role with a process sampled within [t0, t1] but not at both ends (it started or ended
        between two samples) is None: a partial sum would read as a low figure."""
        out: dict[str, float | None] = {}
        for pid, samples in self.samples.items():
            role = self.roles[pid]
            a, b = _at(samples, t0), _at(samples, t1)
            if a is not None and b is not None:
                if role not in out or out[role] is not None:
                    out[role] = (out.get(role) or 0.0) + max(0.0, b - a)
            elif samples[0][0] <= t1 and samples[-1][0] >= t0 - self.interval:
                out[role] = None
        return out


def _at(samples: list[tuple[float, float]], t: float) -> float | None:
    if not samples or t < samples[0][0] or t > samples[-1][0]:
        return None
    for (ta, ca), (tb, cb) in zip(samples, samples[1:]):
        if ta <= t <= tb:
            return ca if tb == ta else ca + (cb - ca) * (t - ta) / (tb - ta)
    return samples[-1][1]


def cpu_per_iteration(run: "TrainingRun", sampler: CpuSampler) -> dict[str, float | None] | None:
    """Each role's CPU milliseconds per iteration over the steady versions (wall clock of the
    PS's records), their total, and the cores that total keeps busy (total / iteration)."""
    vs = [r for r in run.ps_versions if r["version"] >= WARMUP_VERSIONS and "ts" in r]
    if len(vs) < 2:
        return None
    t0, t1 = vs[0]["ts"], vs[-1]["ts"]
    n = len(vs) - 1
    cpu = sampler.cpu_between(t0, t1)
    if not cpu:
        return None
    out: dict[str, float | None] = {role: None if c is None else round(1000 * c / n, 2)
                                    for role, c in sorted(cpu.items())}
    whole = None if None in cpu.values() else sum(c for c in cpu.values() if c is not None)
    out["total"] = None if whole is None else round(whole * 1000 / n, 2)
    out["cores_busy"] = None if whole is None else round(whole / (t1 - t0), 2)
    return out


def run_scenario(name: str, sets: list[str], out: Path, timeout: float = 2400.0,
                 extra_env: dict[str, str] | None = None) -> "ScenarioRun":
    """One run of the scenario runner as a child process; its run directory read back.

    A run that failed only after the PS had finished every version is accepted, the failure
    kept in `run.notes` (see `_end_failure`): the iterations measured are all complete."""
    out.parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "ndnps.scenario", name, "--out", str(out), "--plain"]
    for s in sets:
        argv += ["--set", s]
    logfile = out.parent / f"{out.name}.runner.log"
    t0 = time.monotonic()
    with open(logfile, "wb") as f:
        try:
            rc = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, cwd=str(ROOT),
                                env={**os.environ, **env(), **(extra_env or {})},
                                timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = -1
    notes = []
    if rc != 0:
        why = _end_failure(out)
        if why is None:
            tail = "\n".join(logfile.read_text(errors="replace").splitlines()[-25:])
            raise RunError(f"scenario {name} {' '.join(sets)} exited {rc}:\n{tail}")
        notes.append(why)
    run = ScenarioRun(out)
    run.wall = time.monotonic() - t0
    run.notes = notes
    return run


def _end_failure(out: Path) -> str | None:
    """Why a failed run still measured every version, or None if it did not. One known
    end-of-run failure of the apps, after the PS's last version: on lossy links the final
    push is lost at a worker whose probe timer has backed off past the PS's `linger`; the PS
    is gone when it probes, and the worker waits for `ps_timeout`, longer than the runner
    waits (the runner stops it). (A unicast PS that left before every worker had fetched the
    final version was accepted too until d421921 fixed it: now that is a failure.)

    Accepted when the PS exited 0 after its `end` record and every failing worker had
    computed every step before the final version."""
    try:
        summary = json.loads((out / "summary.json").read_text())
    except (OSError, ValueError):
        return None
    codes = summary.get("exit_codes", {})
    ps_end = summary.get("ps_end") or {}
    final = ps_end.get("version")
    if codes.get("ps") != 0 or ps_end.get("event") != "end" or final is None:
        return None
    failed = [w for w, c in codes.items() if c != 0 and not w.startswith("fwd-") and w != "ps"]
    for w in failed:
        steps = [r for r in jsonl_records(out / "metrics" / f"{w}.jsonl") if "step" in r]
        if not steps or max(r.get("version", -1) for r in steps) < final - 1:
            return None
    error = summary.get("error", "")
    if "did not exit within" in error:
        return (f"worker(s) still waiting for the final version {final} after the PS left "
                f"(lost final push; probe timer backed off beyond the PS's linger)")
    return None


class TrainingRun:
    """A finished training's metrics directory (the ndnps apps' or bench.tcp_ps's: the same
    JSON-lines shape), read back: metrics/ps.jsonl and metrics/<worker>.jsonl."""

    def __init__(self, path: Path) -> None:
        self.dir = Path(path)
        self.wall = 0.0
        self.ps_records = jsonl_records(self.dir / "metrics" / "ps.jsonl")
        self.ps_versions = [r for r in self.ps_records if "version" in r and "event" not in r]
        self.workers = {p.stem: [r for r in jsonl_records(p) if "step" in r and "event" not in r]
                        for p in sorted((self.dir / "metrics").glob("*.jsonl")) if p.stem != "ps"}

    def steady(self) -> list[dict]:
        """The PS's per-version records after the warm-up versions."""
        return [r for r in self.ps_versions if r["version"] > WARMUP_VERSIONS]

    def iterations(self) -> list[float]:
        """Seconds between consecutive versions at the PS, warm-up excluded."""
        vs = [r for r in self.ps_versions if r["version"] >= WARMUP_VERSIONS]
        return [b["t"] - a["t"] for a, b in zip(vs, vs[1:])]

    def iteration_median(self) -> float | None:
        return median(self.iterations())

    def _event_t(self, event: str, last: bool = False) -> float | None:
        times = [r["t"] for r in self.ps_records if r.get("event") == event and "t" in r]
        return (times[-1] if last else times[0]) if times else None

    def ps_span(self) -> float | None:
        """Seconds from the PS's start (its launch) to its end: the whole training as a user
        waits for it, start-up and every version included."""
        start, end = self._event_t("launched"), self._event_t("end", last=True)
        return None if start is None or end is None else end - start

    def longest_wait(self) -> float | None:
        """The longest any version waited: seconds between consecutive versions at the PS,
        the first from the training's start (when its workers' gradients were first asked)."""
        start = self._event_t("start")
        ts = ([start] if start is not None else []) + [r["t"] for r in self.ps_versions]
        return max((b - a for a, b in zip(ts, ts[1:])), default=None)

    def iteration_mean(self) -> float | None:
        """Mean: every stall counts (the median hides recoveries that hit few iterations)."""
        return mean(self.iterations())

    def compute_median(self) -> float | None:
        """Median seconds a worker spent computing one gradient (its own `compute` metric)."""
        return median(r.get("compute") for recs in self.workers.values() for r in recs
                      if r["step"] >= WARMUP_VERSIONS)

    def ps_median(self, key: str) -> float | None:
        """Median over steady versions of one of the PS's per-version fields."""
        return median(r.get(key) for r in self.steady())


class ScenarioRun(TrainingRun):
    """A scenario runner's run directory: metrics, summary.json and the forwarders' traces."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.summary = json.loads((self.dir / "summary.json").read_text())
        self.notes: list[str] = []

    @property
    def model_bytes(self) -> int:
        return int(self.summary["model_bytes"])

    @property
    def n_workers(self) -> int:
        return int(self.summary["workers"])

    def ps_bytes_per_version(self) -> float | None:
        """Everything the PS's face sent per steady version (app counter, NDN wire bytes)."""
        return mean(r.get("bytes_sent") for r in self.steady())

    def ps_counter_per_version(self, key: str) -> float | None:
        return mean(r.get(key) for r in self.steady())

    def counter(self, key: str) -> int:
        """Sum of a final counter over the PS and the workers (probes, retransmissions...)."""
        ends = [self.summary.get("ps_end", {}), *self.summary.get("workers_end", {}).values()]
        return sum(int(e.get(key, 0) or 0) for e in ends)

    def forwarder_link_counter(self, key: str) -> int:
        """Sum of a link-reliability counter over every forwarder's faces (`retransmitted`,
        `given_up`, ...), from the runner's final status of each."""
        total = 0
        for path in (self.dir / "traces").glob("*-status.json"):
            for face in json.loads(path.read_text()).get("faces", []):
                total += int((face.get("lp_reliability") or {}).get(key, 0) or 0)
        return total

    # ---- forwarder traces ----

    def labels(self, node: str) -> dict[str, str]:
        """Face id -> peer or app, from the runner's final status (which names an app's face
        only if the runner saw it connected: a short run's PS may come and go between two
        looks).  The face that brought this node the PS's collect Interests is named when the
        status does not name it: "ps" at the PS's forwarder (fwd, root), "root" at a leaf;
        other faces stay faceN."""
        path = self.dir / "traces" / f"{node}-status.json"
        labels = json.loads(path.read_text()).get("labels", {}) if path.exists() else {}
        up = "ps" if node in ("fwd", "root") else "root"
        if up in labels.values():
            return labels
        with open(self.dir / "traces" / f"{node}-rates.tsv") as f:
            rows = [line.split("\t") for line in f.read().splitlines()[1:]]
        inferred = {r[2]: up for r in rows if r[3] == "InInterests" and r[4] == "collect"}
        return {**labels, **inferred}

    def nodes(self) -> list[str]:
        return sorted(p.name[:-len("-rates.tsv")] for p in (self.dir / "traces").glob("*-rates.tsv"))

    def face_classes(self, node: str) -> dict[tuple[str, str, str], list[int]]:
        """(face label, Type, Class) -> [packets, bytes] summed over the run."""
        labels = self.labels(node)
        out: dict[tuple[str, str, str], list[int]] = {}
        path = self.dir / "traces" / f"{node}-rates.tsv"
        with open(path) as f:
            header = f.readline().rstrip("\n").split("\t")
            col = {k: i for i, k in enumerate(header)}
            for line in f:
                row = line.rstrip("\n").split("\t")
                face = labels.get(row[col["FaceId"]], f"face{row[col['FaceId']]}")
                c = out.setdefault((face, row[col["Type"]], row[col["Class"]]), [0, 0])
                c[0] += int(row[col["Packets"]])
                c[1] += int(row[col["Bytes"]])
        return out
