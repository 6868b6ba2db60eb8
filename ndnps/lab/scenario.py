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
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from forwarder.status import fetch_status

from . import baseline, ina, minindn, pipeline, reaper, report, share, spec, topology
from .exitcodes import EXIT_ERROR, EXIT_JOB_FAILED, EXIT_USAGE, describe
from .netns import Netns, NetnsUnavailable, check_available, remove_stale
from .metrics import RUN_T0_ENV, read_metrics
from .process import (ManagedProcess, ProcessFailed, owner_tag, unix_socket_accepts,
                      wait_until)
from .spec import Scenario, ScenarioError

if TYPE_CHECKING:
    from rich.live import Live

READY_TIMEOUT = 30.0
FAULT_POLL = 0.02            # s: the PS's version is read this often while a fault waits for it


class RunFailed(RuntimeError):
    exit_code: int | None = None        # a child's own code, when its exit failed the run


class JobStopped(RunFailed):
    """A job said its training cannot go on (an app exited 3): the runner exits 3 too."""
    exit_code = EXIT_JOB_FAILED


def bottleneck_note(sc: Scenario) -> str:
    """What a bottleneck run measures: its accuracy, after a training cut short so that a run
    takes minutes, reads as a broken one otherwise."""
    t = sc.training
    versions = f"{t.max_versions} versions" if t.max_versions else f"{t.epochs} epochs"
    what = "each job's share of the wire and iteration time, summary.json `sharing`" \
        if sc.jobs else "iteration time against the wire's limit, summary.json `bottleneck`"
    return (f"{sc.name} measures the link ({what}), not the model: {versions} of training on "
            f"{t.dataset} data end far from converged, so the accuracy is no verdict on the run")


def failed_run_exit(e: Exception) -> int:
    """The runner's exit code for a failed run: the code of the child whose own exit ended it
    when that says why (3: the training cannot go on, 2: bad configuration), else 1 (a child
    killed or in error, a timeout, the runner's own failure)."""
    code = getattr(e, "exit_code", None)
    return code if code in (EXIT_USAGE, EXIT_JOB_FAILED) else EXIT_ERROR


class Interrupted(Exception):
    pass


# the stop signals received (SIGINT, SIGTERM): the handler raises Interrupted where the runner
# is, and records the signal, which the supervision loop looks at every turn: a raise that
# lands in a finaliser or a callback is printed and dropped by Python, a record is not
_SIGNALLED: list[int] = []


def _on_stop_signal(signum: int, frame: object) -> None:
    _SIGNALLED.append(signum)
    raise Interrupted()


def _to_toml(doc: dict) -> str:
    """TOML for the scenario documents we write: top-level scalars, then one [table] per
    dict, whose own dicts are written inline ({ w4 = 3.0 })."""
    def value(v) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{json.dumps(k)} = {value(x)}" for k, x in v.items()) + " }"
        raise TypeError(f"cannot write {v!r} as TOML")

    def tables(v) -> bool:
        return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)

    out = "".join(f"{k} = {value(v)}\n" for k, v in doc.items()
                  if not isinstance(v, dict) and not tables(v))
    for k, v in doc.items():
        if isinstance(v, dict):
            out += f"\n[{k}]\n" + "".join(f"{kk} = {value(vv)}\n" for kk, vv in v.items())
        elif tables(v):                  # [[k]]: an array of tables ([[jobs]], [[link]])
            for entry in v:
                out += f"\n[[{k}]]\n" + "".join(f"{kk} = {value(vv)}\n"
                                                 for kk, vv in entry.items())
    return out


MAX_SOCKET_PATH = 100        # bytes; the kernel's limit is 108 with the terminating NUL


class Runner:
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
        self.ina_plan: ina.InaPlan | None = None
        self.controller: ManagedProcess | None = None     # [share]'s
        self.controller_seen_exit = False
        # every app's role by name ("ps", "worker", "peer", "stage"): an unplanned exit goes
        # to its own role's policy, and its record says which it was
        self.roles: dict[str, str] = {}
        self.reaper: subprocess.Popen | None = None     # ndnps.lab.reaper, once needed

    # ---- set-up ----------------------------------------------------------------------------------

    def prepare(self) -> Path:
        """The run directory, the scenario as run (its path returned), and each job's
        [training] file (`job_configs`: the scenario's own file when it has one job)."""
        for sub in ("logs", "metrics", "traces", "plots", "config", "sockets"):
            (self.run_dir / sub).mkdir(parents=True, exist_ok=True)
        if any(k.role == "ps" for k in self.sc.kills) and not self.sc.training.checkpoint:
            # [faults] kills the PS: it resumes from a checkpoint in the run directory
            self.sc.training.checkpoint = str(self.run_dir.resolve() / "ps-checkpoint.npz")
        if self.sc.ina is not None:
            # where the aggregators go, and the plan the PS sends them (ndnps.lab.ina)
            self.ina_plan = ina.place(self.sc, self.sc.ina)
            self.sc.training.aggregate_at = self.ina_plan.root
            self.sc.training.aggregate_via = self.ina_plan.aggregate_via()
            self.sc.training.validate()
            self.notes += self.ina_plan.notes()
        if self.sc.topology == "bottleneck":
            self.notes.append(bottleneck_note(self.sc))
        if self.sc.pipeline is not None:
            # the planner on this machine: the stages and their layers, before anything runs
            pipeline.write_plan(self.run_dir,
                                pipeline.make_plan(self.sc.pipeline, self.sc.training))
        for job in self.sc.all_jobs:            # emulated devices timed by a profile
            pipeline.fill_layer_seconds(job)
        doc = dict(self.sc.raw)
        doc["training"] = self.sc.training.as_dict()          # resolved: every field as run
        if self.sc.jobs:
            doc.pop("training")
            doc["jobs"] = [{**job.as_dict(), **({"start": self.sc.job_start[job.ps]}
                                                 if job.ps in self.sc.job_start else {})}
                           for job in self.sc.jobs]
        doc["links"] = {**doc.get("links", {}), "reliability": self.sc.links.reliability}
        doc.setdefault("topology", {})["workers"] = self.sc.workers
        if self.sc.topology == "bottleneck":
            doc["bottleneck"] = asdict(self.sc.bottleneck)
            doc["run"] = {**doc.get("run", {}), "system": self.sc.system}
        path = self.run_dir / "scenario.toml"
        path.write_text(f"# scenario {self.sc.name!r} as run\n" + _to_toml(doc))
        for job in self.sc.all_jobs:
            if self.sc.jobs:
                self.job_configs[job.ps] = self.run_dir / "config" / f"{job.ps}.training.toml"
                self.job_configs[job.ps].write_text(
                    f"# job {job.ps!r} of scenario {self.sc.name!r}\n"
                    + _to_toml({"training": job.as_dict()}))
            else:
                self.job_configs[job.ps] = path
        return path

    def plan(self) -> topology.Plan:
        if not self.sc.netns:
            spec.check_local(self.sc)
            plan = topology.plan_local(self.sc)
            topology.apply_link_overrides(plan, self.sc)
            self._route_aggregators(plan)
            if self.sc.share is not None:
                share.routes(self.sc.share, self.sc, plan.forwarders)
            return plan
        check_netns(self.sc)
        plan = topology.plan_hosts(self.sc)
        for ns in remove_stale():
            self.notes.append(f"removed network namespace {ns}, left by a run that was killed")
        self._reap_if_killed()
        self.netns = Netns.owned()
        for name in plan.forwarders:
            self.netns.add_host(name)
        bottleneck = self.sc.topology == "bottleneck"
        for a, b in plan.host_links:            # every veth at links.mtu
            self.netns.link(a, b, self.sc.links.mtu)
        if self.sc.topology == "minindn":      # each link its own conditions: the file's
            self.notes += minindn.join(plan, self.sc, self.netns)
            return plan
        link = self.sc.links.as_table()
        kernel = False
        if bottleneck:
            self._limit_bottleneck()
            if link:
                self.notes.append("[links] conditions emulated in the forwarders' faces on the "
                                  "bottleneck's veth, on top of its tbf")
        else:
            kernel = self._netem()
            if not kernel and self._limit_links():
                link.pop("rate_mbps")           # the kernel limits it: not the faces too
            if link and not kernel and self.sc.netem:
                self.notes.append("kernel netem unavailable: link conditions emulated in the "
                                  "forwarders' faces")
        addrs = [(veth.addr_a, veth.addr_b) for veth in self.netns.links]
        topology.assign_addresses(plan, addrs, {} if kernel else link, self.sc.links.reliability)
        topology.apply_link_overrides(plan, self.sc)
        self._route_aggregators(plan)
        return plan

    def _route_aggregators(self, plan: topology.Plan) -> None:
        if self.ina_plan is not None:
            topology.route_aggregators(plan, self.sc, list(self.ina_plan.aggregators))

    def aggregators(self) -> list[str]:
        """The forwarders that aggregate: the PS's edge and the placement's."""
        p, t = self.ina_plan, self.sc.training
        if self.sc.share is not None:
            return [] if self.sc.share.policy == "never" else [self.sc.share.at]
        if t.collective == "ina" or (p is None and t.aggregate_at):
            return [t.aggregate_at]             # the peers' aggregator, or one given by hand
        return [] if p is None else p.configured()

    def configure_aggregator(self, name: str) -> None:
        """`aggregators/add` at forwarder `name` for the training (its key, the slots)."""
        table = self.sc.ina or ina.Ina()
        try:
            if self.sc.share is not None:       # every job, in its range of the one pool
                s = self.sc.share
                for job in self.sc.all_jobs:
                    first, slots = share.ranges(s, self.sc.all_jobs)[job.ps]
                    ina.configure(f"unix://{self.sockets[name]}", job, name, slots,
                                  s.slot_timeout, first)
                return
            ina.configure(f"unix://{self.sockets[name]}", self.sc.training, name,
                          table.slots, table.timeout)
        except (OSError, TimeoutError, ValueError) as e:
            raise RunFailed(f"cannot configure the aggregator at {name}: {e}") from None

    def _netem(self) -> bool:
        """[links] loss and delay by the kernel's netem on both ends of every veth; whether
        the kernel took them (else the forwarders emulate them)."""
        assert self.netns is not None
        links = self.sc.links
        kernel = False
        if self.sc.netem and (links.loss or links.delay_ms):
            for veth in self.netns.links:
                kernel = self.netns.netem(veth.a, veth.dev_a, links.loss, links.delay_ms) \
                    and self.netns.netem(veth.b, veth.dev_b, links.loss, links.delay_ms)
        return kernel

    def _limit_bottleneck(self) -> None:
        """tbf at [bottleneck]'s rate, burst and queue on both ends of the bottleneck's veth
        (each end limits what leaves through it: one direction each); deleted with the
        namespaces."""
        assert self.netns is not None
        b = self.sc.bottleneck
        for veth in self.netns.links:
            for host, dev in ((veth.a, veth.dev_a), (veth.b, veth.dev_b)):
                try:
                    self.netns.tbf(host, dev, b.rate_mbps, b.burst_bytes, b.queue_bytes)
                except RuntimeError as e:
                    raise NetnsUnavailable(f"cannot limit the bottleneck at {host}: {e}") from None

    def _limit_links(self) -> bool:
        """[links] rate_mbps by the kernel's tbf on both ends of every veth ([links]
        queue_bytes, burst and by default queue as [bottleneck]'s); False when there is no
        rate to limit."""
        assert self.netns is not None
        rate = self.sc.links.rate_mbps
        if not rate:
            return False
        b = self.sc.bottleneck
        queue = int(self.sc.links.queue_bytes) or b.queue_bytes
        for veth in self.netns.links:
            for host, dev in ((veth.a, veth.dev_a), (veth.b, veth.dev_b)):
                try:
                    self.netns.tbf(host, dev, rate, b.burst_bytes, queue)
                except RuntimeError as e:
                    raise NetnsUnavailable(f"cannot limit the link at {host}: {e}") from None
        self.notes.append(f"links limited to {rate:g} Mbit/s by tbf on every veth")
        return True

    def read_link_stats(self) -> None:
        """The bottleneck's tbf counters, per direction (sender->receiver host), once, while
        its namespaces exist: at the end of the run, or when it fails."""
        if self.link_stats is not None or self.netns is None or not self.netns.hosts \
                or self.sc.topology != "bottleneck":
            return
        stats = {}
        for veth in self.netns.links:
            for host, dev, peer in ((veth.a, veth.dev_a, veth.b), (veth.b, veth.dev_b, veth.a)):
                try:
                    stats[f"{host}->{peer}"] = self.netns.qdisc_stats(host, dev)
                except (RuntimeError, ValueError) as e:
                    self.notes.append(f"qdisc counters of {host}->{peer} unavailable: {e}")
        self.link_stats = stats

    def _address_of(self, host: str) -> str:
        """`host`'s address on its (first) veth."""
        assert self.netns is not None
        for veth in self.netns.links:
            if host in (veth.a, veth.b):
                return veth.addr_a if host == veth.a else veth.addr_b
        raise RunFailed(f"host {host} has no link")

    def _wrap(self, node: topology.ForwarderNode | None) -> list[str]:
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
            self._reap_if_killed()
            self.socket_dir = Path(tempfile.mkdtemp(
                prefix=f"{reaper.SOCKET_DIR_PREFIX}{owner_tag()}-"))
        for name, node in plan.forwarders.items():
            conf = self.run_dir / "config" / f"{name}.toml"
            conf.write_text(node.config(self.run_dir, tables, self.sc.trace_interval,
                                        topology.forwarder_strategy(self.sc)))
            sock = str(self.socket_dir / f"{name}.sock")
            host = "0.0.0.0" if self.netns else "127.0.0.1"
            argv = self._wrap(node) + [sys.executable, "-m", "forwarder", "--unix", sock,
                                       "--tcp", "0", "--udp", str(node.udp), "--host", host,
                                       "--config", str(conf)]
            proc = self._spawn(f"fwd-{name}", argv)
            wait_until(lambda s=sock: unix_socket_accepts(s), READY_TIMEOUT, proc, "listening")
            self.sockets[name] = sock
            self.forwarder_procs[name] = proc
            self.forwarder_argv[name] = argv

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> ManagedProcess:
        # one time base per run: every child's metrics count from the run's start, so a
        # restarted process continues the series of the one it replaces
        env = {**(env or {}), RUN_T0_ENV: repr(self.t0)}
        proc = ManagedProcess(name, argv, self.run_dir / "logs" / f"{name}.log", env=env)
        self.procs.append(proc)
        return proc

    def _link_flags(self) -> list[str]:
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
        start = self.sc.job_start.get(self.sc.job_of(app).ps)
        return ["--start-after", repr(start)] if start else []

    def start_apps(self, plan: topology.Plan) -> tuple[dict[str, ManagedProcess], dict]:
        """Every job's workers, then (once they are ready) its PS: (PSs, workers) by name."""
        workers = {}
        ps_nodes = []
        peers = {}                      # PS-less jobs' peers: supervised as PSs are
        for app in plan.apps:
            node = plan.forwarders[app.forwarder]
            env = {"NDN_CLIENT_TRANSPORT": f"unix://{self.sockets[app.forwarder]}"}
            metrics = self.run_dir / "metrics" / f"{app.name}.jsonl"
            config = self.job_configs[self.sc.job_of(app.name).ps]
            self.roles[app.name] = app.role
            if app.role == "ps":
                ps_nodes.append((app, node, env, metrics, config))
                continue
            if app.role == "peer":
                # a PS-less job's peer, or a pipeline's stage (its final parameters saved)
                stage = bool(self.sc.job_of(app.name).machines)
                self.roles[app.name] = "stage" if stage else "peer"
                program = ["apps.stage", "--save", str(self.run_dir / pipeline.STAGES_DIR /
                                                       f"{app.name}.npz")] \
                    if stage else ["apps.peer"]
                argv = self._wrap(node) + [sys.executable, "-m", *program, "--name",
                                           app.name, "--config", str(config), "--metrics",
                                           str(metrics), *self._link_flags(),
                                           *self._start_flags(app.name)]
                peers[app.name] = self._spawn(app.name, argv, env)
                self.worker_launch[app.name] = (argv, env)
                continue
            argv = self._wrap(node) + [sys.executable, "-m", "apps.worker", "--name", app.name,
                                       "--config", str(config), "--metrics", str(metrics)]
            if app.name in self.sc.slowdown:
                argv += ["--slowdown", str(self.sc.slowdown[app.name])]
            argv += self._link_flags()
            workers[app.name] = self._spawn(app.name, argv, env)
            self.worker_launch[app.name] = (argv, env)
        for name, proc in workers.items():
            wait_until(lambda p=proc, n=name: f"worker {n} ready" in p.tail(5), READY_TIMEOUT,
                       proc, "ready")
        pss = dict(peers)
        for app, node, env, metrics, config in ps_nodes:
            model = "model.npz" if not self.sc.jobs else f"model-{app.name}.npz"
            argv = self._wrap(node) + [sys.executable, "-m", "apps.ps", "--config", str(config),
                                       "--metrics", str(metrics),
                                       "--save", str(self.run_dir / model), *self._link_flags(),
                                       *self._start_flags(app.name)]
            self.ps_launch[app.name] = (argv, env)
            pss[app.name] = self._spawn(app.name, argv, env)
        return pss, workers

    def start_tcp(self, plan: topology.Plan) -> tuple[dict[str, ManagedProcess], dict]:
        """run.system = "tcp": each job's bench/tcp_ps.py PS on the PS's host, listening on
        its end of the bottleneck, then its workers on theirs, connecting over it; no
        forwarders. Their metrics and logs go where the apps' go, under the same names."""
        env = baseline.env()
        pss, workers = {}, {}
        listening: dict[str, tuple[str, Path]] = {}    # PS -> (its address, its port file)
        for app in plan.apps:
            self.roles[app.name] = app.role
            if app.role == "ps":
                node = plan.forwarders[app.forwarder]
                address = self._address_of(str(node.host))
                ready = listening[app.name] = (address, self.run_dir / "config" /
                                               f"tcp-{app.name}.port")
                pss[app.name] = self._spawn(app.name, self._wrap(node) + baseline.ps_argv(
                    self.sc.job_of(app.name), address, ready[1],
                    self.run_dir / "metrics" / f"{app.name}.jsonl"), env)
        ports = {}
        for name, ps in pss.items():
            port_file = listening[name][1]
            wait_until(lambda f=port_file: f.exists() and f.read_text().strip().isdigit(),
                       READY_TIMEOUT, ps, "listening")
            ports[name] = int(port_file.read_text())
        for app in plan.apps:
            if app.role == "worker":
                t = self.sc.job_of(app.name)
                argv = self._wrap(plan.forwarders[app.forwarder]) + baseline.worker_argv(
                    t, t.workers.index(app.name), listening[t.ps][0], ports[t.ps],
                    self.run_dir / "metrics" / f"{app.name}.jsonl")
                workers[app.name] = self._spawn(app.name, argv, env)
        return pss, workers

    def start(self, plan: topology.Plan) -> tuple[dict[str, ManagedProcess], dict]:
        """Whatever trains: ndnps (forwarders, then the apps) or the TCP PS baseline; every
        job's PS and workers, by name."""
        if self.sc.system == "tcp":
            return self.start_tcp(plan)
        self.start_forwarders(plan)
        for name in self.aggregators():
            self.configure_aggregator(name)
        if self.sc.share is not None and self.sc.share.controlled:
            self.start_controller()
        return self.start_apps(plan)

    def start_controller(self) -> None:
        """[share]'s controller (apps/controller.py) beside the aggregating forwarder."""
        s = self.sc.share
        conf = self.run_dir / "config" / "share.toml"
        conf.write_text(_to_toml(share.controller_config(s, self.sc.all_jobs)))
        argv = [sys.executable, "-m", "apps.controller", "--config", str(conf), "--metrics",
                str(self.run_dir / "metrics" / f"{share.CTL}.jsonl"), *self._link_flags()]
        proc = self.controller = self._spawn(
            share.CTL, argv, {"NDN_CLIENT_TRANSPORT": f"unix://{self.sockets[s.at]}"})
        wait_until(lambda: "ready" in proc.tail(5), READY_TIMEOUT, proc, "ready")

    # ---- the run -----------------------------------------------------------------------------------

    def run(self) -> int:
        self.prepare()
        display = Progress(self.sc, self.run_dir, self.live)
        try:
            plan = self.plan()
            pss, workers = self.start(plan)
            display.start()
            self.supervise(pss, workers, display)
            self.collect_status(plan)
            self.read_link_stats()
        except (ProcessFailed, RunFailed, NetnsUnavailable) as e:
            display.stop()
            code = failed_run_exit(e)
            how = "stopped: the training cannot go on" if code == EXIT_JOB_FAILED else "failed"
            print(f"\nrun {how}: {e}{self._unplanned_text()}", file=sys.stderr)
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
        summary = self._write_summary(ok=True)
        if summary.get("parameters_identical") is False:
            print(f"\nrun failed: the peers' parameters differ at versions "
                  f"{summary.get('digest_mismatches')}", file=sys.stderr)
            summary = self._write_summary(ok=False, error="the peers' parameters differ")
            return 1
        report.plot_all(self.run_dir, self.sc)
        report.timeline(self.run_dir, self.sc)
        display.final(summary)
        return 0

    def supervise(self, pss: dict[str, ManagedProcess], workers: dict[str, ManagedProcess],
                  display: "Progress") -> None:
        deadline = self.t0 + self.sc.timeout
        next_look = 0.0
        faults = Faults(self, workers, display, self.t0, pss)
        while True:
            if _SIGNALLED:
                raise Interrupted()
            display.update()
            faults.step()
            if time.monotonic() > next_look:            # learn which face is which app
                self.learn_face_labels()
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

    def check_exits(self, faults: "Faults") -> bool:
        """Children that exited unasked, each handled by the job's policy (see the module's
        docstring); True once every job's PS has finished."""
        for name, proc in list(self.forwarder_procs.items()):
            if proc.poll() is not None:
                faults.forget("forwarder", name)
                rec = self.unplanned(proc, "forwarder", name)
                faults.restart_unplanned("forwarder", name, rec)
        if self.controller is not None and self.controller.poll() is not None and \
                not self.controller_seen_exit:
            self.controller_seen_exit = True
            self.unplanned(self.controller, "controller", share.CTL,
                           "none: rounds go the ordinary way (the nodes find it unreachable)")
        for name, proc in list(faults.workers.items()):
            if proc.poll() not in (None, 0):
                faults.forget("worker", name)
                self.unplanned(proc, "worker", name,
                               f"none: on_worker_loss = {self.sc.training.on_worker_loss!r} "
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
            elif code != 0 and not self.sc.job_of(name).checkpoint:
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
        """What a PS-less job does without `name` (a peer or a pipeline's stage)."""
        job = self.sc.job_of(name)
        wait = f"once it is silent for training.worker_timeout = {job.worker_timeout:g} s"
        if role == "stage":
            return (f"the pipeline stops: it cannot go on without stage {name} (its other "
                    f"stages stop {wait})")
        if job.on_peer_loss == "re-form":
            return (f"the other peers re-form without it {wait} (training.on_peer_loss = "
                    f"'re-form')")
        return f"the training stops {wait} (training.on_peer_loss = 'stop')"

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
               "t": round(time.monotonic() - self.t0, 3), "code": code, "how": describe(code),
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

    def _unplanned_text(self) -> str:
        """The unplanned exits before a failure, with their log tails (the failure may be
        their consequence)."""
        return "".join(f"\nunplanned exit before it: {r['who']} ({r['how']}) at {r['t']:.1f} s; "
                       f"last lines of {r['log']}:\n{r['log_tail']}"
                       for r in self.unplanned_exits)

    def learn_face_labels(self) -> None:
        """Apps' faces are known by the prefix they registered (/<ps>, /<gpu>): remember it
        while they are connected, since the final status comes after they left."""
        for name, sock in self.sockets.items():
            try:
                status = fetch_status(f"unix://{sock}", timeout=1.0, tries=2)
            except (OSError, ConnectionError, ValueError):
                continue
            app_faces = {f["id"] for f in status["faces"] if f["remote"].startswith("fd://")}
            for entry in status["fib"]:
                for hop in entry["nexthops"]:
                    prefix = entry["prefix"].lstrip("/")
                    if prefix and not prefix.startswith("localhost"):
                        self.face_labels.setdefault((name, hop["face"]), prefix)
                        if hop["face"] in app_faces:    # not a route toward another forwarder
                            self.apps_seen.add(prefix)

    def collect_status(self, plan: topology.Plan) -> None:
        """Each forwarder's final status, with faces labelled by peer or app, for the report."""
        peers = {}
        for name, node in plan.forwarders.items():
            for face in node.faces:
                peers[(name, face.uri.split("://", 1)[1])] = face.name
        for name, sock in self.sockets.items():
            try:
                # the runner's face has the apps' link conditions: a lost packet is asked again
                status = fetch_status(f"unix://{sock}", timeout=1.0, tries=5)
            except (OSError, ConnectionError, ValueError) as e:
                self.notes.append(f"status of {name} unavailable: {e}")
                continue
            labels = {str(face): label for (node, face), label in self.face_labels.items()
                      if node == name}
            for face in status["faces"]:
                peer = peers.get((name, face["remote"].split("://", 1)[-1]))
                if peer:
                    labels[str(face["id"])] = peer
            status["labels"] = labels         # apps' faces included, though they are gone
            (self.run_dir / "traces" / f"{name}-status.json").write_text(json.dumps(status, indent=1))

    def _reap_if_killed(self) -> None:
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
        if self.ina_plan is not None:
            extra["ina"] = {**self.ina_plan.as_dict(),
                            "aggregators_configured": self.aggregators()}
        if error:
            extra["error"] = error
        try:
            summary = report.summarize(self.run_dir, self.sc, time.monotonic() - self.t0, extra)
        except (OSError, ValueError, KeyError) as e:
            summary = {"scenario": self.sc.name, "summary_error": str(e), **extra}
        try:
            summary["link_bytes"] = report.link_bytes(self.run_dir)
        except (OSError, ValueError, KeyError):
            pass
        if self.sc.topology == "bottleneck":
            summary["bottleneck"] = report.bottleneck_summary(
                self.sc, self.link_stats, summary.get("model_bytes"),
                summary.get("iteration_seconds"))
        (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
        return summary


class Faults:
    """[faults] during a run — SIGKILL a node once the PS's metrics reach a version, restart it
    (same name, same argv; a worker's metrics appended to the same file) some seconds later —
    and the restarts that unplanned exits get. Every action goes into summary.json (`faults`,
    or the unplanned exit's record)."""

    def __init__(self, runner: Runner, workers: dict[str, ManagedProcess],
                 display: "Progress", started: float, pss: dict[str, ManagedProcess]) -> None:
        self.runner, self.workers, self.display = runner, workers, display
        self.started = started
        self.pss: dict[str, ManagedProcess | None] = dict(pss)    # by name; None while killed
        self.pending = list(runner.sc.kills)
        self.restarts: list[tuple[float, str, str, dict]] = []   # (when, role, node, record)
        self.restarted: set[ManagedProcess] = set()
        self.count: dict[str, int] = {}                 # restarts per node
        self.unplanned_restarts: dict[str, int] = {}

    @property
    def version(self) -> int:
        recs = self.display.records
        return recs[-1]["version"] if recs else -1

    def process(self, role: str, node: str) -> ManagedProcess | None:
        return {"worker": lambda: self.workers.get(node) or self.pss.get(node),
                "ps": lambda: self.pss.get(node),
                "forwarder": lambda: self.runner.forwarder_procs.get(node)}[role]()

    def forget(self, role: str, node: str) -> None:
        """`node` is gone (killed, or exited): not supervised until restarted."""
        if role == "worker":
            self.workers.pop(node, None)
            self.pss.pop(node, None)            # a peer (PS-less): the others say what follows
        elif role == "ps":
            self.pss[node] = None
        else:
            self.runner.forwarder_procs.pop(node, None)

    def step(self) -> None:
        now = time.monotonic()
        version = self.version
        while self.pending and version >= self.pending[0].at_version:
            kill = self.pending.pop(0)
            rec = {"kind": "kill", "role": kill.role, kill.role: kill.worker,
                   "at_version": kill.at_version, "version": version,
                   "t": round(now - self.started, 3)}
            self.runner.faults.append(rec)
            proc = self.process(kill.role, kill.worker)
            if proc is None or proc.poll() is not None:
                rec["skipped"] = "not running (killed before, or finished)"
                continue
            proc.kill()                            # its exit code (-9) is expected
            self.forget(kill.role, kill.worker)
            if kill.restart_after is not None:
                self.restarts.append((now + kill.restart_after, kill.role, kill.worker, rec))
        for item in [r for r in self.restarts if r[0] <= now]:
            self.restarts.remove(item)
            _, role, node, rec = item
            proc = self.restart(role, node)
            rec["restarted"] = {"process": proc.name, "version": self.version,
                                "t": round(now - self.started, 3)}

    def restart_unplanned(self, role: str, node: str, rec: dict) -> None:
        """An unplanned exit of a forwarder or a checkpointing PS: restarted after
        run.restart_after, at most run.max_restarts times per node (then the run fails)."""
        sc = self.runner.sc
        n = self.unplanned_restarts[node] = self.unplanned_restarts.get(node, 0) + 1
        if n > sc.max_restarts:
            rec["action"] = f"run failed: exited unplanned {n} times (run.max_restarts = " \
                            f"{sc.max_restarts})"
            raise RunFailed(f"{rec['who']} exited unplanned ({rec['how']}) {n} times; "
                            f"run.max_restarts = {sc.max_restarts}; last lines of "
                            f"{rec['log']}:\n{rec['log_tail']}")
        rec["action"] = f"restart after {sc.restart_after:g} s"
        self.restarts.append((time.monotonic() + sc.restart_after, role, node, rec))

    def restart(self, role: str, name: str) -> ManagedProcess:
        """`name` again, as it was started."""
        runner = self.runner
        n = self.count[name] = self.count.get(name, 0) + 1
        if role == "worker":
            argv, env = runner.worker_launch[name]
            proc = self.workers[name] = runner._spawn(f"{name}-r{n}", argv, env)
            self.restarted.add(proc)
        elif role == "ps":
            argv, env = runner.ps_launch[name]
            proc = self.pss[name] = runner._spawn(f"{name}-r{n}", argv, env)
        else:
            sock = runner.sockets[name]
            # the new process truncates its trace files: keep the killed one's as
            # traces/<name>-r<n-1>-*.tsv (r0: the first process)
            traces = runner.run_dir / "traces"
            for kind in ("rates", "tables"):
                if (traces / f"{name}-{kind}.tsv").exists():
                    (traces / f"{name}-{kind}.tsv").rename(traces / f"{name}-r{n - 1}-{kind}.tsv")
            proc = runner._spawn(f"fwd-{name}-r{n}", runner.forwarder_argv[name])
            wait_until(lambda: unix_socket_accepts(sock), READY_TIMEOUT, proc, "listening")
            runner.forwarder_procs[name] = proc
            if name in runner.aggregators():        # its configuration went with it
                runner.configure_aggregator(name)
        return proc

    def rejoined(self, name: str) -> bool:
        path = self.display.path
        try:
            return any(r.get("event") == "rejoined" and r.get("worker") == name
                       for r in read_metrics(path))
        except (OSError, ValueError):
            return False

    def note(self, name: str, text: str) -> None:
        for rec in reversed(self.runner.faults):
            if rec.get("worker") == name and "restarted" in rec:
                rec["restarted"]["outcome"] = text
                return

    def finish(self) -> None:
        for _, _, _, rec in self.restarts:
            rec["restart_skipped"] = "the run ended first"
        for kill in self.pending:
            self.runner.faults.append({"kind": "kill", "role": kill.role, kill.role: kill.worker,
                                       "at_version": kill.at_version,
                                       "skipped": "the run ended before that version"})


class JobFollower:
    """One PS's metrics file, read as it grows, as one version series."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.series = report.VersionSeries()
        self.printed: dict | None = None        # the version record last shown (--plain)
        self._pos = 0

    def read(self) -> None:
        try:
            with open(self.path) as f:
                f.seek(self._pos)
                chunk = f.read()
                complete = chunk[:chunk.rfind("\n") + 1]
                self._pos += len(complete)
        except FileNotFoundError:
            return
        for line in complete.splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            self.series.add(rec)


class Progress:
    """Live progress from each PS's metrics file (rich), or one line per few versions; a
    row per job."""

    def __init__(self, sc: Scenario, run_dir: Path, live: bool) -> None:
        self.sc = sc
        self.jobs = {job.ps: JobFollower(run_dir / "metrics" / f"{job.recorder}.jsonl")
                     for job in sc.all_jobs}
        self.path = self.jobs[sc.training.ps].path        # the first job's (faults)
        self.live = live and sys.stdout.isatty()
        self._live: Live | None = None
        self._last_print = 0.0

    def start(self) -> None:
        if self.live:
            from rich.live import Live
            self._live = Live(self._table(), refresh_per_second=4, transient=False)
            self._live.start()

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    @property
    def records(self) -> list[dict]:
        """The (first) PS's version records so far, one per version (a resumed PS's redone
        versions replace the killed PS's)."""
        return self.jobs[self.sc.training.ps].series.versions

    def update(self) -> None:
        for job in self.jobs.values():
            job.read()
        if self._live is not None:
            self._live.update(self._table())
        elif time.monotonic() - self._last_print > 2.0:
            for ps, job in self.jobs.items():           # each job that made a version since
                if job.series.versions and job.series.versions[-1] is not job.printed:
                    self._last_print = time.monotonic()
                    job.printed = job.series.versions[-1]
                    print(self._line(ps), flush=True)

    def _stats(self, ps: str) -> dict:
        recs = self.jobs[ps].series.versions
        last = recs[-1]
        acc = next((r["accuracy"] for r in reversed(recs) if r.get("accuracy") is not None), None)
        recent = recs[-11:]
        # only records on one time base: metrics written without the run's (an app started
        # by hand) count from each process's start, and a restart would give a negative time
        for i in range(len(recent) - 1, 0, -1):
            if recent[i]["t"] < recent[i - 1]["t"]:
                recent = recent[i:]
                break
        it = ((recent[-1]["t"] - recent[0]["t"]) / (len(recent) - 1)) if len(recent) > 1 else None
        job = self.sc.job_of(ps)
        replicas = job.machines or len(job.workers)     # a pipeline's machines hold the data
        return {"version": last["version"], "loss": last.get("loss"), "accuracy": acc,
                "iteration": it,
                "samples_per_s": (job.batch * replicas / it) if it else None}

    def _cells(self, ps: str) -> list[str]:
        s = self._stats(ps)
        cells = [str(s["version"]), _fmt(s["loss"], ".4f"), _fmt(s["accuracy"], ".4f"),
                 _fmt(s["iteration"] and s["iteration"] * 1000, ".1f"),
                 _fmt(s["samples_per_s"], ".0f")]
        return [ps, *cells] if self.sc.jobs else cells

    def _columns(self) -> list[str]:
        cols = ["version", "loss", "accuracy", "iteration ms", "samples/s"]
        return ["job", *cols] if self.sc.jobs else cols

    def _line(self, ps: str) -> str:
        return "  ".join(f"{label} {cell}" for label, cell in
                         zip(self._columns(), self._cells(ps)))

    def _table(self):
        from rich.table import Table
        jobs = f"{len(self.jobs)} jobs, " if self.sc.jobs else ""
        table = Table(title=f"ndnps {self.sc.name} — {jobs}{self.sc.training.mode}, "
                            f"{len(self.sc.worker_names)} workers, {self.sc.topology}")
        for col in self._columns():
            table.add_column(col, justify="right")
        for ps, job in self.jobs.items():
            if job.series.versions:
                table.add_row(*self._cells(ps))
        return table

    def final(self, summary: dict) -> None:
        rows = [("scenario", summary["scenario"]),
                ("mode", f"{summary['mode']} / {summary['push_mode'] or summary['system']}"),
                ("workers", summary["workers"]), ("final accuracy", summary["final_accuracy"]),
                ("versions", summary["versions"]), ("model bytes", summary["model_bytes"]),
                ("PS bytes out per version / model (steady)",
                 summary["ps_bytes_out_per_version_over_model"]),
                ("PS start-up bytes out", summary.get("ps_startup_bytes_out")),
                ("iteration (median, s)", summary["iteration_seconds"]),
                ("probes", summary["probes"]), ("retransmissions", summary["retransmissions"]),
                ("wall seconds", summary["wall_seconds"])]
        if summary.get("faults") or summary.get("workers_lost"):
            rows += [("faults injected", len([f for f in summary.get("faults", [])
                                              if "skipped" not in f])),
                     ("workers lost / rejoined",
                      f"{summary['workers_lost']} / {summary['workers_rejoined']}"),
                     ("versions with fewer gradients", summary["short_versions"]),
                     ("gradients collected again (wait)", summary["collects_redone"]),
                     ("PS restarts (resumed from version)",
                      f"{summary['ps_restarts']} ({summary['ps_resumed_from']})"),
                     ("forwarder reconnects", sum(summary["reconnects"].values()))]
        if summary.get("jobs"):
            rows = [("scenario", summary["scenario"]), *_job_rows(summary),
                    ("wall seconds", summary["wall_seconds"])]
        elif summary.get("pipeline"):
            rows = [("scenario", summary["scenario"]), *_pipeline_rows(summary["pipeline"]),
                    ("wall seconds", summary["wall_seconds"])]
        else:
            rows += _bottleneck_rows(summary.get("bottleneck"))
        try:
            from rich.console import Console
            from rich.table import Table
            table = Table(title="summary", show_header=False)
            for k, v in rows:
                table.add_row(k, _fmt(v, ".4f") if isinstance(v, float) else str(v))
            Console().print(table)
        except ImportError:                      # pragma: no cover - rich is a dependency
            for k, v in rows:
                print(f"{k:>36}: {v}")
        for note in summary.get("notes", []):
            print(f"note: {note}")
        for warning in summary.get("warnings", []):
            print(f"warning: {warning}")


def check_netns(sc: Scenario) -> None:
    """NetnsUnavailable, naming the cause, unless this host can make the scenario's
    namespaces (and for the bottleneck, its tbf qdiscs)."""
    if sc.pipeline is not None:
        raise ScenarioError("pipeline: on a local star, not with --netns (not built)")
    if sc.topology == "bottleneck" or sc.links.rate_mbps or minindn.limited(sc):
        check_available('topology.kind = "bottleneck"' if sc.topology == "bottleneck"
                        else "links.rate_mbps with --netns", tbf=True)
    else:
        check_available()


def _bottleneck_rows(b: dict | None) -> list[tuple[str, object]]:
    """The final table's rows for the bottleneck: iteration over both wire limits, drops."""
    if not b:
        return []
    over = b.get("iteration_over_wire_limit") or {}
    return [(f"iteration / wire limit {k} ({_fmt(b['wire_limit_seconds'][k], '.3f')} s)",
             _fmt(v, ".3f")) for k, v in over.items()] + _drop_rows(b)


def _pipeline_rows(p: dict) -> list[tuple[str, object]]:
    """The final table of a pipeline run: the stages, then the figures docs/hetero.md reports."""
    rows: list[tuple[str, object]] = [
        (f"stage {st['stage']}: {st['kind']} x{_fmt(st['device_factor'], '.0f')}, layers "
         f"{st['layers'][0]}-{st['layers'][-1]}" if st["layers"] else f"stage {st['stage']}",
         f"busy {_fmt(st['busy_seconds'], '.3f')} s, idle {_fmt(st['idle_fraction'], '.2f')}")
        for st in p["stages"]]
    return rows + [
        ("final accuracy (reference)", f"{_fmt(p['final_accuracy'], '.4f')} "
                                       f"({_fmt(p.get('reference_accuracy'), '.4f')})"),
        ("iteration (median, s; predicted)", f"{_fmt(p['iteration_seconds'], '.3f')} "
                                             f"({_fmt(p['predicted_iteration_seconds'], '.3f')})"),
        ("samples/s", _fmt(p["samples_per_second"], ".1f")),
        ("stage imbalance (max / mean busy)", _fmt(p["stage_imbalance"], ".3f")),
        ("stages identical across machines", p["parameters_identical"]),
        ("activation memory saved (recompute)", _fmt(p["memory_saved"], ".2f"))]


def _job_rows(summary: dict) -> list[tuple[str, object]]:
    """The final table of a run with several jobs: each job's outcome, then how they shared
    the network (`sharing`) and the bottleneck's drops."""
    rows: list[tuple[str, object]] = []
    shares = (summary.get("sharing") or {}).get("jobs") or {}
    for job in summary["jobs"]:
        share = shares.get(job["ps"], {})
        rows.append((f"job {job['ps']}: accuracy, versions, iteration (s), share",
                     f"{_fmt(job['final_accuracy'], '.4f')}, {job['versions']}, "
                     f"{_fmt(job['iteration_seconds'], '.3f')}, "
                     f"{_fmt(share.get('wire_mbps'), '.1f')} Mbit/s = "
                     f"{_fmt(share.get('over_equal_share'), '.2f')} of equal"))
    sharing = summary.get("sharing") or {}
    rows.append(("Jain's index (overlap, s)", f"{_fmt(sharing.get('jain_index'), '.4f')} "
                 f"({_fmt(sharing.get('overlap_seconds'), '.1f')})"))
    return rows + _drop_rows(summary.get("bottleneck"))


def _drop_rows(b: dict | None) -> list[tuple[str, object]]:
    """The bottleneck's qdisc drops over the packets it sent, both directions."""
    if not b or b.get("qdisc") is None:
        return []
    return [("qdisc drops / packets sent", f"{b['qdisc_drops']} / {b['qdisc_sent_packets']} "
             f"({_fmt(b['qdisc_drops_over_sent'], '.2%')})")]


def _fmt(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _list() -> int:
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
    args = p.parse_args(argv)
    if args.scenario == "list":
        return _list()
    try:
        sc = spec.load(args.scenario, args.set)
    except ScenarioError as e:
        why = args.out and _refused_out(args.out)
        print(f"scenario error: {e}" + (f"; --out {args.out}: {why}" if why else ""),
              file=sys.stderr)
        return 2
    if args.netns:
        sc.netns = True
    try:
        if sc.netns:
            check_netns(sc)
        else:
            spec.check_local(sc)
        if sc.system == "tcp":
            baseline.check_available()
    except (ScenarioError, NetnsUnavailable) as e:
        print(f"scenario error: {e}", file=sys.stderr)
        return 2
    run_dir = args.out or Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-{sc.name}"
    why = _unusable_run_dir(run_dir)
    if why:
        print(f"scenario error: --out {run_dir}: {why}", file=sys.stderr)
        return 2

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _on_stop_signal)
    print(f"ndnps: running scenario {sc.name!r} -> {run_dir}")
    runner = Runner(sc, run_dir, live=not args.plain)
    try:
        code = runner.run()
    except (KeyboardInterrupt, Interrupted):       # before the run's own handling
        runner.shutdown()
        print("\ninterrupted: every process stopped", file=sys.stderr)
        return 130
    print(f"run directory: {run_dir}")
    return code

