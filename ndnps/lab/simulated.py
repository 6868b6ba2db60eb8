"""A simulated run (`python -m ndnps.scenario FILE --sim`, `[run] mode = "sim"`): the runner's
own set-up — the same plan, forwarder configurations, features, apps and their command lines —
with every forwarder and every app in this one process over ndnps.sim's network, in virtual
time (docs/simulation.md).

`SimRunner` is the `Runner` with its process and socket work replaced: a forwarder is the
daemon's own object on a `SimNet` node, its faces that node's simulated links, each link's
conditions those its real faces or the kernel would have put on it (`link_spec`); an app is
its program's own entry point (`prepare(argv)` with the argv the real run would give it, then
its role on an `App` attached to its forwarder) run as a task, its log lines in its own log
(`SimProcess`). The runner's sequence runs unchanged — forwarders, aggregators configured,
the features' helpers, the workers, each ready before the PS — the virtual loop run forward
in steps between (`run_until_complete`), and then until every job's PS (or peers) finished,
bounded by `[run] timeout` in virtual time. The outputs are a real run's (summary.json, logs,
metrics, traces, plots, timeline), with `simulated` in summary.json: virtual and wall seconds,
events, events per second, and every link direction's counters in traces/sim-links.json.

Not simulated (refused, naming the key): the TCP baseline (`[run] system = "tcp"`: kernel
TCP, not our stack) and `[faults]` (kills of processes). Not modelled: CPU time of forwarders
and apps (they act in zero virtual time; compute takes the device model's time), link jitter.
"""
from __future__ import annotations

import asyncio
import contextlib
import contextvars
import importlib
import io
import itertools
import json
import logging
import sys
import time
import tomllib
from collections import deque
from pathlib import Path
from typing import Any, cast

from ndnps.forwarder.config import ConfigError, FaceConfig, parse_config
from ndnps.forwarder.faces.link import LinkParams
from ndnps.forwarder.faces.queue import QueueOptions
from ndnps.forwarder.mgmt import status_snapshot
from ndnps.ndn import clock
from ndnps.ndn.tlv import MAX_PACKET_SIZE
from ndnps.sim.link import WIRE_OVERHEAD, LinkSpec, SocketBuffer
from ndnps.sim.loop import VirtualLoop
from ndnps.sim.net import SimNet

from . import topology
from .config import Scenario
from .nodes import NDN_PORT
from .exitcodes import (EXIT_ERROR, EXIT_JOB_FAILED, EXIT_SIGNAL, EXIT_USAGE, JobStopped,
                        RunFailed, failed_run_exit)
from .feature import Command
from .process import READY_TIMEOUT, ManagedProcess, ProcessFailed
from .progress import Progress
from .runner import Runner
from .values import ScenarioError

log = logging.getLogger("sim")

# Datagrams a forwarder's UDP socket holds before the wire when the kernel limits its links
# (tbf), one buffer for all its UDP faces (their one socket). SO_SNDBUF's 64 KiB (doubled by
# Linux, ~2 KiB of accounting a 1472-octet datagram) would be ~64; calibrated against the real
# runs (bench agreement): the bottleneck hardly moves (N = 8: 3.048 s at 64, 3.059 at 16, real
# 3.203), BCube(3, 2) at 2 Mbit/s wants it small (6.164 s at 64, 5.585 at 16, real 5.175) —
# the real faces queue, and mark, sooner than 64 datagrams of buffer would let them
KERNEL_FRAMES = 16
WORKERS_EXIT = 30.0          # virtual s the workers have to leave after their PS finished

# the app whose task is running: its log lines go to its own file (SimProcess.write)
_CURRENT: contextvars.ContextVar["SimProcess | None"] = contextvars.ContextVar(
    "ndnps_sim_app", default=None)


def job_table(sc: Scenario, job: Any) -> dict:
    """The scenario's own keys of `job`: [training]'s, with its [[jobs]] entry's over them."""
    own = sc.raw.get("training", {})
    if not sc.jobs:
        return own
    return {**own, **sc.raw.get("jobs", [{}] * len(sc.jobs))[sc.jobs.index(job)]}


def check_simulable(sc: Scenario) -> None:
    """ScenarioError naming what a simulated run cannot do."""
    if sc.system != "ndnps":
        raise ScenarioError(f"run.system: {sc.system!r} is not simulated (ndnps.sim runs our "
                            "forwarders and apps; the TCP baseline is the kernel's TCP)")
    if sc.kills:
        raise ScenarioError("faults: process kills are not simulated (every app and "
                            "forwarder of a simulated run is in one process)")


class SimProcess:
    """An app (or a feature's helper) of a simulated run, as the runner sees a child: its
    program's `prepare(argv)` and role run as a task; `poll`, `tail`, `stop` and `fail` as a
    ManagedProcess's."""

    def __init__(self, name: str, argv: list[str], node: str, log_path: Path) -> None:
        self.name = name
        self.node = node
        at = argv.index("-m")
        self.module, self.args = argv[at + 1], argv[at + 2:]
        self.log_path = log_path
        self._log = open(log_path, "a", buffering=1)
        self.lines: deque[str] = deque(maxlen=50)
        self.code: int | None = None
        self.face: int | None = None        # its face's id at its forwarder
        self.task: asyncio.Task | None = None
        self._waiting: list[tuple[str, asyncio.Future]] = []

    # ---- a child's surface --------------------------------------------------------------------

    def poll(self) -> int | None:
        return self.code

    def tail(self, n: int = 20) -> str:
        return "".join(list(self.lines)[-n:])

    def stop(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()

    def fail(self, why: str) -> ProcessFailed:
        return ProcessFailed(f"{self.name} {why}; last lines of {self.log_path}:\n{self.tail()}",
                             self.code)

    def write(self, line: str) -> None:
        self._log.write(line)
        self.lines.append(line)
        for text, fut in self._waiting:
            if text in line and not fut.done():
                fut.set_result(True)

    def close(self) -> None:
        self._log.close()

    async def seen(self, text: str) -> None:
        """Until a line of the log says `text`."""
        if any(text in line for line in self.lines):
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiting.append((text, fut))
        await fut

    # ---- running ------------------------------------------------------------------------------

    def start(self, net: SimNet, links: tuple[LinkSpec | None, LinkSpec | None]) -> None:
        """Its program prepared from its argv (a bad configuration: its exit code, the
        message in its log) and its role started on an App of its forwarder."""
        token = _CURRENT.set(self)
        try:
            program = importlib.import_module(f"{self.module}.__main__")
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(err):
                prepared = program.prepare(self.args)
            if err.getvalue():
                self.write(err.getvalue())
            if isinstance(prepared, int):
                self.code = prepared
                return
            # the task runs in this context: its log lines (and its tasks') are its own
            self.task = net.loop.create_task(self._run(prepared, net, links))
        finally:
            _CURRENT.reset(token)

    async def _run(self, p: Any, net: SimNet, links: tuple[LinkSpec | None, LinkSpec | None]
                   ) -> None:
        """launch._serve's part that is not sockets: reliability, the start delay, the role,
        the exit code, the App shut down and the metrics closed whatever happens."""
        args = p.args
        app = net.app(self.node, *links, link_repair=args.link_repair)
        self.face = net.nodes[self.node].app_faces[-1].info.id
        code = EXIT_ERROR
        try:
            if args.lp_reliability:
                await app.enable_reliability()
            if args.start_after > 0:
                await asyncio.sleep(args.start_after)
            code = await p.role(app)
        except asyncio.CancelledError:
            code = EXIT_SIGNAL
        except Exception:                   # as a real app: logged, exit 1
            log.exception("failed")
            code = EXIT_ERROR
        finally:
            try:
                await asyncio.wait_for(app.drain(), 1.0)
            except (asyncio.TimeoutError, ConnectionError, OSError):
                pass
            app.shutdown()
            p.metrics.close()
            self.code = code


class _AppLogs(logging.Handler):
    """Every log record to its app's log (the running task's), else to the run's sim.log,
    stamped with the virtual time."""

    def __init__(self, loop: VirtualLoop, main: Path) -> None:
        super().__init__()
        self.loop = loop
        self.main = open(main, "a", buffering=1)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = f"{self.loop.time():12.6f} {record.levelname} {record.name}: " \
                   f"{record.getMessage()}\n"
            if record.exc_info:
                line += logging.Formatter().formatException(record.exc_info) + "\n"
            proc = _CURRENT.get()
            if proc is not None:
                proc.write(line)
            else:
                self.main.write(line)
        except Exception:                       # pragma: no cover - logging must not raise
            self.handleError(record)

    def close(self) -> None:
        self.main.close()
        super().close()


def emulated(params: LinkParams, mtu: int) -> LinkSpec:
    """What a face's own emulation (faces/link.py's LinkEmulator: rate by the packet alone,
    a drop-tail queue, no mark) puts on a link."""
    return LinkSpec(rate_mbps=params.rate_mbps, delay_ms=params.delay_ms, loss=params.loss,
                    mtu=mtu, overhead=0,
                    queue=QueueOptions(limit_bytes=max(params.queue_bytes, MAX_PACKET_SIZE),
                                       marking=False))


def kernel_limited(params: LinkParams, rate_mbps: float, mtu: int,
                   socket: SocketBuffer) -> LinkSpec:
    """A veth limited by the kernel's tbf (the bottleneck, `[links] rate_mbps` with --netns):
    each datagram's headers counted, the sending forwarder's socket buffer before the wire
    (shared by all its UDP faces, as their one socket is), the face's marking queue behind it;
    the face's own delay and loss on top."""
    return LinkSpec(rate_mbps=rate_mbps, delay_ms=params.delay_ms, loss=params.loss, mtu=mtu,
                    overhead=WIRE_OVERHEAD, socket=socket)


class SimRunner(Runner):
    """The Runner, in virtual time in this process (the module's docstring)."""

    def __init__(self, sc: Scenario, run_dir: Path, live: bool = False) -> None:
        super().__init__(sc, run_dir, live=False)
        check_simulable(sc)
        self.loop = VirtualLoop()
        self.net = SimNet(self.loop, seed=sc.sim.seed)
        self.t0 = 0.0
        self.app_links: dict[str, tuple[LinkSpec | None, LinkSpec | None]] = {}
        self.sims: list[SimProcess] = []
        self.socket_buffers: dict[str, SocketBuffer] = {}   # each forwarder's UDP socket
        self.port = itertools.count(NDN_PORT).__next__      # no socket: a port is a name
        self.wall = 0.0                 # s of wall time the loop ran
        self._logs: _AppLogs | None = None
        self.notes.append("simulated: every forwarder and app in one process, in virtual "
                          "time (ndnps.sim); no CPU time is charged but the device model's")

    def elapsed(self) -> float:
        return self.loop.time()

    def prepare(self) -> Path:
        """As a real run's, with each job's compute timed by its profile (device_time =
        "profiled", the profile in the scenario as run) unless the scenario says otherwise:
        a measured CPU time differs from run to run, a profile given makes a run repeatable."""
        for job in list(self.sc.all_jobs):
            if "device_time" not in job_table(self.sc, job) and not job.stages.machines:
                self.sc.replace_job(job, job.with_values(device_time="profiled"))
        return super().prepare()

    def step(self, aw: Any, timeout: float | None = None) -> Any:
        """Run the virtual loop until `aw` is done (at most `timeout` virtual s)."""
        t = time.perf_counter()
        try:
            coro = aw if timeout is None else asyncio.wait_for(aw, timeout)
            return self.loop.run_until_complete(coro)
        finally:
            self.wall += time.perf_counter() - t

    # ---- the plan and the forwarders ----------------------------------------------------------

    def plan_hosts(self) -> topology.Plan:
        """The netns plan (a forwarder per host, a link per veth) with no namespace made:
        its faces' addresses are names, their link conditions what the runner's would be."""
        sc = self.sc
        plan = topology.plan_hosts(sc)
        link = sc.links.as_table()
        if sc.topology != "bottleneck" and sc.links.rate_mbps:
            link.pop("rate_mbps")           # the kernel's tbf limits it (kernel_limited)
        # an address per veth end, as the runner's: a host's faces need distinct URIs
        addrs = [(f"10.{i >> 8 & 255}.{i & 255}.1", f"10.{i >> 8 & 255}.{i & 255}.2")
                 for i in range(len(plan.host_links))]
        topology.assign_addresses(plan, addrs, link, sc.links.reliability)
        topology.apply_link_overrides(plan, sc)
        return plan

    def kernel_rate(self) -> float:
        """The rate the kernel limits every host link to (0: the faces emulate theirs)."""
        sc = self.sc
        if sc.topology == "bottleneck":
            return sc.bottleneck.rate_mbps
        return sc.links.rate_mbps if sc.netns and sc.topology != "minindn" else 0.0

    def link_spec(self, node: str, face: FaceConfig, mtu: int | None) -> LinkSpec:
        """One direction of a forwarder-to-forwarder link, as `node`'s sending face."""
        mtu = face.mtu or mtu or MAX_PACKET_SIZE
        rate = self.kernel_rate()
        if not rate:
            return emulated(face.link, mtu)
        socket = self.socket_buffers.setdefault(node, SocketBuffer(KERNEL_FRAMES * mtu))
        return kernel_limited(face.link, rate, mtu, socket)

    def start_forwarders(self, plan: topology.Plan) -> None:
        """Every forwarder with its real configuration, its faces the simulated links."""
        faces: dict[tuple[str, str], tuple[FaceConfig, int | None]] = {}
        strategy = topology.forwarder_strategy(self.sc)
        for name, node in plan.forwarders.items():
            text = node.config(self.run_dir, self.sc.forwarder, self.sc.trace_interval,
                               strategy)
            (self.run_dir / "config" / f"{name}.toml").write_text(text)
            cfg = parse_config(tomllib.loads(text))
            cfg.unix, cfg.tcp, cfg.udp = "", 0, 0           # no listener: no socket
            for face in cfg.faces:
                faces[(name, face.name)] = (face, cfg.udp_faces.mtu)
            cfg.faces = []                                  # SimNet.connect makes them
            down = cfg.app_link
            self.app_links[name] = (None, None) if not down.active else (
                emulated(down, MAX_PACKET_SIZE),
                LinkSpec(loss=down.ingress_loss, overhead=0))
            self.net.add_forwarder(name, cfg)
            self.sockets[name] = name
        for (a, b), (face, mtu) in faces.items():
            if a < b:
                back, back_mtu = faces[(b, a)]
                self.net.connect(a, b, self.link_spec(a, face, mtu),
                                 self.link_spec(b, back, back_mtu), reliability=face.reliability)
        self.step(self.net.start())

    def commander(self, name: str) -> Command:
        return lambda command: self.step(self.net.command(name, command))

    # ---- the apps ----------------------------------------------------------------------------

    def spawn(self, name: str, argv: list[str],
              env: dict[str, str] | None = None) -> Any:
        node = (env or {})["NDN_CLIENT_TRANSPORT"].removeprefix("unix://")
        if self.sc.sim.synthetic_gradients and "ndnps.apps.worker" in argv:
            argv = [*argv, "--synthetic-gradients"]
        proc = SimProcess(name, argv, node, self.run_dir / "logs" / f"{name}.log")
        self.sims.append(proc)
        # the summary's exit codes read every child's name and poll(), as a process's
        self.procs.append(cast(ManagedProcess, proc))
        proc.start(self.net, self.app_links[node])
        return proc

    def wait_ready(self, proc: Any, text: str) -> None:
        try:
            self.step(proc.seen(text), READY_TIMEOUT)
        except asyncio.TimeoutError:
            raise proc.fail(f"not ready within {READY_TIMEOUT:.0f} s (virtual)") from None
        if proc.poll() is not None:
            raise proc.fail("exited before it was ready")

    # ---- the run -----------------------------------------------------------------------------

    def supervise(self, pss: dict, workers: dict, display: Progress) -> None:
        """Until every job's PS (or peers) finished, bounded by run.timeout (virtual); then
        the workers, which leave once their training ends."""
        try:
            self.step(self._finished(pss), max(0.0, self.sc.timeout - self.loop.time()))
        except asyncio.TimeoutError:
            tails = "".join(f"\n{name} log tail:\n{p.tail()}" for name, p in pss.items()
                            if p.poll() is None)
            raise RunFailed(f"not finished within run.timeout = {self.sc.timeout:.0f} s "
                            f"(virtual);{tails}") from None
        for name, p in pss.items():
            code = p.poll()
            if code == EXIT_JOB_FAILED:
                raise JobStopped(str(p.fail("exited 3: the training cannot go on")))
            if code == EXIT_USAGE or (code != 0 and self.roles.get(name) == "ps"):
                raise p.fail(f"exited {code}")
            if code != 0:
                self.unplanned(p, self.roles.get(name, "peer"), name, "none (simulated)")
        try:
            self.step(self._finished(workers), WORKERS_EXIT)
        except asyncio.TimeoutError:
            pass
        for name, p in workers.items():
            if p.poll() not in (None, 0):
                self.unplanned(p, "worker", name, "none: the training had ended")

    async def _finished(self, procs: dict) -> None:
        tasks = [p.task for p in procs.values() if p.task is not None]
        if tasks:
            await asyncio.wait(tasks)

    def stop_all(self) -> None:
        """Every app's task cancelled, then the forwarders stopped (their traces flushed)."""
        for p in self.sims:
            p.stop()
        tasks = [p.task for p in self.sims if p.task is not None and not p.task.done()]
        if tasks:
            self.step(asyncio.wait(tasks), 5.0)
        self.step(self.net.stop())
        for p in self.sims:
            p.close()

    def write_status(self) -> None:
        """Each forwarder's final status (traces/<name>-status.json, as a real run's), and
        every link direction's counters (traces/sim-links.json); the bottleneck's as its
        qdisc counters."""
        traces = self.run_dir / "traces"
        for name, node in self.net.nodes.items():
            status = status_snapshot(node.fw)
            status["labels"] = {str(f.info.id): peer for peer, f in node.faces.items()
                                if f is not None}
            status["labels"].update({str(p.face): p.name for p in self.sims
                                     if p.node == name and p.face is not None})
            (traces / f"{name}-status.json").write_text(json.dumps(status, indent=1))
        counters = self.net.counters()
        (traces / "sim-links.json").write_text(json.dumps(counters, indent=1))
        if self.sc.topology == "bottleneck":
            self.link_stats = {f"{c['from']}->{c['to']}": {
                "sent_packets": c["frames"], "sent_bytes": c["wire_bytes"],
                "drops": c["queue_full"]} for c in counters}

    def simulated(self) -> dict[str, Any]:
        events = self.loop.events
        return {"virtual_seconds": round(self.loop.time(), 6),
                "wall_seconds": round(self.wall, 3), "events": events,
                "events_per_second": round(events / self.wall) if self.wall else None,
                "seed": self.sc.sim.seed,
                "synthetic_gradients": self.sc.sim.synthetic_gradients,
                "forwarders": len(self.net.nodes), "links": len(self.net.links)}

    def summary_extra(self) -> dict:
        return {"simulated": self.simulated()}

    def run(self) -> int:
        root = logging.getLogger()
        old = (root.handlers[:], root.level)
        with clock.use(self.loop.time, 0.0):
            self.prepare()
            self._logs = _AppLogs(self.loop, self.run_dir / "logs" / "sim.log")
            root.handlers[:] = [self._logs]
            root.setLevel(logging.INFO)
            asyncio.set_event_loop(self.loop)
            try:
                return self._run()
            finally:
                root.handlers[:], _ = old
                root.setLevel(old[1])
                self._logs.close()
                asyncio.set_event_loop(None)
                self.loop.close()

    def _run(self) -> int:
        display = Progress(self.sc, self.run_dir, False)
        try:
            plan = self.plan()
            pss, workers = self.start(plan)
            self.supervise(pss, workers, display)
        except (ProcessFailed, RunFailed, ScenarioError, ConfigError) as e:
            self.stop_all()
            self.write_status()
            code = failed_run_exit(e) if not isinstance(e, ScenarioError) else 2
            print(f"\nsimulated run failed: {e}{self.unplanned_text()}", file=sys.stderr)
            self._write_summary(ok=False, error=str(e))
            return code
        self.stop_all()
        self.write_status()
        code = self.finish(display)
        sim = self.simulated()
        print(f"simulated {sim['virtual_seconds']:.3f} s in {sim['wall_seconds']:.1f} s of wall "
              f"time: {sim['events']} events, {sim['events_per_second']} a second")
        return code

    def shutdown(self) -> None:
        """Nothing outlives a simulated run: no process, socket or namespace."""


__all__ = ["SimRunner", "SimProcess", "check_simulable"]
