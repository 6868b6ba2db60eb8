"""python -m ndnps.scenario [NAME|FILE.toml|list] [--set KEY=VALUE ...] [--out DIR] [--netns]

Runs a whole experiment as separate processes — forwarders, the PS, the workers — shows live
progress, and leaves a run directory: summary.json, the scenario as run, every process's log
and metrics, per-face rate traces (TSV, ndnSIM L3RateTracer shape), plots and a Chrome-trace
timeline. With no NAME it runs the embedded `sync-sgd`. Every child is stopped on success,
error and Ctrl-C, and dies with the runner should the runner be killed outright.

Unplanned exits. A child that dies without being asked to (not by [faults]) is a fault of the
run: it goes into summary.json's `unplanned_exits` (who, when, how, its log tail) and the job's
own policy decides — a worker's loss is the PS's `on_worker_loss`; a PS-less peer's is its
job's `on_peer_loss` (the other peers stop or re-form), a pipeline stage's stops the pipeline
(its other stages say so), both exactly as for a [faults] kill; the share controller's loss
leaves rounds to the ordinary way; a forwarder is restarted on its socket after
`[run] restart_after` (as a service manager restarts NFD), and so is a PS that checkpoints (it
resumes), each at most `max_restarts` times. The run fails only when the job cannot go on (an
app exits 3 — the runner then exits 3 — or the PS dies with no checkpoint to resume from), with
the log tails. `[run] on_child_exit = "fail"` fails the run at the first unplanned exit
instead.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from . import spec
from .namespaces import check_netns
from .netns import NetnsUnavailable
from .runner import Runner
from .simulated import SimRunner, check_simulable
from .spec import ScenarioError
from .supervision import Interrupted, on_stop_signal


def list_scenarios() -> int:
    """`list`: every built-in scenario and its description."""
    names = spec.builtin_names()
    width = max(map(len, names), default=0)     # the longest name, not a fixed guess
    for name in names:
        try:
            sc = spec.load(name)
            desc = sc.description
        except ScenarioError as e:
            desc = f"(invalid: {e})"
        print(f"{name:<{width}}  {desc}")
    return 0


def _unusable_run_dir(run_dir: Path) -> str | None:
    """Why the run cannot leave its outputs in `run_dir` (None: it can; it exists then)."""
    if run_dir.exists() and not run_dir.is_dir():
        return "exists and is not a directory"
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        if any(run_dir.iterdir()):
            return "exists and is not empty"
        probe = run_dir / ".writable"
        probe.touch()
        probe.unlink()
    except OSError as e:
        return f"cannot write there ({e.strerror or e})"
    return None


def _refused_out(run_dir: Path) -> str | None:
    """Why --out would be refused, looked at without making it: said beside a bad scenario
    (every bad flag in one message), for which the runner makes no directory."""
    if run_dir.exists():
        return None if run_dir.is_dir() and not any(run_dir.iterdir()) else \
            "exists and is not an empty directory"
    parent = next(p for p in run_dir.absolute().parents if p.exists())
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot write there ({parent} is not a writable directory)"
    return None


EXIT_CODES = """exit codes:
  0    the run finished
  1    it failed: a child killed or in error, run.timeout, the peers' parameters differ
  2    a bad scenario, value or flag, refused before anything starts (one line naming it),
       or a child that refused its configuration
  3    the training cannot go on: an app exited 3 and ended the run (the reason is the
       first line after the progress)
  130  interrupted (Ctrl-C, SIGTERM): every process stopped"""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ndnps.scenario", description=__doc__,
                                epilog=EXIT_CODES,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenario", nargs="?", help="built-in name (see `list`), a .toml path, "
                                               "or `list`; default: the embedded sync-sgd")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override any field, e.g. --set training.epochs=3 --set links.loss=0.05")
    p.add_argument("--out", type=Path, help="run directory (default runs/<time>-<name>)")
    p.add_argument("--netns", action="store_true",
                   help="each host in its own network namespace (needs root)")
    p.add_argument("--plain", action="store_true", help="plain progress lines instead of a "
                                                        "live table")
    p.add_argument("--sim", action="store_true",
                   help="simulate it: every forwarder and app in this one process over a "
                        "simulated network, in virtual time (ndnps.sim; [run] mode = \"sim\")")
    args = p.parse_args(argv)
    if args.scenario == "list":
        return list_scenarios()
    try:
        sc = spec.load(args.scenario, args.set)
    except ScenarioError as e:
        why = args.out and _refused_out(args.out)
        print(f"scenario error: {e}" + (f"; --out {args.out}: {why}" if why else ""),
              file=sys.stderr)
        return 2
    if args.netns:
        sc.netns = True
    if args.sim:
        sc.mode = "sim"
    try:
        if sc.mode == "sim":
            check_simulable(sc)
        elif sc.netns:
            check_netns(sc)
        else:
            spec.check_local(sc)
    except (ScenarioError, NetnsUnavailable) as e:
        print(f"scenario error: {e}", file=sys.stderr)
        return 2
    run_dir = args.out or Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-{sc.name}"
    why = _unusable_run_dir(run_dir)
    if why:
        print(f"scenario error: --out {run_dir}: {why}", file=sys.stderr)
        return 2

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_stop_signal)
    simulated = " (simulated)" if sc.mode == "sim" else ""
    print(f"ndnps: running scenario {sc.name!r}{simulated} -> {run_dir}")
    runner = (SimRunner if sc.mode == "sim" else Runner)(sc, run_dir, live=not args.plain)
    try:
        code = runner.run()
    except (KeyboardInterrupt, Interrupted):       # before the run's own handling
        runner.shutdown()
        print("\ninterrupted: every process stopped", file=sys.stderr)
        return 130
    print(f"run directory: {run_dir}")
    return code
