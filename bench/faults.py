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

Here: the command line and the table. The cases: fault_cases.py; a case run and judged:
fault_runs.py; the bad-input side: bad_input.py.
"""
from __future__ import annotations

import shutil
import signal
import sys
import tempfile
from pathlib import Path

from bench.bad_input import (ATHERIS_MIN_EDGES, ATHERIS_QUICK_RUNS, ATHERIS_RUNS, atheris_fuzz,
                             bad_input_tests, hypothesis_fuzz)
from bench.common import bench_parser, emit, load_results, log, save, stamp
from bench.fault_cases import ACCURACY_TOLERANCE, CASES, PARAM_TOLERANCE
from bench.fault_runs import run_case


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

if __name__ == "__main__":
    sys.exit(main())
