"""The runner: one scenario's processes — forwarders, then the apps (or what a feature runs in
their stead) — started on the topology it plans, supervised (ndnps.lab.supervision) until the
training ends, stopped, and the run's report written. Each synchronisation method takes part
through its feature (ndnps.lab.features); the network namespaces of a --netns run are
ndnps.lab.namespaces'."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Callable

from . import reaper, report, spec, topology
from .bottleneck import bottleneck_note, bottleneck_summary
from .config import Scenario
from .exitcodes import EXIT_JOB_FAILED, RunFailed, failed_run_exit
from ndnps.forwarder.status import command

from .feature import Command, Helper
from .features import FEATURES, active
from .metrics import RUN_T0_ENV
from .namespaces import NamespaceSetup
from .netns import Netns, NetnsUnavailable
from .process import (READY_TIMEOUT, ManagedProcess, ProcessFailed, free_port, owner_tag,
                      unix_socket_accepts, wait_until)
from .profiling import fill_layer_seconds
from .progress import Progress
from .status import collect_status
from .supervision import Interrupted, Supervision
from .tomltext import to_toml
from .traces import link_bytes

MAX_SOCKET_PATH = 100        # bytes; the kernel's limit is 108 with the terminating NUL


class Runner(NamespaceSetup, Supervision):
    def __init__(self, sc: Scenario, run_dir: Path, live: bool = True) -> None:
        self.sc = sc
        # absolute: apps are pointed at unix://<path>, and python-ndn reads a relative
        # unix://runs/x/fwd.sock as host "runs", path "/x/fwd.sock"
        self.run_dir = run_dir.resolve()
        self.socket_dir = self.run_dir / "sockets"
        self.live = live
        self.procs: list[ManagedProcess] = []
        self.sockets: dict[str, str] = {}        # forwarder -> unix socket
        self.netns: Netns | None = None
        self.notes: list[str] = []
        self.face_labels: dict[tuple[str, int], str] = {}
        self.apps_seen: set[str] = set()         # apps seen on a forwarder's unix socket
        self.worker_launch: dict[str, tuple[list[str], dict[str, str]]] = {}
        self.ps_launch: dict[str, tuple[list[str], dict[str, str]]] = {}   # by PS name
        self.job_configs: dict[str, Path] = {}   # PS name -> its job's [training] file
        self.forwarder_procs: dict[str, ManagedProcess] = {}
        self.forwarder_argv: dict[str, list[str]] = {}
        self.faults: list[dict] = []             # what [faults] did, for summary.json
        # the bottleneck's tbf counters by direction ("a->b"), read at the end of the run
        self.link_stats: dict[str, dict] | None = None
        self.unplanned_exits: list[dict] = []    # children that died unasked
        self.t0 = time.monotonic()               # the run's time base (summary, faults)
        self.helpers: list[Helper] = []          # features' processes beside the apps
        self.helpers_seen_exit: set[str] = set()
        # every app's role by name ("ps", "worker", "peer", "stage"): an unplanned exit goes
        # to its own role's policy, and its record says which it was
        self.roles: dict[str, str] = {}
        self.reaper: subprocess.Popen | None = None     # ndnps.lab.reaper, once needed
        self.features = active(sc)
        self.port: Callable[[], int] = free_port     # a local forwarder's UDP port

    # ---- set-up ----------------------------------------------------------------------------------

    def prepare(self) -> Path:
        """The run directory, the scenario as run (its path returned), and each job's
        [training] file (`job_configs`: the scenario's own file when it has one job)."""
        for sub in ("logs", "metrics", "traces", "plots", "config", "sockets"):
            (self.run_dir / sub).mkdir(parents=True, exist_ok=True)
        t = self.sc.training
        if any(k.role == "ps" for k in self.sc.kills) and not t.checkpointing.checkpoint:
            # [faults] kills the PS: it resumes from a checkpoint in the run directory
            self.sc.replace_job(t, t.with_values(
                checkpoint=str(self.run_dir.resolve() / "ps-checkpoint.npz")))
        for feature in self.features:           # a placement, a pipeline's plan
            self.notes += feature.prepare(self.sc, self.run_dir)
        if self.sc.topology == "bottleneck":
            self.notes.append(bottleneck_note(self.sc))
        for job in list(self.sc.all_jobs):      # emulated devices timed by a profile
            self.sc.replace_job(job, fill_layer_seconds(job))
        doc = dict(self.sc.raw)
        doc["training"] = self.sc.training.as_table()         # resolved: every field as run
        for feature in self.features:
            feature.document(self.sc, doc)
        doc["links"] = {**doc.get("links", {}), "reliability": self.sc.links.reliability}
        doc.setdefault("topology", {})["workers"] = self.sc.workers
        if self.sc.topology == "bottleneck":
            doc["bottleneck"] = asdict(self.sc.bottleneck)
            doc["run"] = {**doc.get("run", {}), "system": self.sc.system}
        path = self.run_dir / "scenario.toml"
        path.write_text(f"# scenario {self.sc.name!r} as run\n" + to_toml(doc))
        for job in self.sc.all_jobs:
            if self.sc.jobs:
                ps = job.who.ps
                self.job_configs[ps] = self.run_dir / "config" / f"{ps}.training.toml"
                self.job_configs[ps].write_text(
                    f"# job {ps!r} of scenario {self.sc.name!r}\n"
                    + to_toml({"training": job.as_table()}))
            else:
                self.job_configs[job.who.ps] = path
        return path

    def plan(self) -> topology.Plan:
        """The topology planned (and in namespaces, made), with every feature's routes (a
        bottleneck always runs in namespaces: the spec sets netns)."""
        if self.sc.netns:
            plan = self.plan_hosts()
        else:
            spec.check_local(self.sc)
            plan = topology.plan_local(self.sc, port=self.port)
            topology.apply_link_overrides(plan, self.sc)
        for feature in self.features:
            feature.routes(self.sc, plan)
        return plan

    def aggregators(self) -> list[str]:
        """The forwarders that aggregate, as the first feature with a say has them."""
        for feature in self.features:
            chosen = feature.aggregators(self.sc)
            if chosen is not None:
                return chosen
        return []

    def configure_aggregator(self, name: str) -> None:
        """`aggregators/add` at forwarder `name` for the training (its key, the slots)."""
        try:
            for feature in self.features:
                if feature.configure(self.sc, name, self.commander(name)):
                    return
        except (OSError, TimeoutError, ValueError) as e:
            raise RunFailed(f"cannot configure the aggregator at {name}: {e}") from None

    def commander(self, name: str) -> Command:
        """How a management command reaches forwarder `name`: over its unix socket."""
        return partial(command, f"unix://{self.sockets[name]}")

    def wait_ready(self, proc: ManagedProcess, text: str) -> None:
        """Until `text` is in `proc`'s last log lines (READY_TIMEOUT)."""
        wait_until(lambda: text in proc.tail(5), READY_TIMEOUT, proc, "ready")

    def wrap(self, node: topology.ForwarderNode | None) -> list[str]:
        """What runs a command on `node`'s host (nothing locally)."""
        if self.netns is None or node is None or node.host is None:
            return []
        return self.netns.exec_argv(node.host, [])

    def start_forwarders(self, plan: topology.Plan) -> None:
        tables = self.sc.forwarder
        longest = max(len(f"{name}.sock") for name in plan.forwarders)
        if len(str(self.socket_dir)) + 1 + longest > MAX_SOCKET_PATH:
            # a unix socket path has 108 bytes: a run directory that deep gets short ones
            # (removed at shutdown; or by its reaper, should this one be killed outright)
            reaper.remove_stale_socket_dirs()
            self.reap_if_killed()
            self.socket_dir = Path(tempfile.mkdtemp(
                prefix=f"{reaper.SOCKET_DIR_PREFIX}{owner_tag()}-"))
        for name, node in plan.forwarders.items():
            conf = self.run_dir / "config" / f"{name}.toml"
            conf.write_text(node.config(self.run_dir, tables, self.sc.trace_interval,
                                        topology.forwarder_strategy(self.sc)))
            sock = str(self.socket_dir / f"{name}.sock")
            host = "0.0.0.0" if self.netns else "127.0.0.1"
            argv = self.wrap(node) + [sys.executable, "-m", "ndnps.forwarder", "--unix", sock,
                                      "--tcp", "0", "--udp", str(node.udp), "--host", host,
                                      "--config", str(conf)]
            proc = self.spawn(f"fwd-{name}", argv)
            wait_until(lambda s=sock: unix_socket_accepts(s), READY_TIMEOUT, proc, "listening")
            self.sockets[name] = sock
            self.forwarder_procs[name] = proc
            self.forwarder_argv[name] = argv

    def spawn(self, name: str, argv: list[str],
              env: dict[str, str] | None = None) -> ManagedProcess:
        """A child process, logged under logs/<name>.log."""
        # one time base per run: every child's metrics count from the run's start, so a
        # restarted process continues the series of the one it replaces
        env = {**(env or {}), RUN_T0_ENV: repr(self.t0)}
        proc = ManagedProcess(name, argv, self.run_dir / "logs" / f"{name}.log", env=env)
        self.procs.append(proc)
        return proc

    def link_flags(self) -> list[str]:
        """Apps ask for link reliability where their faces are the links: locally, unless
        `app_faces = false`. Elsewhere (those, and netns mode, where an app's face is its host
        forwarder's unix socket) the forwarders' links have it, and the apps wait for it."""
        links = self.sc.links
        if not links.reliability:
            return []
        return ["--lp-reliability"] if links.app_faces and self.netns is None \
            else ["--link-repair"]

    def _start_flags(self, app: str) -> list[str]:
        """[[jobs]] start: a job's PS or peers wait so long (its workers wait for its PS)."""
        start = self.sc.job_start.get(self.sc.job_of(app).who.ps)
        return ["--start-after", repr(start)] if start else []

    def _program(self, app: topology.AppNode) -> tuple[str, list[str]]:
        """A PS-less app's role and program, as its feature runs it: every feature is asked,
        as the app's own job decides (a [[jobs]] run's first training may be a PS's)."""
        for feature in FEATURES:
            launch = feature.program(self.sc, self.run_dir, app)
            if launch is not None:
                return launch
        raise RunFailed(f"no feature runs {app.name} (role {app.role!r})")

    def start_apps(self, plan: topology.Plan) -> tuple[dict[str, ManagedProcess], dict]:
        """Every job's workers, then (once they are ready) its PS: (PSs, workers) by name."""
        workers = {}
        ps_nodes = []
        peers = {}                      # PS-less jobs' peers (or stages): supervised as PSs are
        for app in plan.apps:
            node = plan.forwarders[app.forwarder]
            env = {"NDN_CLIENT_TRANSPORT": f"unix://{self.sockets[app.forwarder]}"}
            metrics = self.run_dir / "metrics" / f"{app.name}.jsonl"
            config = self.job_configs[self.sc.job_of(app.name).who.ps]
            self.roles[app.name] = app.role
            if app.role == "ps":
                ps_nodes.append((app, node, env, metrics, config))
                continue
            if app.role != "worker":
                self.roles[app.name], program = self._program(app)
                argv = self.wrap(node) + [sys.executable, "-m", *program, "--name",
                                          app.name, "--config", str(config), "--metrics",
                                          str(metrics), *self.link_flags(),
                                          *self._start_flags(app.name)]
                peers[app.name] = self.spawn(app.name, argv, env)
                self.worker_launch[app.name] = (argv, env)
                continue
            argv = self.wrap(node) + [sys.executable, "-m", "ndnps.apps.worker", "--name", app.name,
                                      "--config", str(config), "--metrics", str(metrics)]
            if app.name in self.sc.slowdown:
                argv += ["--slowdown", str(self.sc.slowdown[app.name])]
            argv += self.link_flags()
            workers[app.name] = self.spawn(app.name, argv, env)
            self.worker_launch[app.name] = (argv, env)
        for name, proc in workers.items():
            self.wait_ready(proc, f"worker {name} ready")
        pss = dict(peers)
        for app, node, env, metrics, config in ps_nodes:
            model = "model.npz" if not self.sc.jobs else f"model-{app.name}.npz"
            argv = self.wrap(node) + [sys.executable, "-m", "ndnps.apps.ps", "--config",
                                      str(config), "--metrics", str(metrics),
                                      "--save", str(self.run_dir / model), *self.link_flags(),
                                      *self._start_flags(app.name)]
            self.ps_launch[app.name] = (argv, env)
            pss[app.name] = self.spawn(app.name, argv, env)
        return pss, workers

    def start(self, plan: topology.Plan) -> tuple[dict[str, ManagedProcess], dict]:
        """Whatever trains: ndnps (forwarders, the aggregators configured, the features'
        helpers, then the apps) or what a feature runs instead; every job's PS and workers,
        by name."""
        for feature in self.features:
            started = feature.launch(self, plan)
            if started is not None:
                return started
        self.start_forwarders(plan)
        for name in self.aggregators():
            self.configure_aggregator(name)
        for feature in self.features:
            self.helpers += feature.helpers(self)
        return self.start_apps(plan)

    # ---- the run ---------------------------------------------------------------------------------

    def run(self) -> int:
        self.prepare()
        display = Progress(self.sc, self.run_dir, self.live)
        try:
            plan = self.plan()
            pss, workers = self.start(plan)
            display.start()
            self.supervise(pss, workers, display)
            self.notes += collect_status(plan, self.sockets, self.face_labels, self.run_dir)
            self.read_link_stats()
        except (ProcessFailed, RunFailed, NetnsUnavailable) as e:
            display.stop()
            code = failed_run_exit(e)
            how = "stopped: the training cannot go on" if code == EXIT_JOB_FAILED else "failed"
            print(f"\nrun {how}: {e}{self.unplanned_text()}", file=sys.stderr)
            self._write_summary(ok=False, error=str(e))
            return code
        except Interrupted:
            display.stop()
            print("\ninterrupted: stopping every process", file=sys.stderr)
            self._write_summary(ok=False, error="interrupted")
            return 130
        finally:
            self.shutdown()
        display.stop()
        return self.finish(display)

    def finish(self, display: Progress) -> int:
        """A finished run's summary (peers whose parameters differ fail it), plots, timeline
        and final table; the exit code."""
        summary = self._write_summary(ok=True)
        if summary.get("parameters_identical") is False:
            print(f"\nrun failed: the peers' parameters differ at versions "
                  f"{summary.get('digest_mismatches')}", file=sys.stderr)
            self._write_summary(ok=False, error="the peers' parameters differ")
            return 1
        report.plot_all(self.run_dir, self.sc)
        report.timeline(self.run_dir, self.sc)
        display.final(summary)
        return 0

    def reap_if_killed(self) -> None:
        """Before making what would outlive a runner killed outright: its reaper (once)."""
        if self.reaper is None:
            self.reaper = reaper.start(owner_tag())

    def shutdown(self) -> None:
        # apps first, then forwarders (which flush their traces on SIGTERM)
        for proc in sorted(self.procs, key=lambda p: p.name.startswith("fwd-")):
            proc.stop()
        if self.netns is not None:
            self.netns.close()
        if self.socket_dir.parent != self.run_dir:
            shutil.rmtree(self.socket_dir, ignore_errors=True)

    def _write_summary(self, ok: bool, error: str | None = None) -> dict:
        self.read_link_stats()               # a failed run's too: its drops may say why
        extra = {"ok": ok, "notes": self.notes, "faults": self.faults,
                 "unplanned_exits": self.unplanned_exits,
                 "exit_codes": {p.name: p.poll() for p in self.procs}}
        if error:
            extra["error"] = error
        try:
            summary = report.summarize(self.run_dir, self.sc, self.elapsed(), extra)
        except (OSError, ValueError, KeyError) as e:
            summary = {"scenario": self.sc.name, "summary_error": str(e), **extra}
        try:
            summary["link_bytes"] = link_bytes(self.run_dir)
        except (OSError, ValueError, KeyError):
            pass
        if self.sc.topology == "bottleneck":
            summary["bottleneck"] = bottleneck_summary(
                self.sc, self.link_stats, summary.get("model_bytes"),
                summary.get("iteration_seconds"))
        summary.update(self.summary_extra())
        (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
        return summary

    def summary_extra(self) -> dict:
        """What this runner adds to summary.json (a simulated run: `simulated`)."""
        return {}
