"""Faults injected -> outcome (docs/faults.md): every fault case run through the scenario runner
exactly as a user runs it, and the bad-input side (fuzzing, bad-input tests), in one table.

    python -m bench faults [--quick] [--only NAME,...] [--keep DIR] [--no-save]
                           [--atheris-runs N] [--table]

Fault cases (`python -m ndnps.scenario SCENARIO --out DIR --plain --set ...`, one run each):

    worker-continue   worker-killed.toml, w2 killed at version 40, never restarted (continue)
    worker-wait       worker-killed.toml, on_worker_loss = "wait": w2 killed, restarted 2 s later
    worker-rejoin     worker-killed.toml as shipped: w2 killed, restarted, rejoins (continue)
    forwarder         forwarder-killed.toml: the forwarder killed at 40, restarted 1 s later
    ps                ps-killed.toml: the PS killed at 45, restarted from its checkpoint
    worker-unplanned  worker-killed.toml with no [faults]: w2 killed by hand (SIGKILL, by pid)
                      at version 40 — an unplanned exit, recorded; continue carries the job
    runner-killed     sync-sgd: the runner itself killed (SIGKILL) at version 20: no child
                      may outlive it (checked by pid for 10 s)
    peer-unplanned    ring.toml, on_peer_loss = "re-form": peer w3 killed by hand at version
                      20; the others re-form and finish with identical parameters
    stage-unplanned   hetero.toml (small): stage m2-mid killed by hand at version 5; the
                      pipeline stops, the runner exits 3 naming the stage
    controller-unplanned  multi-job.toml: the share controller killed by hand at version 3 of
                      job "big"; every job finishes, its rounds the ordinary way
    loss-0 ... -20    lossy.toml with links.loss = 0, 0.05, 0.1, 0.2 (every link, both ways)
                      and links.reliability = false: end-to-end recovery alone
    loss-10+lp, -20+lp  the same with NDNLPv2 link reliability on every link (the default)
    chaos             chaos.toml as shipped (--quick: the same faults on a shorter run)

Each run is read back (summary.json, metrics/ps.jsonl, model.npz) and judged against the
single-process reference of the same training (`ndnps.ml.train.train_sync_reference`, the
training table the runner resolved in scenario.toml): in sync mode a run that loses nothing
and applies nothing twice ends with the reference's parameters, bit for bit up to float
rounding. So cases whose every version has every gradient (wait, forwarder, PS restart,
loss) must end at the reference's parameters (max |difference| <= 1e-5); cases that go on
with fewer gradients (continue, chaos) must reach the reference's accuracy less 0.03.
"Nothing lost" is read from the PS's per-version records (every version from 1 to the last
applied, each once, except versions redone after a PS restart: exactly the versions after
the checkpoint it resumed from) and the counters (signature rejections, malformed
versions and gradients: 0). The expected fault counters (workers lost / rejoined, short
versions, collects redone, reconnects, PS restarts) are checked per case; every failed check
is listed in the row, nothing is retried.

Bad input: the hypothesis fuzz test of the forwarder core (tests/unit/test_fw_fuzz.py, run
in-process with the packets counted), the atheris harness (fuzz/fuzz_forwarder.py,
`--atheris-runs` inputs; 1,000,000 by default, 20,000 with --quick; skipped if atheris is not
installed) and every test whose name says bad input (BAD_INPUT_K, slow ones included).

Writes bench/results.json key "faults"; prints one JSON line last. `--table` prints the
table of docs/faults.md ("Faults injected -> outcome") from results.json without running
anything.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

from bench.common import (ROOT, bench_parser, emit, env, jsonl_records, load_results, log, rnd,
                          save, stamp)
from ndnps.lab.series import fault_counts

ACCURACY_TOLERANCE = 0.03       # runs with fewer gradients in some versions (continue, chaos)
PARAM_TOLERANCE = 1e-5          # runs that must end at the reference's parameters
RUN_TIMEOUT = 1500.0            # run.timeout for every case (a lossy run is slow, not wrong)
ATHERIS_RUNS, ATHERIS_QUICK_RUNS = 1_000_000, 20_000
# A run that instruments the forwarder core reaches ~600-700 edges within 20,000 inputs; ~100
# means atheris did not instrument it (e.g. an import hook ahead of atheris's loads it)
ATHERIS_MIN_EDGES = 400
# tests about bad input, by name (pytest -k), across tests/ (slow ones included)
BAD_INPUT_K = ("malformed or bad or forged or garbage or truncat or oversize or fuzz or "
               "reject or nested or flood or corrupt or critical or non_local or localhost or "
               "unsolicited or duplicat or quota or rate_limit or never_raises")


@dataclass
class Case:
    name: str
    fault: str                       # what is injected, for the table
    scenario: str
    sets: list[str] = field(default_factory=list)
    quick_sets: list[str] = field(default_factory=list)   # replaces `sets` with --quick
    exact: bool = True               # every version has every gradient: reference parameters
    expect: dict = field(default_factory=dict)            # summary key -> check
    # done by hand while the run goes on, once the PS reaches a version: "kill-worker:w2@40"
    # (SIGKILL that worker's process, unannounced), "kill-runner@20" (SIGKILL the runner),
    # "kill-controller@3" (the share controller)
    during: str | None = None
    recorder: str = "ps"             # whose metrics say the version (PS-less: a peer, a stage)
    # PS-less and sharing cases are judged by what their job promises, not the PS's ledger:
    # {"runner_exit": 0 | 3, "role": the unplanned exit's role, "reformed": [lost peers]}
    psless: dict | None = None


# the shortened chaos run (the integration test uses the same): every kind of fault, sooner
CHAOS_SHORT = ["training.epochs=40",       # time for a restarted worker to start and rejoin
               "faults.random={ kills = 2, seed = 7, from_version = 20, to_version = 70, "
               "restart_after = 1.5 }",
               "faults.kill=[{ ps = true, at_version = 50, restart_after = 1.0 }, "
               "{ forwarder = \"fwd\", at_version = 85, restart_after = 1.0 }]"]

# the hetero scenario, small and quick: a stage silent for 6 s stops the others (a stage
# slow to start on a loaded host is not taken for one lost)
HETERO_SMALL = ["training.hidden=[64,64,64,64,64]", "pipeline.device_scale=2.0",
                "training.epochs=30", "training.worker_timeout=6.0"]

CASES = [
    Case("worker-continue", "worker w2 killed at version 40, not restarted "
                            "(on_worker_loss = continue)",
         "worker-killed", ["faults.kill=[{ worker = \"w2\", at_version = 40 }]"],
         ["faults.kill=[{ worker = \"w2\", at_version = 40 }]", "training.epochs=10"],
         exact=False,
         expect={"workers_lost": (">=", 1), "workers_rejoined": ("==", 0),
                 "workers_lost_at_end": ("==", ["w2"]), "short_versions": (">", 0),
                 "exit:w2": ("==", -9)}),
    Case("worker-wait", "worker w2 killed at version 40, restarted 2 s later "
                        "(on_worker_loss = wait)",
         "worker-killed", ["training.on_worker_loss=\"wait\""],
         ["training.on_worker_loss=\"wait\"", "training.epochs=10"],
         expect={"workers_lost": (">=", 1), "workers_rejoined": (">=", 1),
                 "collects_redone": (">=", 1), "short_versions": ("==", 0),
                 "workers_lost_at_end": ("==", []), "exit:w2-r1": ("==", 0)}),
    # 60 epochs (600 versions, not the scenario's 300): a restarted process needs seconds to
    # start, and a run that ends first cannot show the rejoin (the runner records it)
    Case("worker-rejoin", "worker w2 killed at version 40, restarted 2 s later; rejoins "
                          "(continue; 60 epochs)",
         "worker-killed", ["training.epochs=60"], ["training.epochs=30"], exact=False,
         expect={"workers_lost": (">=", 1), "workers_rejoined": (">=", 1),
                 "workers_lost_at_end": ("==", []), "short_versions": (">", 0),
                 "exit:w2-r1": ("==", 0)}),
    Case("forwarder", "forwarder killed at version 40, restarted on its socket 1 s later",
         "forwarder-killed", [], ["training.epochs=10"],
         expect={"reconnects:all": (">=", 1), "workers_lost": ("==", 0),
                 "exit:fwd-fwd-r1": ("==", 0)}),
    Case("ps", "PS killed at version 45, restarted 1 s later from its checkpoint",
         "ps-killed", [], ["training.epochs=10"],
         expect={"ps_restarts": ("==", 1), "exit:ps-r1": ("==", 0),
                 "workers_lost": ("==", 0)}),
    Case("worker-unplanned", "worker w2 killed by hand (SIGKILL, not by [faults]) at version "
                             "40, not restarted (on_worker_loss = continue)",
         "worker-killed", ["faults.kill=[]"], ["faults.kill=[]", "training.epochs=10"],
         exact=False, during="kill-worker:w2@40",
         expect={"unplanned:w2": ("==", -9), "workers_lost": (">=", 1),
                 "workers_rejoined": ("==", 0), "workers_lost_at_end": ("==", ["w2"])}),
    Case("runner-killed", "the runner itself killed (SIGKILL) at version 20",
         "sync-sgd", ["training.epochs=50"], ["training.epochs=50"], during="kill-runner@20"),
    Case("peer-unplanned", "ring peer w3 killed by hand (SIGKILL) at version 20 "
                           "(on_peer_loss = re-form)",
         "ring", ['training.on_peer_loss="re-form"'],
         ['training.on_peer_loss="re-form"', "training.worker_timeout=3.0"], exact=False,
         during="kill-worker:w3@20", recorder="w1",
         psless={"runner_exit": 0, "role": "peer", "reformed": ["w3"]}),
    Case("stage-unplanned", "pipeline stage m2-mid killed by hand (SIGKILL) at version 5",
         "hetero", HETERO_SMALL, HETERO_SMALL, exact=False, during="kill-worker:m2-mid@5",
         recorder="m1-fast", psless={"runner_exit": 3, "role": "stage"}),
    Case("controller-unplanned", "the share controller killed by hand (SIGKILL) at version 3",
         "multi-job", [], [], exact=False, during="kill-controller@3", recorder="big",
         psless={"runner_exit": 0, "role": "controller"}),
    *[Case(f"loss-{p}{'+lp' if lp else ''}",
           f"{p}% loss on every link, both directions"
           + (", NDNLPv2 link reliability" if lp else ", end-to-end recovery alone"),
           "lossy", [f"links.loss={p / 100}", f"links.reliability={str(lp).lower()}"],
           [f"links.loss={p / 100}", f"links.reliability={str(lp).lower()}",
            "training.epochs=3"])
      for p, lp in ((0, False), (5, False), (10, False), (10, True), (20, False), (20, True))],
    Case("chaos", "chaos.toml: 3% loss, 3 random worker kills (restarted), PS killed at 120 "
                  "(checkpoint), forwarder killed at 220",
         "chaos", [], CHAOS_SHORT, exact=False,
         expect={"faults_done": ("==", "all"), "ps_restarts": ("==", 1),
                 "reconnects:all": (">=", 1), "workers_lost_at_end": ("==", [])}),
]


# ---- one run ------------------------------------------------------------------------------------

def launch(scenario: str, sets: list[str], out: Path, timeout: float,
           during: str | None = None, recorder: str = "ps") -> dict:
    """The runner as a child process, exactly as a user starts it; a run that overstays is
    sent SIGTERM (the runner stops every process it started), then SIGKILL.  `during`: see
    Case (what was done goes into the result: "done_by_hand")."""
    from ndnps.lab.process import ManagedProcess
    argv = [sys.executable, "-m", "ndnps.scenario", scenario, "--out", str(out), "--plain"]
    for s in sets:
        argv += ["--set", s]
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    proc = ManagedProcess(out.name, argv, out.parent / f"{out.name}.runner.log", env=env(),
                          cwd=str(ROOT))
    res: dict[str, Any] = {}
    try:
        if during:
            res["done_by_hand"] = by_hand(during, proc, out, t0 + timeout, recorder)
        rc = proc.proc.wait(max(1.0, t0 + timeout - time.monotonic()))
    except subprocess.TimeoutExpired:
        rc = None
    finally:
        proc.stop(grace=30.0)
        for pid in processes_of(out):            # should the runner have left any
            _kill(pid)
    return {"rc": rc, "wall": time.monotonic() - t0, "argv": argv,
            "log": str(out.parent / f"{out.name}.runner.log"), **res}


def processes_of(run_dir: Path) -> list[int]:
    """Every process whose command line names the run directory (the runner's children)."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as f:
                zombie = f.read().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            continue
        if not zombie and any(str(run_dir).encode() in part for part in cmd):
            pids.append(int(pid))
    return pids


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def by_hand(action: str, runner, out: Path, deadline: float, recorder: str = "ps") -> dict:
    """Wait until the recorder's metrics (the PS's, or a PS-less job's first peer or stage)
    reach the action's version, then do it."""
    what, _, at = action.partition("@")
    version = int(at)
    metrics = out / "metrics" / f"{recorder}.jsonl"
    while time.monotonic() < deadline and runner.poll() is None:
        recs = jsonl_records(metrics) if metrics.exists() else []
        if any(r.get("version", -1) >= version for r in recs if "event" not in r):
            break
        time.sleep(0.02)
    else:
        return {"action": action, "skipped": "the run ended (or timed out) first"}
    if what == "kill-runner":
        children = [p for p in processes_of(out) if p != runner.pid]
        _kill(runner.pid)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 10 and [p for p in children if p in processes_of(out)]:
            time.sleep(0.05)
        survivors = [p for p in children if p in processes_of(out)]
        return {"action": action, "children": len(children), "survivors": len(survivors),
                "gone_after_s": round(time.monotonic() - t0, 2)}
    mark = (b"-m\0ndnps.apps.controller\0" if what == "kill-controller"
            else f"--name\0{what.split(':', 1)[1]}\0".encode())
    pids = []
    for pid in processes_of(out):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if mark in f.read():
                    pids.append(pid)
        except OSError:
            continue
    for pid in pids:
        _kill(pid)
    return {"action": action, "killed": pids}


def judge_runner_killed(launched: dict) -> dict:
    """A runner killed outright: every child must be gone with it."""
    done = launched.get("done_by_hand") or {}
    res = {"runner_exit": launched["rc"], "wall_s": round(launched["wall"], 1), **done}
    fail = []
    if "skipped" in done:
        fail.append(f"not done: {done['skipped']}")
    elif done.get("survivors"):
        fail.append(f"{done['survivors']} of {done['children']} children outlived the runner "
                    f"by 10 s")
    res.update(ok=not fail, failures=fail)
    return res


def judge_psless(want: dict, run_dir: Path, launched: dict) -> dict:
    """A PS-less or shared-aggregator run with a process killed by hand: the runner's exit
    code, the unplanned exit under its true role with its policy's action, what the job
    promises (re-formed without the lost peer, identical parameters; or a stop naming it;
    every job finished), and no process left."""
    done = launched.get("done_by_hand") or {}
    res: dict = {"runner_exit": launched["rc"], "wall_s": round(launched["wall"], 1)}
    fail: list[str] = []
    if "skipped" in done:
        fail.append(f"not done: {done['skipped']}")
    if launched["rc"] != want["runner_exit"]:
        fail.append(f"runner exit {launched['rc']}, expected {want['runner_exit']}")
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError) as e:
        res.update(ok=False, failures=fail + [f"no summary.json ({e})"])
        return res
    res["exit_codes"] = summary.get("exit_codes", {})
    if summary.get("error"):     # its one-line reason, without the log tail's path
        res["error"] = summary["error"].splitlines()[0].split("; last lines of")[0][:300]
    unplanned = summary.get("unplanned_exits") or []
    res["unplanned_exits"] = [{k: u.get(k) for k in ("who", "role", "t", "how", "action")}
                              for u in unplanned]
    roles = [u.get("role") for u in unplanned]
    if roles != [want["role"]]:
        fail.append(f"unplanned exits recorded as {roles}, expected [{want['role']!r}]")
    for key in ("final_accuracy", "versions", "parameters_identical", "reformed"):
        res[key] = summary.get(key)
    if "reformed" in want:
        lost = [p for r in summary.get("reformed") or [] for p in r.get("lost", [])]
        if lost != want["reformed"]:
            fail.append(f"re-formed without {lost}, expected {want['reformed']}")
        if summary.get("parameters_identical") is not True:
            fail.append("the peers' parameters differ")
    if want["runner_exit"] == 3 and unplanned and \
            f"{unplanned[0]['node']} ({unplanned[0]['how']}, unplanned)" not in \
            summary.get("error", ""):
        fail.append("the stop does not name the process lost")
    if want["role"] == "controller":
        share = summary.get("share") or {}
        # the runner's exit 0 says every job's PS (or first peer) finished
        res["jobs"] = {ps: {k: job.get(k) for k in ("versions", "final_accuracy", "rounds")}
                       for ps, job in (share.get("jobs") or {}).items()}
        if not res["jobs"]:
            fail.append("no share block in summary.json")
        for key in ("ina_overlap_violations", "decision_mismatches"):
            if share.get(key):
                fail.append(f"{key} = {share[key]}")
    left = processes_of(run_dir)
    if left:
        fail.append(f"{len(left)} processes outlived the run")
    res.update(ok=not fail, failures=fail, psless=True)
    return res


def _psless_evidence(r: dict) -> str:
    parts = []
    for re in r.get("reformed") or []:
        parts.append(f"re-formed without {', '.join(re['lost'])} at version {re['version']} "
                     f"({len(re['peers'])} peers)")
    if r.get("reformed") and r.get("parameters_identical") is not None:
        parts.append("parameters identical at every peer" if r["parameters_identical"]
                     else "parameters differ")
    for ps, job in (r.get("jobs") or {}).items():
        parts.append(f"{ps}: {job.get('versions')} versions, accuracy {_f(job.get('final_accuracy'))}")
    if r.get("runner_exit") == 3 and r.get("error"):
        parts.append(r["error"][:200])
    parts.append("no process left" if not any("outlived" in f for f in r.get("failures", []))
                 else "processes left")
    return "; ".join(parts)


def reference(run_dir: Path) -> dict:
    """The single-process reference of the training this run resolved (scenario.toml)."""
    from ndnps.ml.data import load_dataset
    from ndnps.ml.train import train_sync_reference
    t = tomllib.loads((run_dir / "scenario.toml").read_text())["training"]
    kw = {k: t[k] for k in ("n_samples", "n_features", "n_classes")
          if t.get("dataset") == "synthetic" and k in t}
    ds = load_dataset(t["dataset"], t["seed"], **kw)
    spec = {"kind": t["model"], **({"hidden": t["hidden"]} if t["model"] == "mlp" else {})}
    res = train_sync_reference(ds, spec, len(t["workers"]), t["epochs"], t["batch"], t["lr"],
                               t["momentum"], t["weight_decay"], t["seed"])
    return {"accuracy": res["final_accuracy"], "params": res["params"],
            "versions": res["steps_per_epoch"] * t["epochs"],
            "max_versions": t.get("max_versions", 0)}


def version_ledger(records: list[dict], workers: int | None = None) -> dict:
    """From the PS's metrics (appended to by a restarted PS): versions applied, missing,
    applied twice, and what the restarts explain (versions after the resumed checkpoint up
    to the last one the killed PS applied)."""
    applied: list[int] = []
    explained = 0
    lost = fault_counts(records)
    starts = [r for r in records if r.get("event") == "start"]
    started = len(starts[-1].get("workers", [])) if starts else 0   # workers in the training
    for r in records:
        if r.get("event") == "start" and r.get("resumed_from") is not None and applied:
            explained += max(0, max(applied) - int(r["resumed_from"]))
        elif "collect_wait" in r and "version" in r:
            applied.append(int(r["version"]))
    last = max(applied, default=0)
    seen: dict[int, int] = {}
    for v in applied:
        seen[v] = seen.get(v, 0) + 1
    return {"last": last, "applied": len(applied),
            "missing": [v for v in range(1, last + 1) if v not in seen],
            "redone": sum(c - 1 for c in seen.values()),
            "applied_thrice": [v for v, c in seen.items() if c > 2],
            "redone_explained": explained,
            "gradients": sum(int(r.get("gradients", 0)) for r in records if "collect_wait" in r),
            # versions averaged over fewer gradients than workers in the training
            "short": sum(1 for r in records if "collect_wait" in r
                         and r.get("gradients", 0) < (workers or started)),
            # from the PS's events, which survive a PS restart (its counters do not)
            "dropped": lost["workers_lost"], "rejoined": lost["workers_rejoined"]}


def unnoticed_kills(kills: list[dict], faults: list[dict], run_dir: Path) -> list[dict]:
    """Worker kills no PS could notice: the PS was killed too, within worker_timeout after
    (kills meant for close versions, or read late in a fast training, land together).  The PS
    that would have dropped the worker is gone; the resumed one offers it the task afresh,
    which counts neither as a loss nor as a rejoin."""
    t = tomllib.loads((run_dir / "scenario.toml").read_text())["training"]
    timeout = float(t.get("worker_timeout", 30.0))
    ps_kills = [f["t"] for f in faults if f.get("role") == "ps" and "skipped" not in f]
    return [k for k in kills if any(0 <= p - k["t"] <= timeout for p in ps_kills)]


def killed_while_forwarder_down(faults: list[dict]) -> set[str]:
    """Apps killed between a forwarder's kill and its restart (both may land at once): they
    never connected to the forwarder that went away and came back."""
    outages = [(f["t"], f.get("restarted", {}).get("t", float("inf"))) for f in faults
               if f.get("role") == "forwarder" and "skipped" not in f]
    return {str(f[f["role"]]) for f in faults
            if f.get("role") in ("worker", "ps") and "skipped" not in f
            and any(a <= f["t"] <= b for a, b in outages)}


def live_workers_dropped(records: list[dict], kills: list[dict]) -> dict[str, int]:
    """Workers the PS dropped more often than they were killed, and how many times more (a
    live worker dropped)."""
    killed: dict[str, int] = {}
    for k in kills:
        killed[k["worker"]] = killed.get(k["worker"], 0) + 1
    dropped: dict[str, int] = {}
    for r in records:
        if r.get("event") == "dropped":
            w = str(r.get("worker"))
            dropped[w] = dropped.get(w, 0) + 1
    return {w: n - killed.get(w, 0) for w, n in dropped.items() if n > killed.get(w, 0)}


def ps_name(run_dir: Path) -> str:
    return tomllib.loads((run_dir / "scenario.toml").read_text())["training"].get("ps", "ps")


def _check(value, op: str, want) -> bool:
    if value is None:
        return False
    return {"==": value == want, ">=": value >= want, ">": value > want}[op]


def judge(case: Case, run_dir: Path, launched: dict) -> dict:
    """What the run did, and every expectation it missed."""
    import numpy as np
    if case.during and case.during.startswith("kill-runner"):
        return judge_runner_killed(launched)
    if case.psless is not None:
        return judge_psless(case.psless, run_dir, launched)
    fail: list[str] = []
    res: dict = {"runner_exit": launched["rc"], "wall_s": round(launched["wall"], 1)}
    if launched["rc"] != 0:
        fail.append(f"runner exit {launched['rc']}" if launched["rc"] is not None
                    else "runner did not finish in time")
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError) as e:
        res.update(ok=False, failures=fail + [f"no summary.json ({e})"])
        return res
    codes = summary.get("exit_codes", {})
    res["exit_codes"] = codes
    if summary.get("error"):
        lines = summary["error"].splitlines()
        # the child's own last word (its ERROR line) says more than the runner's first line
        res["error"] = next((ln.split(" ERROR ", 1)[1] for ln in reversed(lines)
                             if " ERROR " in ln), lines[0])[:300]
    faults = summary.get("faults", [])
    res["faults_injected"] = sum(1 for f in faults if "skipped" not in f)
    res["faults_skipped"] = [f for f in faults if "skipped" in f or "restart_skipped" in f]
    for key in ("workers_lost", "workers_rejoined", "workers_lost_at_end", "short_versions",
                "collects_redone", "ps_restarts", "ps_resumed_from", "reconnects", "probes",
                "retransmissions", "final_accuracy", "iteration_seconds"):
        res[key] = summary.get(key)
    ends = [summary.get("ps_end") or {}, *(summary.get("workers_end") or {}).values()]
    res["rejected"] = sum(int(e.get("rejected", 0) or 0) for e in ends)
    res["malformed"] = sum(int(e.get("malformed", 0) or 0) for e in ends)
    # objects assembled from two incarnations' segments (a restart mid-fetch): refetched
    res["mixed_objects"] = sum(int(e.get("mixed_objects", 0) or 0) for e in ends)
    ledger = version_ledger(jsonl_records(run_dir / "metrics" / "ps.jsonl"), summary.get("workers"))
    res["ledger"] = ledger
    # what the summary says against what the PS's records say (they differ when a PS
    # restart lost the killed PS's counters)
    for key, mine in (("workers_lost", "dropped"), ("workers_rejoined", "rejoined"),
                      ("short_versions", "short")):
        if summary.get(key) != ledger[mine]:
            fail.append(f"summary.json {key} = {summary.get(key)} but the PS's metrics show "
                        f"{ledger[mine]}")
    ref = reference(run_dir)
    total = ref["versions"] if not ref["max_versions"] else min(ref["versions"],
                                                                ref["max_versions"])
    res["reference_accuracy"] = ref["accuracy"]
    res["versions_expected"] = total
    if ledger["last"] != total:
        fail.append(f"last version {ledger['last']} of {total}")
    if ledger["missing"]:
        fail.append(f"versions never applied: {ledger['missing'][:10]}")
    if ledger["redone"] != ledger["redone_explained"] or ledger["applied_thrice"]:
        fail.append(f"{ledger['redone']} versions applied twice, {ledger['redone_explained']} "
                    f"explained by PS restarts")
    # each worker kill is one loss, each restart one rejoin; anything else is a live worker
    # dropped (or a killed one never noticed)
    kills = [f for f in faults if f.get("role") == "worker" and "skipped" not in f]
    unplanned = summary.get("unplanned_exits") or []
    res["unplanned_exits"] = [{k: u.get(k) for k in ("who", "role", "t", "how", "action")}
                              for u in unplanned]
    # a worker that died unasked is lost like one [faults] killed
    kills += [{"worker": u["node"], "t": u["t"]} for u in unplanned
              if u.get("role") == "worker" and u.get("code") not in (None, 0)]
    res["worker_kills"] = len(kills)
    restarted = sum(1 for f in kills if "restarted" in f)
    unnoticed = unnoticed_kills(kills, faults, run_dir)
    res["worker_kills_unnoticed"] = len(unnoticed)
    live_dropped = live_workers_dropped(jsonl_records(run_dir / "metrics" / "ps.jsonl"), kills)
    if live_dropped:
        fail.append(f"live workers dropped: {live_dropped}")
    if not (len(kills) - len(unnoticed) <= ledger["dropped"] <= len(kills)) or \
            ledger["rejoined"] != restarted - (len(kills) - ledger["dropped"]):
        fail.append(f"{ledger['dropped']} workers dropped / {ledger['rejoined']} rejoined for "
                    f"{len(kills)} killed / {restarted} restarted"
                    + (f" ({len(unnoticed)} killed with the PS)" if unnoticed else ""))
    if res["rejected"] or res["malformed"]:
        fail.append(f"rejected {res['rejected']}, malformed {res['malformed']}")
    model = run_dir / "model.npz"
    if model.exists():
        with np.load(model) as z:
            diffs = [float(np.max(np.abs(z[k] - v))) for k, v in ref["params"].items() if k in z]
        res["param_max_diff"] = max(diffs) if diffs else None
    else:
        res["param_max_diff"] = None
    acc = summary.get("final_accuracy")
    if case.exact and ledger["last"] == ref["versions"]:
        if res["param_max_diff"] is None or res["param_max_diff"] > PARAM_TOLERANCE:
            fail.append(f"parameters differ from the reference by {res['param_max_diff']}")
    elif acc is None or acc < ref["accuracy"] - ACCURACY_TOLERANCE:
        fail.append(f"accuracy {acc} < reference {ref['accuracy']:.4f} - {ACCURACY_TOLERANCE}")
    for key, (op, want) in case.expect.items():
        if key.startswith("exit:"):
            value = codes.get(key[5:])
        elif key.startswith("unplanned:"):
            value = next((u.get("code") for u in unplanned if u.get("node") == key[10:]), None)
        elif key == "reconnects:all":
            # the PS and every worker reconnected at least once, but for one killed while the
            # forwarder was down (its restart connected afresh to the new forwarder)
            rec = summary.get("reconnects") or {}
            down = killed_while_forwarder_down(faults)
            names = [n for n in [ps_name(run_dir), *(summary.get("workers_end") or {})]
                     if n not in down]
            value = min(rec.get(n, 0) for n in names)
        elif key == "faults_done":
            value = "all" if faults and not res["faults_skipped"] else "some skipped"
        else:
            value = summary.get(key)
        if not _check(value, op, want):
            fail.append(f"{key} = {value!r}, expected {op} {want!r}")
    res["ok"] = not fail
    res["failures"] = fail
    return res


def run_case(case: Case, quick: bool, base: Path) -> dict:
    sets = (case.quick_sets if quick else case.sets) + [f"run.timeout={RUN_TIMEOUT}"]
    out = base / case.name
    log(f"faults {case.name}: python -m ndnps.scenario {case.scenario} "
        + " ".join(f"--set '{s}'" for s in sets))
    launched = launch(case.scenario, sets, out, RUN_TIMEOUT + 120, case.during, case.recorder)
    res = judge(case, out, launched)
    res.update(fault=case.fault, scenario=case.scenario, sets=sets, exact=case.exact,
               command=f"python -m ndnps.scenario {case.scenario} --plain "
                       + " ".join(f"--set '{s}'" for s in sets))
    log(f"  -> {'ok' if res['ok'] else 'FAILED: ' + '; '.join(res['failures'])} "
        f"({res['wall_s']} s, accuracy {res.get('final_accuracy')} vs reference "
        f"{rnd(res.get('reference_accuracy'))})")
    return res


# ---- bad input ----------------------------------------------------------------------------------

def hypothesis_fuzz() -> dict:
    """tests/unit/test_fw_fuzz.py's property test, in-process, counting packets fed."""
    from hypothesis import settings
    settings.register_profile("bench-faults", database=None)
    settings.load_profile("bench-faults")
    from fuzz import harness
    count = {"packets": 0, "examples": 0}
    feed, init = harness.Harness.feed, harness.Harness.__init__

    def counting_feed(self, selector, wire):
        count["packets"] += 1
        return feed(self, selector, wire)

    def counting_init(self):
        count["examples"] += 1
        init(self)

    with mock.patch.object(harness.Harness, "feed", counting_feed), \
            mock.patch.object(harness.Harness, "__init__", counting_init):
        t0 = time.monotonic()
        error = None
        try:
            sys.path.insert(0, str(ROOT / "tests" / "unit"))
            import test_fw_fuzz
            test_fw_fuzz.test_no_exception_escapes_and_tables_stay_bounded()
        except BaseException as e:                   # noqa: BLE001 - reported as the finding
            error = f"{type(e).__name__}: {str(e)[:300]}"
    return {"examples": count["examples"], "packets": count["packets"], "error": error,
            "seconds": round(time.monotonic() - t0, 1), "ok": error is None}


def atheris_fuzz(runs: int, base: Path) -> dict:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return {"skipped": "atheris not installed (pip install atheris)", "ok": None}
    corpus = base / "atheris-corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, str(ROOT / "fuzz" / "fuzz_forwarder.py"), f"-runs={runs}",
            "-max_len=9000", str(corpus)]
    t0 = time.monotonic()
    try:
        p = subprocess.run(argv, capture_output=True, text=True, cwd=str(base),
                           env={**os.environ, **env()}, timeout=max(600, runs / 200))
        rc, text = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        rc, text = None, (e.stdout or b"").decode(errors="replace") + \
            (e.stderr or b"").decode(errors="replace")
    done = re.findall(r"Done (\d+) runs in (\d+) second", text)
    cov = re.findall(r"cov: (\d+) ft: (\d+) corp: (\d+)", text)
    crash = re.search(r"(Uncaught Python exception.*|==\d+== ERROR.*)", text)
    res: dict[str, Any] = {"runs_requested": runs, "runs": int(done[-1][0]) if done else None,
           "exit": rc, "seconds": round(time.monotonic() - t0, 1),
           "edges": int(cov[-1][0]) if cov else None,
           "corpus": int(cov[-1][2]) if cov else None,
           "crash": crash.group(1)[:300] if crash else None,
           "command": f"python fuzz/fuzz_forwarder.py -runs={runs} -max_len=9000 CORPUS_DIR"}
    res["ok"] = rc == 0 and res["runs"] == runs and not crash \
        and (res["edges"] or 0) >= ATHERIS_MIN_EDGES
    if not res["ok"]:
        res["tail"] = text[-1500:]
    return res


def bad_input_tests(base: Path) -> dict:
    xml = base / "bad-input.xml"
    argv = [sys.executable, "-m", "pytest", "tests", "-q", "-p", "no:cacheprovider",
            "-k", BAD_INPUT_K, f"--junitxml={xml}"]
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, cwd=str(ROOT),
                       env={**os.environ, **env()}, timeout=1800)
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    failed = []
    try:
        root = ET.parse(xml).getroot()
        for suite in root.iter("testsuite"):
            for k in counts:
                counts[k] += int(suite.get(k, 0))
        for tc in root.iter("testcase"):
            if tc.find("failure") is not None or tc.find("error") is not None:
                failed.append(f"{tc.get('classname')}::{tc.get('name')}")
    except (OSError, ET.ParseError):
        failed.append(f"no report; pytest exit {p.returncode}: {p.stdout[-500:]}")
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    return {**counts, "passed": passed, "failed": failed, "exit": p.returncode,
            "seconds": round(time.monotonic() - t0, 1), "k": BAD_INPUT_K,
            "ok": p.returncode == 0 and not failed}


# ---- main ---------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    p = bench_parser("python -m bench faults", __doc__,
                     "shorter trainings, the short chaos run, 20,000 atheris inputs")
    p.add_argument("--only", help="comma-separated case names (and/or hypothesis, atheris, "
                                   "tests); the others keep their last results")
    p.add_argument("--atheris-runs", type=int)
    p.add_argument("--table", action="store_true",
                   help="print the table of docs/faults.md and exit")
    args = p.parse_args(argv)

    def on_term(signum, frame):             # stop the scenario run under way (finally: below)
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    if args.table:
        print(markdown(load_results().get("faults", {})))
        return 0
    only = set(args.only.split(",")) if args.only else None
    known = {c.name for c in CASES} | {"hypothesis", "atheris", "tests"}
    if only and only - known:
        p.error(f"unknown: {', '.join(sorted(only - known))} (known: {', '.join(sorted(known))})")
    base = args.keep or Path(tempfile.mkdtemp(prefix="faults-"))
    base.mkdir(parents=True, exist_ok=True)
    if not only and not args.no_save:
        save("faults", None, {})                  # a whole run starts a fresh table

    def keep(part: str, key: str, value: dict) -> None:
        """Saved as soon as measured (a long run cut short keeps what it measured), merged
        into the "faults" section as it is on disk now."""
        if args.no_save:
            mine.setdefault(part, {})[key] = value
            return
        sec = load_results().get("faults", {})
        sec.setdefault(part, {})[key] = value
        order = [c.name for c in CASES]
        sec["cases"] = {k: sec.get("cases", {})[k] for k in order if k in sec.get("cases", {})}
        sec.update(quick=args.quick if not only else sec.get("quick", args.quick), **stamp())
        save("faults", None, sec)

    mine: dict = {}
    try:
        for case in CASES:
            if only is None or case.name in only:
                res = run_case(case, args.quick, base)
                res.update(quick=args.quick, **stamp())
                keep("cases", case.name, res)
        if only is None or "hypothesis" in only:
            log("faults: hypothesis fuzz (tests/unit/test_fw_fuzz.py)")
            h = hypothesis_fuzz()
            keep("bad_input", "hypothesis", h)
            log(f"  -> {h}")
        if only is None or "atheris" in only:
            runs = args.atheris_runs or (ATHERIS_QUICK_RUNS if args.quick else ATHERIS_RUNS)
            log(f"faults: atheris, {runs} inputs")
            a = atheris_fuzz(runs, base)
            keep("bad_input", "atheris", a)
            log(f"  -> { {k: v for k, v in a.items() if k != 'tail'} }")
        if only is None or "tests" in only:
            log("faults: bad-input tests (pytest -k ...)")
            t = bad_input_tests(base)
            keep("bad_input", "tests", t)
            log(f"  -> {t['passed']} of {t['tests']} passed")
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    fig = mine if args.no_save else load_results().get("faults", {})
    fig.setdefault("cases", {})
    bad = fig.get("bad_input", {})
    print(markdown(fig), file=sys.stderr)
    emit({"faults": {k: v["ok"] for k, v in fig["cases"].items()},
          "bad_input": {k: v.get("ok") for k, v in bad.items()},
          "failed": [k for k, v in fig["cases"].items() if not v["ok"]]
          + [k for k, v in bad.items() if v.get("ok") is False]})
    return 0


# ---- tables -------------------------------------------------------------------------------------

def _outcome(r: dict) -> str:
    codes = r.get("exit_codes", {})
    bad = {k: v for k, v in codes.items() if v not in (0, None)}
    text = f"runner exit {r['runner_exit']}"
    if bad:
        text += "; " + ", ".join(f"{k} {v}" for k, v in bad.items())
    if r.get("error"):
        text += f"; {r['error'][:120]}"
    for u in r.get("unplanned_exits") or []:
        text += f"; unplanned exit recorded: {u['who']} ({u['how']}, {u.get('action')})"
    return text


def _accuracy(r: dict) -> str:
    acc, ref = r.get("final_accuracy"), r.get("reference_accuracy")
    text = f"{_f(acc)} (ref. {_f(ref)})"
    d = r.get("param_max_diff")
    if r.get("exact") and d is not None:
        text += f"; params = ref. ±{d:.1e}" if d <= PARAM_TOLERANCE else f"; params ≠ ref. ({d:.1e})"
    return text


def _evidence(r: dict) -> str:
    led = r.get("ledger", {})
    parts = [(f"versions 1–{led.get('last')} of {r.get('versions_expected')} applied"
              + (f", {len(led['missing'])} missing" if led.get("missing") else ", none missing"))
             if led.get("last") else f"no version applied (of {r.get('versions_expected')})",
             f"{led.get('short', 0)} short", f"rejected {r.get('rejected')}",
             f"malformed {r.get('malformed')}"]
    rec = r.get("reconnects") or {}
    if rec:
        parts.append(f"reconnects {sum(rec.values())} ({len(rec)} apps)")
    if r.get("collects_redone"):
        parts.append(f"collects redone {r['collects_redone']}")
    if r.get("mixed_objects"):
        parts.append(f"mixed objects refetched {r['mixed_objects']}")
    if r.get("probes") or r.get("retransmissions"):
        parts.append(f"probes {r.get('probes') or 0}, retx {r.get('retransmissions') or 0}")
    return "; ".join(parts)


def _lost(r: dict) -> str:
    led = r.get("ledger", {})
    text = f"{led.get('dropped')} / {led.get('rejoined')} (killed {r.get('worker_kills')})"
    if (r.get("workers_lost"), r.get("workers_rejoined")) != (led.get("dropped"),
                                                               led.get("rejoined")):
        text += f"; summary.json says {r.get('workers_lost')} / {r.get('workers_rejoined')}"
    return text


def _f(x) -> str:
    return "-" if x is None else f"{x:.4f}"


ORDER = {c.name: i for i, c in enumerate(CASES)}
HEADER = ("fault injected", "outcome", "accuracy (reference)", "workers lost / rejoined",
          "versions redone", "nothing lost: evidence", "wall s", "verdict")


def table_rows(sec: dict) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    cases = sec.get("cases", {})           # results.json keeps its keys sorted: CASES order
    for name, r in sorted(cases.items(), key=lambda kv: ORDER.get(kv[0], len(ORDER))):
        if "children" in r or "skipped" in r:           # the runner killed outright
            gone = (f"{r.get('children')} children; {r.get('survivors')} alive 10 s after "
                    f"(all gone in {r.get('gone_after_s')} s)" if "children" in r
                    else r["skipped"])
            out.append((f"`{name}`: {r['fault']}", f"runner exit {r['runner_exit']}", "-",
                        "-", "-", gone, f"{r.get('wall_s')}",
                        "pass" if r["ok"] else "**FAIL**: " + "; ".join(r["failures"])))
            continue
        if r.get("psless"):
            out.append((f"`{name}`: {r['fault']}", _outcome(r), _f(r.get("final_accuracy")),
                        "-", "-", _psless_evidence(r), f"{r.get('wall_s')}",
                        "pass" if r["ok"] else "**FAIL**: " + "; ".join(r["failures"])))
            continue
        led = r.get("ledger", {})
        redone = f"{led.get('redone', 0)}"
        if r.get("ps_restarts"):
            redone += f" (resumed from {r.get('ps_resumed_from')})"
        verdict = "pass" if r["ok"] else "**FAIL**: " + "; ".join(r["failures"])
        short = " (--quick: " + ", ".join(x for x in r.get("sets", []) if "epochs" in x
                                            or "faults" in x) + ")" if r.get("quick") else ""
        out.append((f"`{name}`: {r['fault']}{short}", _outcome(r), _accuracy(r),
                    _lost(r), redone,
                    _evidence(r), f"{r.get('wall_s')}", verdict))
    bad = sec.get("bad_input", {})
    h = bad.get("hypothesis")
    if h:
        out.append(("hypothesis fuzz of the forwarder core (tests/unit/test_fw_fuzz.py)",
                    f"{h['examples']} examples, {h['packets']:,} packets",
                    "-", "-", "-", "no exception escaped, tables in bounds" if h["ok"]
                    else h["error"], f"{h['seconds']}", "pass" if h["ok"] else "**FAIL**"))
    a = bad.get("atheris")
    if a:
        if a.get("skipped"):
            out.append(("atheris (fuzz/fuzz_forwarder.py)", a["skipped"], "-", "-", "-", "-",
                        "-", "skipped"))
        else:
            runs = f"{a['runs']:,}" if a.get("runs") is not None else "?"
            out.append(("atheris, coverage-guided (fuzz/fuzz_forwarder.py)",
                        f"{runs} inputs, {a.get('edges')} edges, corpus {a.get('corpus')}",
                        "-", "-", "-", "no crash, bounds held" if a["ok"]
                        else f"crash: {a.get('crash')} (exit {a.get('exit')})" if a.get("crash")
                        or a.get("exit") else f"no crash, but only {a.get('edges')} edges "
                        f"(< {ATHERIS_MIN_EDGES}): the forwarder core was not instrumented",
                        f"{a['seconds']}", "pass" if a["ok"] else "**FAIL**"))
    t = bad.get("tests")
    if t:
        out.append(("bad-input tests (pytest -k …: malformed, forged, garbage, truncated, "
                    "oversize, flood, localhost, …)", f"{t['passed']} of {t['tests']} passed"
                    + (f", {t['skipped']} skipped" if t.get("skipped") else ""), "-", "-", "-",
                    "failed: " + ", ".join(t["failed"]) if t["failed"] else "all pass",
                    f"{t['seconds']}", "pass" if t["ok"] else "**FAIL**"))
    return out


def markdown(sec: dict) -> str:
    if not sec:
        return "(no faults results: run python -m bench faults)"
    rows = table_rows(sec)
    rev = sec.get("revision", {})
    lines = [f"Measured at commit {rev.get('commit', '?')}{' (apps modified)' if rev.get('apps_dirty') else ''}"
             f", {sec.get('when', '?')}{', --quick' if sec.get('quick') else ''}:", "",
             "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(lines)


def rows(sec: dict) -> list[tuple[str, str, str, str]]:
    """For `python -m bench --table`: (measure, figure, target, verdict)."""
    out = []
    for name, r in sorted(sec.get("cases", {}).items(), key=lambda kv: ORDER.get(kv[0], 99)):
        if "children" in r or "skipped" in r:
            out.append((f"{name}: {r['fault']}", f"{r.get('survivors')} of "
                        f"{r.get('children')} children alive 10 s after", "none",
                        "met" if r["ok"] else "FAILED: " + "; ".join(r["failures"])))
            continue
        if r.get("psless"):
            out.append((f"{name}: {r['fault']}", f"{_outcome(r)}; {_psless_evidence(r)}",
                        "the role's own policy; nothing left running",
                        "met" if r["ok"] else "FAILED: " + "; ".join(r["failures"])))
            continue
        target = ("params = reference" if r.get("exact") else
                  f"accuracy ≥ reference − {ACCURACY_TOLERANCE}") + "; nothing lost"
        out.append((f"{name}: {r['fault']}",
                    f"{_outcome(r)}; accuracy {_accuracy(r)}; {_evidence(r)}", target,
                    "met" if r["ok"] else "FAILED: " + "; ".join(r["failures"])))
    for row in table_rows({"bad_input": sec.get("bad_input", {})}):
        out.append((row[0], f"{row[1]}; {row[5]}", "no crash, every test passes",
                    "met" if row[-1] == "pass" else row[-1]))
    return out


if __name__ == "__main__":
    sys.exit(main())
