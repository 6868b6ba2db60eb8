"""Supervision of a run's children: the loop that watches them until every job's PS (or
peers) finished, and what an exit nobody asked for does.

Unplanned exits. A child that dies without being asked to (not by [faults]) is a fault of the
run: it goes into summary.json's `unplanned_exits` (who, when, how, its log tail) and the job's
own policy decides — a worker's loss is the PS's `on_worker_loss`; a PS-less peer's is its
job's `on_peer_loss` (the other peers stop or re-form), a pipeline stage's stops the pipeline
(its other stages say so), both exactly as for a [faults] kill; a feature's helper (the share
controller) is noted and the run goes on; a forwarder is restarted on its socket after
`[run] restart_after` (as a service manager restarts NFD), and so is a PS that checkpoints (it
resumes), each at most `max_restarts` times. The run fails only when the job cannot go on (an
app exits 3 — the runner then exits 3 — or the PS dies with no checkpoint to resume from), with
the log tails. `[run] on_child_exit = "fail"` fails the run at the first unplanned exit
instead.
"""
from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, cast

from .exitcodes import EXIT_JOB_FAILED, EXIT_USAGE, JobStopped, RunFailed, describe
from .faults import Faults, FaultTarget
from .features import FEATURES
from .process import ManagedProcess, ProcessFailed
from .progress import Progress
from .status import learn_face_labels

if TYPE_CHECKING:
    from .config import Scenario
    from .feature import Helper

FAULT_POLL = 0.02            # s: the PS's version is read this often while a fault waits for it


class Interrupted(Exception):
    """SIGINT or SIGTERM reached the runner: it stops every process."""


# the stop signals received (SIGINT, SIGTERM): the handler raises Interrupted where the runner
# is, and records the signal, which the supervision loop looks at every turn: a raise that
# lands in a finaliser or a callback is printed and dropped by Python, a record is not
_SIGNALLED: list[int] = []


def on_stop_signal(signum: int, frame: object) -> None:
    """The runner's SIGINT and SIGTERM handler."""
    _SIGNALLED.append(signum)
    raise Interrupted()


class Supervision:
    """The Runner's watch over its children (a mixin: the runner's processes are its state)."""
    sc: "Scenario"
    t0: float
    roles: dict[str, str]
    faults: list[dict]
    unplanned_exits: list[dict]
    forwarder_procs: dict[str, ManagedProcess]
    helpers: list["Helper"]
    helpers_seen_exit: set[str]
    sockets: dict[str, str]
    face_labels: dict[tuple[str, int], str]
    apps_seen: set[str]

    def elapsed(self) -> float:
        """Seconds since the run's start."""
        return time.monotonic() - self.t0

    def supervise(self, pss: dict[str, ManagedProcess], workers: dict[str, ManagedProcess],
                  display: Progress) -> None:
        deadline = self.t0 + self.sc.timeout
        next_look = 0.0
        faults = Faults(cast(FaultTarget, self), workers, display, self.t0, pss)
        while True:
            if _SIGNALLED:
                raise Interrupted()
            display.update()
            faults.step()
            if time.monotonic() > next_look:            # learn which face is which app
                learn_face_labels(self.sockets, self.face_labels, self.apps_seen)
                # often until every app is known: a short run may be over within 2 s
                apps = {*pss, *workers}
                next_look = time.monotonic() + (2.0 if apps <= self.apps_seen else 0.25)
            if self.check_exits(faults):
                break
            if time.monotonic() > deadline:
                tails = "".join(f"\n{name} log tail:\n" + (ps.tail() if ps is not None
                                                            else "(PS killed)")
                                for name, ps in faults.pss.items()
                                if ps is None or ps.poll() is None)
                raise RunFailed(f"not finished within run.timeout = {self.sc.timeout:.0f} s;"
                                f"{tails}")
            # a fault waiting for its version is looked at often: a fast training runs tens of
            # versions in 0.25 s, and kills meant for different versions landed together
            time.sleep(FAULT_POLL if faults.pending or faults.restarts else 0.25)
        for name, proc in faults.workers.items():
            if proc in faults.restarted and not faults.rejoined(name):
                # restarted too late: the run ended before the PS re-offered it the task
                try:
                    proc.wait(5)
                except ProcessFailed:
                    proc.stop()
                    faults.note(name, "restarted but the run ended before it rejoined")
                    continue
            try:
                code: int | None = proc.wait(30)
            except ProcessFailed:
                proc.stop()
                code = proc.poll()
            if code != 0:
                # the training is over: recorded (the PS's metrics say whether it lost this
                # worker), not a reason to fail a finished run, unless on_child_exit = fail
                self.unplanned(proc, "worker", name, "none: the training had ended")
        faults.finish()
        display.update()

    def check_exits(self, faults: Faults) -> bool:
        """Children that exited unasked, each handled by the job's policy (see the module's
        docstring); True once every job's PS has finished."""
        for name, proc in list(self.forwarder_procs.items()):
            if proc.poll() is not None:
                faults.forget("forwarder", name)
                rec = self.unplanned(proc, "forwarder", name)
                faults.restart_unplanned("forwarder", name, rec)
        for helper in self.helpers:                     # a feature's process: noted once
            if helper.proc.poll() is not None and helper.node not in self.helpers_seen_exit:
                self.helpers_seen_exit.add(helper.node)
                self.unplanned(helper.proc, helper.role, helper.node, helper.on_exit)
        for name, proc in list(faults.workers.items()):
            if proc.poll() not in (None, 0):
                faults.forget("worker", name)
                self.unplanned(proc, "worker", name,
                               f"none: on_worker_loss = {self.sc.training.tasks.on_worker_loss!r} "
                               "decides")
        done = True
        for name, ps in list(faults.pss.items()):      # None: killed, restarting
            code = ps.poll() if ps is not None else None
            role = self.roles.get(name, "ps")
            if ps is None or code is None:
                done = False
            elif code == EXIT_JOB_FAILED:               # the training says it cannot go on
                raise JobStopped(str(ps.fail(f"exited with {describe(code)}"
                                             f"{self._peers_gone()}")))
            elif code == EXIT_USAGE:
                raise ps.fail(f"exited with {describe(code)}")
            elif code != 0 and role in ("peer", "stage"):
                # PS-less: the job's other nodes find it silent and follow its policy, as
                # for a [faults] kill; the run ends when they have
                faults.forget("worker", name)
                self.unplanned(ps, role, name, self._loss_policy(name, role))
            elif code != 0 and not self.sc.job_of(name).checkpointing.checkpoint:
                self.unplanned(ps, "ps", name, "run failed: no checkpoint to resume from "
                               "(training.checkpoint)")
                raise ps.fail(f"exited with {describe(code)}")
            elif code != 0:
                faults.forget("ps", name)
                rec = self.unplanned(ps, "ps", name)
                faults.restart_unplanned("ps", name, rec)
                done = False
        return done

    def _loss_policy(self, name: str, role: str) -> str:
        """What a PS-less job does without `name` (a peer or a pipeline's stage), as its
        feature says."""
        job = self.sc.job_of(name)
        for feature in FEATURES:                # each decides by the app's own job
            policy = feature.loss_policy(job, name, role)
            if policy is not None:
                return policy
        return "none"

    def _peers_gone(self) -> str:
        """A PS-less job's peers killed or dead before (a ring's stall travels along it: the
        peer that says so first may name its neighbour, not the one lost)."""
        kind = "stages" if "stage" in self.roles.values() else "peers"
        if not {"peer", "stage"} & set(self.roles.values()):
            return ""
        gone = [f"{r['worker']} (killed by [faults] at version {r['version']})"
                for r in self.faults if r.get("role") == "worker" and "skipped" not in r]
        gone += [f"{r['node']} ({r['how']}, unplanned)" for r in self.unplanned_exits
                 if r.get("role") in ("worker", "peer", "stage")]
        return f"; {kind} gone before: {', '.join(gone)}" if gone else ""

    def unplanned(self, proc: ManagedProcess, role: str, node: str,
                  action: str | None = None) -> dict:
        """Record a child that died unasked; with on_child_exit = fail, fail the run."""
        code = proc.poll()
        rec = {"who": proc.name, "role": role, "node": node,
               "t": round(self.elapsed(), 3), "code": code, "how": describe(code),
               "log": str(proc.log_path), "log_tail": proc.tail(20)}
        if action is not None:
            rec["action"] = action
        self.unplanned_exits.append(rec)
        if self.sc.on_child_exit == "fail":
            rec["action"] = "run failed (run.on_child_exit = \"fail\")"
            raise proc.fail(f"exited with {describe(code)}")
        print(f"note: {proc.name} exited unplanned ({describe(code)}) at {rec['t']:.1f} s: "
              f"{rec.get('action', '')}", file=sys.stderr, flush=True)
        return rec

    def unplanned_text(self) -> str:
        """The unplanned exits before a failure, with their log tails (the failure may be
        their consequence)."""
        return "".join(f"\nunplanned exit before it: {r['who']} ({r['how']}) at {r['t']:.1f} s; "
                       f"last lines of {r['log']}:\n{r['log_tail']}"
                       for r in self.unplanned_exits)
