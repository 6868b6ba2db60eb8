"""[faults]: its table read (kills at a version of the PS, explicit or drawn from a seed), and
the kills and restarts during a run, with the restarts that unplanned exits get. Every action
goes into summary.json (`faults`, or the unplanned exit's record)."""
from __future__ import annotations

import random
import time
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from .config import Kill
from .exitcodes import RunFailed
from .metrics import read_metrics
from .process import READY_TIMEOUT, ManagedProcess, unix_socket_accepts, wait_until
from .values import ScenarioError, known_keys, number

if TYPE_CHECKING:
    from .config import Scenario
    from .progress import Progress

KILL_KEYS = {"worker", "ps", "forwarder", "at_version", "restart_after"}
RANDOM_KEYS = {"kills", "seed", "from_version", "to_version", "restart_after"}


def _restart_after(entry: dict, where: str) -> float | None:
    if "restart_after" not in entry:
        return None
    return number(entry["restart_after"], f"{where}.restart_after", 0.0)


def parse_faults(table: dict, sc: "Scenario", forwarders: list[str]) -> list[Kill]:
    """[faults]: explicit kills, plus `random` ones drawn from a seed (the same every run);
    `forwarders`: the topology's, which a kill may name."""
    kills = []
    entries = table.get("kill", [])
    if not isinstance(entries, list):
        raise ScenarioError("faults.kill: expected an array of tables such as "
                            "[{ worker = \"w2\", at_version = 50 }]")
    for i, entry in enumerate(entries):
        where = f"faults.kill[{i}]"
        known_keys(entry, where, KILL_KEYS)
        targets = [k for k in ("worker", "ps", "forwarder") if k in entry]
        if len(targets) != 1:
            raise ScenarioError(f"{where}.worker: name exactly one of worker = \"w2\", "
                                f"ps = true, forwarder = \"fwd\"")
        if "at_version" not in entry:
            raise ScenarioError(f"{where}.at_version: missing")
        version = number(entry["at_version"], f"{where}.at_version", 1, integer=True)
        after = _restart_after(entry, where)
        if "ps" in entry and sc.training.peers.collective:
            raise ScenarioError(f"{where}.ps: PS-less training has no PS")
        if "worker" in entry and after is not None and sc.training.peers.collective:
            raise ScenarioError(f"{where}.restart_after: a killed peer does not rejoin a "
                                "PS-less training (the others stop)")
        if "ps" in entry:
            if entry["ps"] is not True:
                raise ScenarioError(f"{where}.ps: expected true, got {entry['ps']!r}")
            if after is None:
                raise ScenarioError(f"{where}.restart_after: needed for the PS (the run "
                                    f"cannot finish without it)")
            kills.append(Kill(sc.training.who.ps, version, after, "ps"))
            continue
        if "forwarder" in entry:
            fwd = entry["forwarder"]
            known = forwarders
            if fwd not in known:
                raise ScenarioError(f"{where}.forwarder: no such forwarder {fwd!r} "
                                    f"(forwarders: {', '.join(known)})")
            if after is None:
                raise ScenarioError(f"{where}.restart_after: needed for a forwarder")
            kills.append(Kill(fwd, version, after, "forwarder"))
            continue
        worker = entry["worker"]
        if worker not in sc.training.who.workers:
            raise ScenarioError(f"{where}.worker: no such worker {worker!r} "
                                f"(workers: {', '.join(sc.training.who.workers)})")
        kills.append(Kill(worker, version, after))
    rnd = table.get("random")
    if rnd is not None:
        if not isinstance(rnd, dict):
            raise ScenarioError("faults.random: expected a table such as { kills = 2, seed = 1 }")
        known_keys(rnd, "faults.random", RANDOM_KEYS)
        n = number(rnd.get("kills", 1), "faults.random.kills", 0, 64, True)
        seed = number(rnd.get("seed", 0), "faults.random.seed", 0, integer=True)
        low = number(rnd.get("from_version", 10), "faults.random.from_version", 1, integer=True)
        high = number(rnd.get("to_version", 100), "faults.random.to_version", 1, integer=True)
        if high < low:
            raise ScenarioError(f"faults.random.to_version: {high} < from_version {low}")
        after = _restart_after(rnd, "faults.random")
        if after is not None and sc.training.peers.collective:
            raise ScenarioError("faults.random.restart_after: a killed peer does not rejoin a "
                                "PS-less training (the others stop)")
        rng = random.Random(seed)
        for _ in range(n):
            kills.append(Kill(rng.choice(sc.training.who.workers), rng.randint(low, high), after))
    return sorted(kills, key=lambda k: k.at_version)


# ---- during the run ----------------------------------------------------------------------------

class FaultTarget(Protocol):
    """What the faults need of the runner: its processes, how they were started, and the
    forwarders' aggregation to configure again after a restart."""
    sc: "Scenario"
    run_dir: Path
    faults: list[dict]
    sockets: dict[str, str]
    forwarder_procs: dict[str, ManagedProcess]
    forwarder_argv: dict[str, list[str]]
    worker_launch: dict[str, tuple[list[str], dict[str, str]]]
    ps_launch: dict[str, tuple[list[str], dict[str, str]]]

    def spawn(self, name: str, argv: list[str],
              env: dict[str, str] | None = None) -> ManagedProcess: ...

    def aggregators(self) -> list[str]: ...

    def configure_aggregator(self, name: str) -> None: ...


class Faults:
    """[faults] during a run — SIGKILL a node once the PS's metrics reach a version, restart it
    (same name, same argv; a worker's metrics appended to the same file) some seconds later —
    and the restarts that unplanned exits get. Every action goes into summary.json (`faults`,
    or the unplanned exit's record)."""

    def __init__(self, runner: "FaultTarget", workers: dict[str, ManagedProcess],
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
            proc = self.workers[name] = runner.spawn(f"{name}-r{n}", argv, env)
            self.restarted.add(proc)
        elif role == "ps":
            argv, env = runner.ps_launch[name]
            proc = self.pss[name] = runner.spawn(f"{name}-r{n}", argv, env)
        else:
            sock = runner.sockets[name]
            # the new process truncates its trace files: keep the killed one's as
            # traces/<name>-r<n-1>-*.tsv (r0: the first process)
            traces = runner.run_dir / "traces"
            for kind in ("rates", "tables"):
                if (traces / f"{name}-{kind}.tsv").exists():
                    (traces / f"{name}-{kind}.tsv").rename(traces / f"{name}-r{n - 1}-{kind}.tsv")
            proc = runner.spawn(f"fwd-{name}-r{n}", runner.forwarder_argv[name])
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
