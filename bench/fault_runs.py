"""One fault case run through the scenario runner exactly as a user runs it (`launch`, with
what is done by hand while it goes on: `by_hand`), and judged against the single-process
reference of the same training (`judge`: the PS's version ledger, the fault counters, the
parameters or the accuracy). The cases: fault_cases.py; the benchmark: faults.py.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

from bench.common import ROOT, env, jsonl_records, log, rnd
from bench.fault_cases import ACCURACY_TOLERANCE, PARAM_TOLERANCE, RUN_TIMEOUT, Case
from ndnps.lab.series import fault_counts


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
    mark = (b"-m\0apps.controller\0" if what == "kill-controller"
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
