"""A scenario: topology, link conditions, forwarder tables, per-worker quirks, run limits and
the training itself, read from TOML (scenarios/*.toml), with `--set key=value` overrides.

    description = "..."
    [topology]   kind = "star" | "tree" | "bottleneck"; workers = 4; leaves = 2 (tree);
                 bottleneck: two network namespaces (the PS and its forwarder; the workers and
                 theirs) joined by one veth limited by the kernel's tbf qdisc both ways;
                 file = "x.conf": a Mini-NDN topology file (kind "minindn", the path relative
                 to the scenario file), every node a forwarder, each link's bw/delay/loss its
                 own; ps_node = "a" (default: its first node), worker_nodes = ["b", ...]
                 (default: the others; worker i on the i-th, round robin); workers defaults
                 to as many as worker_nodes (ndnps/lab/minindn.py)
    [bottleneck] rate_mbps = 100.0; queue_bytes = 1048576 (tbf limit: the kernel queue);
                 burst_bytes = 16384 (tbf burst): that link; mtu: links.mtu (the same, or
                 left out)
    [links]      loss, delay_ms, jitter_ms, rate_mbps: every link (apps' and forwarders');
                 queue_bytes: with --netns, the tbf queue rate_mbps gets on every veth;
                 mtu = 1500 (604 to 9000, jumbo frames as training clusters run them): with
                 --netns every veth's MTU, and the forwarders' UDP faces send datagrams up to
                 it (less the IPv4 and UDP headers; at most an NDN packet, 8800 octets), so
                 9000 carries every packet unfragmented; locally the forwarders' faces are on
                 loopback (8800-octet datagrams whatever mtu says) and the apps' unix sockets;
                 reliability = true: NDNLPv2 link reliability on every link (the default
                 when a link is lossy; false turns it off) — both ends of
                 each forwarder-to-forwarder face, and every app's face (locally, where the
                 apps' faces carry the link conditions; in netns mode an app's face is its
                 host's lossless unix socket, and it does not ask); app_faces = false: the
                 apps' faces carry neither (tree only: the forwarders' links alone are lossy)
    [[link]]     from = "root", to = "leaf1", loss = 0.1 ...: one direction of one
                 forwarder-to-forwarder link (tree), replacing [links] there
    [forwarder]  forwarder table limits, e.g. ppit_lifetime = 60.0 (forwarder/config.py)
    [workers]    slowdown = { w4 = 3.0 }   compute time multiplied (stragglers)
    [run]        timeout = 300; trace_interval = 0.5; on_child_exit = "continue" | "fail";
                 restart_after = 1.0; max_restarts = 3: what the runner does when a child
                 dies without being asked to (see ndnps/lab/scenario.py, "Unplanned exits");
                 system = "ndnps" | "tcp": what trains (tcp: bench/tcp_ps.py, the plain TCP
                 PS, over the bottleneck's link: same hosts, tbf, model, workers, versions)
    [netns]      enabled = false (true with the bottleneck topology); netem = true
    [faults]     kill = [{ worker = "w2", at_version = 50, restart_after = 2.0 }]: SIGKILL a
                 worker once the PS reaches that version, optionally restart it (same name)
                 that many seconds later; { ps = true, ... } kills the PS (restarted from its
                 checkpoint: training.checkpoint defaults to the run directory's); {
                 forwarder = "fwd", ... } a forwarder (restarted on the same socket); random = { kills = 3, seed = 1, from_version = 20,
                 to_version = 200, restart_after = 2.0 } adds kills drawn from the seed
    [training]   everything `python -m apps.ps --help` lists (ndnps/protocol/config.py)
    [[device_kinds]], [pipeline]
                 pipeline + data parallel on devices of different speeds: see
                 ndnps/lab/pipeline.py
    [[jobs]]     several trainings at once, sharing the topology (e.g. two PSs and their
                 workers over one bottleneck): each entry holds [training] keys that replace
                 [training]'s for that job; `ps` names it (default "ps<k>"), `workers` is a
                 list of names or a count (default topology.workers; names "<ps>-w<i>").
                 Every PS and worker name is the scenario's only one; PSs run where the
                 topology puts its PS, workers where it puts workers. No [faults] with several
                 jobs (faults are triggered by one PS's versions).

Every error names the offending key; nothing starts until the whole scenario is valid.
"""
from __future__ import annotations

import copy
import math
import random
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from forwarder.faces.udp import MIN_MTU
from forwarder.pipelines import Limits
from ndnps.ndn.tlv import MAX_PACKET_SIZE

from ndnps.protocol import config as training_config
from ndnps.protocol.config import TrainingConfig

SCENARIO_DIR = Path(__file__).resolve().parents[2] / "scenarios"

# The default experiment, embedded so the main job runs wherever the package is installed.
DEFAULT_SYNC_SGD = """\
description = "Sync SGD: one forwarder, the PS and 4 workers, digits MLP"

[topology]
kind = "star"
workers = 4

[training]
mode = "sync"
model = "mlp"
hidden = [64]
dataset = "digits"
epochs = 20
batch = 32
lr = 0.1
key = "sync-sgd-demo-key"
"""


class ScenarioError(ValueError):
    """A bad scenario; the message starts with the offending key."""


@dataclass
class Links:
    loss: float = 0.0
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    rate_mbps: float = 0.0
    reliability: bool = False      # NDNLPv2 link reliability on every link (see above)
    # false: the apps' faces are plain local sockets (no conditions, no link reliability), the
    # forwarder-to-forwarder links alone are emulated — where NFD puts lossy links and NDNLPv2
    app_faces: bool = True
    # --netns with rate_mbps: the tbf queue of every veth end, bytes (0: [bottleneck]'s)
    queue_bytes: float = 0.0
    # --netns: every veth's MTU, and so the longest datagram of the forwarders' UDP faces
    mtu: int = 1500

    def as_table(self) -> dict[str, float]:
        """The link emulation, as the forwarder's face options take it."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in _FLAGS + _KERNEL and getattr(self, f.name)}


_FLAGS = ("reliability", "app_faces")     # Links fields that are switches, not conditions
_KERNEL = ("queue_bytes", "mtu")          # ... that only the kernel (qdisc, veth) takes
_EVERY_LINK = _FLAGS + ("mtu",)           # ... that both ends of every link need alike

TOPOLOGIES = ("star", "tree", "bottleneck", "fat-tree", "bcube", "minindn")
SYSTEMS = ("ndnps", "tcp")
# the bottleneck topology's two hosts (network namespaces), each with its forwarder
BOTTLENECK_PS_HOST, BOTTLENECK_WORKERS_HOST = "ps-host", "workers-host"
ETHERNET_HEADER = 14          # bytes a frame adds to the MTU on the veth (what tbf counts)
IP_UDP_HEADERS = 20 + 8       # IPv4 and UDP: a datagram's payload is the MTU less these
# links.mtu: a UDP face's datagrams must hold the forwarder's smallest (576); jumbo frames
MTU_MIN, MTU_MAX = MIN_MTU + IP_UDP_HEADERS, 9000


def udp_face_mtu(link_mtu: int) -> int:
    """The longest datagram a forwarder's UDP face over a link of `link_mtu` sends: the MTU
    less the IPv4 and UDP headers, at most the longest NDN packet (as NFD caps its UDP faces'
    MTU), so that no datagram is split by IP."""
    return min(link_mtu - IP_UDP_HEADERS, MAX_PACKET_SIZE)


@dataclass
class Bottleneck:
    """The one link of the bottleneck topology: a veth whose two ends are each limited by
    the kernel's tbf qdisc (`tc qdisc add dev X root tbf rate R burst B limit L`)."""
    rate_mbps: float = 100.0
    queue_bytes: int = 1 << 20     # tbf `limit`: bytes queued in the kernel, then dropped
    burst_bytes: int = 16384       # tbf `burst`: the token bucket's depth
    mtu: int = 1500                # the veth's MTU, both ends: links.mtu

    @property
    def rate_bytes_per_s(self) -> float:
        return self.rate_mbps * 1e6 / 8


@dataclass
class Scenario:
    name: str
    description: str = ""
    topology: str = "star"
    workers: int = 4
    leaves: int = 2
    # [topology] k: a fat-tree's arity (default 4), a BCube's levels (default 2); n: a BCube's
    # switch ports (ndnps.lab.fabric)
    k: int = 0
    n: int = 2
    links: Links = field(default_factory=Links)
    link_overrides: dict[tuple[str, str], Links] = field(default_factory=dict)
    forwarder: dict[str, Any] = field(default_factory=dict)
    slowdown: dict[str, float] = field(default_factory=dict)
    timeout: float = 300.0
    trace_interval: float = 0.5
    # a child that dies unasked: "continue" records it and lets the job's policy decide (a
    # forwarder, or a PS that checkpoints, restarted after restart_after, at most
    # max_restarts times each); "fail" fails the run at once
    on_child_exit: str = "continue"
    restart_after: float = 1.0
    max_restarts: int = 3
    netns: bool = False
    netem: bool = True
    bottleneck: Bottleneck = field(default_factory=Bottleneck)
    system: str = "ndnps"          # [run] system: what trains over the topology
    training: TrainingConfig = field(default_factory=TrainingConfig)
    # every training of the run: [training] alone, or one per [[jobs]] entry (training is
    # then the first)
    jobs: list[TrainingConfig] = field(default_factory=list)
    kills: list["Kill"] = field(default_factory=list)    # [faults], by version
    ina: Any = None                # [ina]: in-network aggregation (ndnps.lab.ina.Ina), or None
    share: Any = None              # [share]: jobs sharing an aggregator (ndnps.lab.share.Share)
    # [[device_kinds]] and [pipeline]: pipeline + data parallel (ndnps.lab.pipeline.Pipeline)
    pipeline: Any = None
    job_start: dict[str, float] = field(default_factory=dict)   # [[jobs]] start, by job (ps)
    # [topology] file (kind "minindn"): the file's network (ndnps.placement.network.Network),
    # the node every job's PS runs on, the nodes the workers take in turn
    network: Any = None
    ps_node: str = ""
    worker_nodes: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)    # the document as run

    @property
    def worker_names(self) -> list[str]:
        """Every job's workers, job by job."""
        return [w for job in self.all_jobs for w in job.workers]

    @property
    def all_jobs(self) -> list[TrainingConfig]:
        return self.jobs or [self.training]

    def job_of(self, app: str) -> TrainingConfig:
        """The job whose PS or worker `app` is."""
        return next(j for j in self.all_jobs if app == j.ps or app in j.workers)


@dataclass(frozen=True)
class Kill:
    """SIGKILL `worker` (role "worker"; or the PS, role "ps"; or forwarder `worker`, role
    "forwarder") once the PS's metrics show `at_version`; restart it (same name and argv)
    `restart_after` seconds later (None: never)."""
    worker: str
    at_version: int
    restart_after: float | None = None
    role: str = "worker"


_TOP = {"description", "topology", "links", "link", "forwarder", "workers", "run", "netns",
        "training", "faults", "bottleneck", "jobs", "ina", "share", "device_kinds", "pipeline"}
_TABLE_KEYS = {
    "topology": {"kind", "workers", "leaves", "k", "n", "file", "ps_node", "worker_nodes"},
    "links": {f.name for f in fields(Links)},
    "workers": {"slowdown"},
    "run": {"timeout", "trace_interval", "on_child_exit", "restart_after", "max_restarts",
            "system"},
    "netns": {"enabled", "netem"},
    "bottleneck": {f.name for f in fields(Bottleneck)},
    "faults": {"kill", "random"},
}
_KILL_KEYS = {"worker", "ps", "forwarder", "at_version", "restart_after"}
_RANDOM_KEYS = {"kills", "seed", "from_version", "to_version", "restart_after"}


def _number(value: Any, key: str, low: float = 0.0, high: float | None = None,
            integer: bool = False) -> Any:
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if not ok or isinstance(value, bool):
        raise ScenarioError(f"{key}: expected {'an integer' if integer else 'a number'}, "
                            f"got {value!r}")
    if not math.isfinite(value):        # TOML's nan and inf would slip past every bound
        raise ScenarioError(f"{key}: expected a finite number, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"within [{low}, {high}]"
        raise ScenarioError(f"{key}: must be {bound}, got {value!r}")
    return value if integer else float(value)


def parse(doc: dict[str, Any], name: str, base: Path | None = None) -> Scenario:
    """The scenario `doc` (TOML, overrides applied); `base`: the directory a relative
    topology.file is in (default: the current one)."""
    for key in doc:
        if key not in _TOP:
            raise ScenarioError(f"{key}: unknown key (known: {', '.join(sorted(_TOP))})")
    for table, allowed in _TABLE_KEYS.items():
        value = doc.get(table, {})
        if not isinstance(value, dict):
            raise ScenarioError(f"{table}: expected a table")
        for key in value:
            if key not in allowed:
                raise ScenarioError(f"{table}.{key}: unknown key "
                                    f"(known: {', '.join(sorted(allowed))})")
    sc = Scenario(name=name, raw=copy.deepcopy(doc))
    sc.description = str(doc.get("description", ""))

    topo = doc.get("topology", {})
    sc.topology = topo.get("kind", "minindn" if "file" in topo else sc.topology)
    if sc.topology not in TOPOLOGIES:
        raise ScenarioError(f"topology.kind: must be one of {', '.join(TOPOLOGIES)}, got "
                            f"{sc.topology!r}")
    if sc.topology == "minindn" or "file" in topo:
        _file_topology(topo, sc, base)
    else:
        for key in ("ps_node", "worker_nodes"):
            if key in topo:
                raise ScenarioError(f"topology.{key}: names a node of topology.file (a "
                                    "Mini-NDN topology), which this scenario has not")
    named = doc.get("training", {}).get("workers") if isinstance(doc.get("training"), dict) \
        else None
    # a file's default: a worker per worker node, or per name training.workers gives
    default = (len(named) if isinstance(named, list) and named else len(sc.worker_nodes)) \
        if sc.topology == "minindn" else sc.workers
    sc.workers = _number(topo.get("workers", default), "topology.workers", 1, 64, True)
    sc.leaves = _number(topo.get("leaves", sc.leaves), "topology.leaves", 1, 16, True)
    sc.k = _number(topo.get("k", 2 if sc.topology == "bcube" else 4), "topology.k",
                   1 if sc.topology == "bcube" else 2, 8, True)
    sc.n = _number(topo.get("n", sc.n), "topology.n", 2, 8, True)
    if sc.topology == "fat-tree" and sc.k % 2:
        raise ScenarioError(f"topology.k: a fat-tree's k must be even, got {sc.k}")

    sc.links = _links_from(doc.get("links", {}), "links")

    sc.link_overrides = _link_overrides(doc.get("link", []), sc)
    if "reliability" not in doc.get("links", {}):
        # lossy links get NDNLPv2 link reliability unless told otherwise: per hop it repairs
        # each loss in a link round trip, where end to end it costs a round trip of the whole
        # path (bench loss: at 10 and 20 % on every link, x1.5 and x2.1 of lossless against
        # x2.0 and x3.7 end to end); on lossless links it would only cost (x1.1-1.2)
        sc.links.reliability = sc.links.loss > 0 or any(
            o.loss > 0 for o in sc.link_overrides.values()) or (
            sc.network is not None and any(link.loss for link in sc.network.links))

    fwd = doc.get("forwarder", {})
    if not isinstance(fwd, dict):
        raise ScenarioError("forwarder: expected a table")
    limit_fields = {f.name for f in fields(Limits)}
    for key, value in fwd.items():
        if key not in limit_fields:
            raise ScenarioError(f"forwarder.{key}: unknown key (known: "
                                f"{', '.join(sorted(limit_fields))})")
        _number(value, f"forwarder.{key}")
    sc.forwarder = dict(fwd)

    run = doc.get("run", {})
    sc.timeout = _number(run.get("timeout", sc.timeout), "run.timeout", 1.0)
    sc.trace_interval = _number(run.get("trace_interval", sc.trace_interval),
                                "run.trace_interval", 0.05)
    sc.on_child_exit = run.get("on_child_exit", sc.on_child_exit)
    if sc.on_child_exit not in ("continue", "fail"):
        raise ScenarioError(f"run.on_child_exit: must be \"continue\" or \"fail\", got "
                            f"{sc.on_child_exit!r}")
    sc.restart_after = _number(run.get("restart_after", sc.restart_after), "run.restart_after",
                               0.0, 60.0)
    sc.max_restarts = _number(run.get("max_restarts", sc.max_restarts), "run.max_restarts", 0,
                              100, True)

    ns = doc.get("netns", {})
    for key in ("enabled", "netem"):
        if key in ns and not isinstance(ns[key], bool):
            raise ScenarioError(f"netns.{key}: expected true or false, got {ns[key]!r}")
    sc.netns = ns.get("enabled", False)
    sc.netem = ns.get("netem", True)
    sc.bottleneck = _bottleneck(doc.get("bottleneck", {}), sc, ns, doc.get("links", {}))
    if sc.links.queue_bytes and sc.links.queue_bytes < sc.links.mtu + ETHERNET_HEADER:
        raise ScenarioError(f"links.queue_bytes: {sc.links.queue_bytes:g} cannot hold one "
                            f"full-size frame ({sc.links.mtu + ETHERNET_HEADER} octets at "
                            f"links.mtu = {sc.links.mtu})")

    if not isinstance(doc.get("training", {}), dict):
        raise ScenarioError("training: expected a table")
    training = dict(doc.get("training", {}))
    training.setdefault("workers", [f"w{i + 1}" for i in range(sc.workers)])
    # the PS's own default: a job goes on while a worker lives, its on_worker_loss deciding
    # how (every worker is still asked at the start); min_workers = N fails at the first loss
    training.setdefault("min_workers", 1)
    if "pipeline" in doc or "device_kinds" in doc:
        from . import pipeline
        if "workers" in doc.get("training", {}):
            raise ScenarioError("training.workers: a pipeline names its stage apps "
                                "m<j>-<kind> itself")
        sc.pipeline = pipeline.parse(doc, sc)
        training = pipeline.training_table(sc.pipeline, training)
        sc.workers = len(training["workers"])
    if training.get("collective"):
        _peer_defaults(training, sc)
    shared: dict[str, Any] = {}
    if "share" in doc:                  # every job aggregates at [share]'s forwarder
        from . import share
        shared = share.defaults(doc["share"], sc)
        if "jobs" not in doc:
            training = {**shared, **training}
    try:
        sc.training = training_config.from_table(training)
    except training_config.ConfigError as e:
        raise ScenarioError(str(e)) from None
    if len(sc.training.workers) != sc.workers and "workers" in doc.get("training", {}):
        raise ScenarioError(f"training.workers: {len(sc.training.workers)} names for "
                            f"topology.workers = {sc.workers}")
    if "jobs" in doc:
        sc.jobs = _jobs(doc["jobs"], {**shared, **doc.get("training", {})}, sc.workers,
                        sc.job_start)
        sc.training = sc.jobs[0]

    slow = doc.get("workers", {}).get("slowdown", {})
    if not isinstance(slow, dict):
        raise ScenarioError("workers.slowdown: expected a table such as { w4 = 3.0 }")
    for worker, factor in slow.items():
        if worker not in sc.worker_names:
            raise ScenarioError(f"workers.slowdown.{worker}: no such worker "
                                f"(workers: {', '.join(sc.worker_names)})")
        sc.slowdown[worker] = _number(factor, f"workers.slowdown.{worker}", 1.0)
    if doc.get("faults") and len(sc.all_jobs) > 1:
        raise ScenarioError("faults: not with several [[jobs]] (a fault waits for one PS's "
                            "version)")
    sc.kills = _faults(doc.get("faults", {}), sc)
    sc.system = run.get("system", sc.system)
    if sc.system not in SYSTEMS:
        raise ScenarioError(f"run.system: must be one of {', '.join(SYSTEMS)}, got "
                            f"{sc.system!r}")
    if sc.system == "tcp":
        _check_tcp_baseline(sc, doc)
    if sc.topology in ("fat-tree", "bcube"):
        _check_fabric(sc)
    if sc.topology == "minindn":
        _check_file_apps(sc, doc)
    if "share" in doc:                  # before the peers' checks: it may change their jobs
        if "ina" in doc:
            raise ScenarioError("ina: not with [share] (it names the one aggregator the jobs "
                                "share)")
        from . import share
        sc.share = share.parse(doc["share"], sc)
        share.apply(sc.share, sc)
    if any(job.collective for job in sc.all_jobs):
        _check_peers(sc, doc)
    if "ina" in doc:
        from . import ina
        sc.ina = ina.parse(doc["ina"], sc)
    return sc


def _file_topology(topo: dict[str, Any], sc: Scenario, base: Path | None) -> None:
    """[topology] file (kind "minindn"): the Mini-NDN file read (every error names its line
    and key), and the nodes the PS and the workers run on."""
    from ndnps.placement.network import TopologyError, read_minindn
    if sc.topology != "minindn":
        raise ScenarioError(f"topology.kind: a topology file is kind = \"minindn\" (or leave "
                            f"kind out), got {sc.topology!r}")
    file = topo.get("file")
    if not isinstance(file, str) or not file:
        raise ScenarioError(f"topology.file: expected the path of a Mini-NDN topology file, "
                            f"got {file!r}")
    path = Path(file).expanduser()
    if not path.is_absolute():
        path = (base or Path.cwd()) / path
    if not path.is_file():
        raise ScenarioError(f"topology.file: {path}: no such file")
    try:
        net = read_minindn(path)
    except TopologyError as e:
        raise ScenarioError(f"topology.file: {e}") from None
    sc.network = net
    sc.raw["topology"]["file"] = str(path.resolve())      # the run's copy finds it anywhere

    def node(value: Any, key: str) -> str:
        if not isinstance(value, str):
            raise ScenarioError(f"{key}: expected a node's name, got {value!r}")
        try:
            name = net.node(value)
        except TopologyError as e:
            raise ScenarioError(f"{key}: {e} (nodes: {', '.join(net.switches)})") from None
        if name not in net.switches:
            raise ScenarioError(f"{key}: {name!r} is one of the file's [switches], which "
                                "forward only; apps run on [nodes]")
        return name

    sc.ps_node = node(topo.get("ps_node", net.switches[0]), "topology.ps_node")
    others = [n for n in net.switches if n != sc.ps_node] or [sc.ps_node]
    names = topo.get("worker_nodes", others)
    if not isinstance(names, list) or not names:
        raise ScenarioError(f"topology.worker_nodes: expected a list of nodes, got {names!r}")
    sc.worker_nodes = [node(n, f"topology.worker_nodes[{i}]") for i, n in enumerate(names)]
    if len(set(sc.worker_nodes)) != len(sc.worker_nodes):
        raise ScenarioError(f"topology.worker_nodes: a node named twice in {names}")
    for i, n in enumerate(sc.worker_nodes):
        try:
            net.path(n, sc.ps_node)
        except TopologyError:
            raise ScenarioError(f"topology.worker_nodes[{i}]: no path from {n!r} to the PS's "
                                f"node {sc.ps_node!r}") from None


def _check_file_apps(sc: Scenario, doc: dict[str, Any]) -> None:
    """What a topology file's scenario cannot do: the apps' names must not be nodes' (both
    are routed by name), PS-less training is not built on it, the links are the file's."""
    nodes = set(sc.network.nodes)
    for job in sc.all_jobs:
        for key, app in [("ps", job.ps)] + [("workers", w) for w in job.workers]:
            if app in nodes:
                raise ScenarioError(f"training.{key}: {app!r} is also a node of topology.file "
                                    "(the routes to the app and to the node would clash): "
                                    "name the app otherwise")
        if job.collective:
            raise ScenarioError("training.collective: PS-less training on a topology file is "
                                "not built (a PS and its workers are)")
    if doc.get("links", {}).get("app_faces") is True:
        raise ScenarioError("links.app_faces: on a topology file every app uses its node's "
                            "forwarder over its local socket, as in Mini-NDN: no link to "
                            "emulate there")
    sc.links.app_faces = False


def _check_fabric(sc: Scenario) -> None:
    from .fabric import hosts
    pss = sum(1 for job in sc.all_jobs if not job.collective)
    # a BCube's PS may share the first host with a worker (ndnps.lab.fabric.bcube_apps)
    apps = len(sc.worker_names) + (0 if sc.topology == "bcube" and pss == 1 else pss)
    if apps > hosts(sc):
        raise ScenarioError(f"topology.workers: this {sc.topology} has {hosts(sc)} hosts, the "
                            f"run needs {apps}")
    if sc.netns and sc.topology == "fat-tree":
        raise ScenarioError("topology.kind: a fat-tree runs locally (its forwarders on "
                            "127.0.0.1), not with --netns")


def _peer_defaults(training: dict[str, Any], sc: Scenario) -> None:
    """A PS-less job's defaults from the topology: a BCube fabric's n; on a star, the
    forwarder every peer shares aggregates (collective = "ina")."""
    if training.get("collective") == "bcube" and sc.topology == "bcube":
        training.setdefault("bcube_n", sc.n)
    if training.get("collective") == "ina" and sc.topology in ("star", "bcube"):
        # the forwarder every peer shares; on a BCube the first host's (docs/collectives.md)
        training.setdefault("aggregate_at", "fwd" if sc.topology == "star" else "p0")


def _check_peers(sc: Scenario, doc: dict[str, Any]) -> None:
    """What a PS-less training (training.collective) cannot do."""
    for t in sc.all_jobs:
        if t.collective:
            _check_peer_job(sc, doc, t)


def _check_peer_job(sc: Scenario, doc: dict[str, Any], t: TrainingConfig) -> None:
    if sc.jobs and t.collective == "bcube":
        raise ScenarioError("jobs: a BCube's peers fill the fabric: one job")
    if sc.system != "ndnps":
        raise ScenarioError("run.system: the TCP baseline trains with a PS, not "
                            "training.collective")
    if sc.topology == "bottleneck":
        raise ScenarioError("topology.kind: the bottleneck has one host for every worker; "
                            "PS-less training needs a host per peer (star, tree, bcube)")
    if t.collective == "bcube" and sc.topology == "bcube" and \
            (t.bcube_n, t.bcube_levels()) != (sc.n, sc.k):
        raise ScenarioError(f"training.bcube_n: the peers form BCube({t.bcube_n}, "
                            f"{t.bcube_levels()}), the topology is BCube({sc.n}, {sc.k})")
    if t.collective == "ina" and t.aggregate_at not in router_names(sc):
        raise ScenarioError(f"training.aggregate_at: {t.aggregate_at!r} is not one of the "
                            f"topology's forwarders ({', '.join(router_names(sc))})")
    if "ina" in doc:
        raise ScenarioError("ina: places aggregators for a PS; PS-less training with "
                            "collective = \"ina\" aggregates at training.aggregate_at")
    if sc.slowdown:
        raise ScenarioError("workers.slowdown: not with PS-less training (peers run in step)")


def _jobs(entries: Any, base: dict[str, Any], default_workers: int,
          starts: dict[str, float]) -> list[TrainingConfig]:
    """[[jobs]]: one training per entry, [training] with the entry's keys replacing its own;
    an entry's `start` (s after the run's start: its apps wait so long) into `starts`."""
    if not isinstance(entries, list) or not entries or \
            not all(isinstance(e, dict) for e in entries):
        raise ScenarioError("jobs: expected an array of tables ([[jobs]] entries)")
    jobs: list[TrainingConfig] = []
    seen: dict[str, str] = {}                  # app name -> the key that named it first
    for i, entry in enumerate(entries):
        where = f"jobs[{i}]"
        entry = dict(entry)
        start = entry.pop("start", 0.0)
        table = {"min_workers": 1, **base, **entry, "ps": entry.get("ps", f"ps{i + 1}")}
        if start:
            starts[table["ps"]] = _number(start, f"{where}.start", 0.0, 3600.0)
        workers = entry.get("workers", default_workers)
        if isinstance(workers, int) and not isinstance(workers, bool):
            _number(workers, f"{where}.workers", 1, 64, True)
            table["workers"] = [f"{table['ps']}-w{k + 1}" for k in range(workers)]
        try:
            job = training_config.from_table(table)
        except training_config.ConfigError as e:
            raise ScenarioError(f"{where}.{str(e).removeprefix('training.')}") from None
        for key, name in [("ps", job.ps)] + [("workers", w) for w in job.workers]:
            if name in seen:
                raise ScenarioError(f"{where}.{key}: {name!r} is already {seen[name]}")
            seen[name] = f"{where}'s" if key == "ps" else f"a worker of {where}"
        jobs.append(job)
    return jobs


def _bottleneck(table: dict, sc: Scenario, ns: dict, links: dict) -> Bottleneck:
    """[bottleneck], for topology.kind = "bottleneck" only, which always runs in network
    namespaces (sc.netns is set); `links` is the scenario's [links] as written."""
    if sc.topology != "bottleneck":
        if table:
            raise ScenarioError("bottleneck: applies to topology.kind = \"bottleneck\" only")
        return Bottleneck(mtu=sc.links.mtu)
    if ns.get("enabled") is False:
        raise ScenarioError("netns.enabled: topology.kind = \"bottleneck\" runs in network "
                            "namespaces (two hosts joined by one veth); it cannot be false")
    sc.netns = True
    b = Bottleneck()
    b.rate_mbps = _number(table.get("rate_mbps", b.rate_mbps), "bottleneck.rate_mbps", 0.001,
                          100_000.0)
    b.mtu = sc.links.mtu
    if "mtu" in table:                  # the older key for the one link's MTU: links.mtu's
        mtu = _number(table["mtu"], "bottleneck.mtu", MTU_MIN, MTU_MAX, True)
        if "mtu" in links and mtu != sc.links.mtu:
            raise ScenarioError(f"bottleneck.mtu: {mtu} disagrees with links.mtu = "
                                f"{sc.links.mtu} (one MTU for the link: give links.mtu)")
        b.mtu = sc.links.mtu = mtu
    frame = b.mtu + ETHERNET_HEADER        # a full-size frame must fit the bucket and the queue
    b.burst_bytes = _number(table.get("burst_bytes", b.burst_bytes), "bottleneck.burst_bytes",
                            frame, 1 << 30, True)
    b.queue_bytes = _number(table.get("queue_bytes", b.queue_bytes), "bottleneck.queue_bytes",
                            frame, 1 << 30, True)
    return b


def _check_tcp_baseline(sc: Scenario, doc: dict[str, Any]) -> None:
    """run.system = "tcp": bench/tcp_ps.py trains instead of ndnps, on the bottleneck's two
    hosts: sync SGD of an MLP on the synthetic dataset, no forwarders (so no [links]
    conditions), no faults."""
    if sc.topology != "bottleneck":
        raise ScenarioError("run.system: \"tcp\" (the plain TCP PS baseline) runs over the "
                            "bottleneck topology only (topology.kind = \"bottleneck\")")
    for t in sc.all_jobs:
        for key, wanted in (("mode", "sync"), ("dataset", "synthetic"), ("model", "mlp")):
            if getattr(t, key) != wanted:
                raise ScenarioError(f"training.{key}: the TCP PS baseline (run.system = "
                                    f"\"tcp\") trains {key} = {wanted!r} only, got "
                                    f"{getattr(t, key)!r}")
    for key in doc.get("links", {}):
        if key in sc.links.as_table():
            raise ScenarioError(f"links.{key}: the TCP PS baseline (run.system = \"tcp\") has "
                                "no forwarders to emulate link conditions: the bottleneck's "
                                "tbf is its link")
    if sc.kills:
        raise ScenarioError("faults: the TCP PS baseline (run.system = \"tcp\") has no "
                            "fault handling")


def _restart_after(entry: dict, where: str) -> float | None:
    if "restart_after" not in entry:
        return None
    return _number(entry["restart_after"], f"{where}.restart_after", 0.0)


def _faults(table: dict, sc: Scenario) -> list[Kill]:
    """[faults]: explicit kills, plus `random` ones drawn from a seed (the same every run)."""
    kills = []
    entries = table.get("kill", [])
    if not isinstance(entries, list):
        raise ScenarioError("faults.kill: expected an array of tables such as "
                            "[{ worker = \"w2\", at_version = 50 }]")
    for i, entry in enumerate(entries):
        where = f"faults.kill[{i}]"
        if not isinstance(entry, dict):
            raise ScenarioError(f"{where}: expected a table")
        for key in entry:
            if key not in _KILL_KEYS:
                raise ScenarioError(f"{where}.{key}: unknown key (known: "
                                    f"{', '.join(sorted(_KILL_KEYS))})")
        targets = [k for k in ("worker", "ps", "forwarder") if k in entry]
        if len(targets) != 1:
            raise ScenarioError(f"{where}.worker: name exactly one of worker = \"w2\", "
                                f"ps = true, forwarder = \"fwd\"")
        if "at_version" not in entry:
            raise ScenarioError(f"{where}.at_version: missing")
        version = _number(entry["at_version"], f"{where}.at_version", 1, integer=True)
        after = _restart_after(entry, where)
        if "ps" in entry and sc.training.collective:
            raise ScenarioError(f"{where}.ps: PS-less training has no PS")
        if "worker" in entry and after is not None and sc.training.collective:
            raise ScenarioError(f"{where}.restart_after: a killed peer does not rejoin a "
                                "PS-less training (the others stop)")
        if "ps" in entry:
            if entry["ps"] is not True:
                raise ScenarioError(f"{where}.ps: expected true, got {entry['ps']!r}")
            if after is None:
                raise ScenarioError(f"{where}.restart_after: needed for the PS (the run "
                                    f"cannot finish without it)")
            kills.append(Kill(sc.training.ps, version, after, "ps"))
            continue
        if "forwarder" in entry:
            fwd = entry["forwarder"]
            known = router_names(sc)
            if fwd not in known:
                raise ScenarioError(f"{where}.forwarder: no such forwarder {fwd!r} "
                                    f"(forwarders: {', '.join(known)})")
            if after is None:
                raise ScenarioError(f"{where}.restart_after: needed for a forwarder")
            kills.append(Kill(fwd, version, after, "forwarder"))
            continue
        worker = entry["worker"]
        if worker not in sc.training.workers:
            raise ScenarioError(f"{where}.worker: no such worker {worker!r} "
                                f"(workers: {', '.join(sc.training.workers)})")
        kills.append(Kill(worker, version, after))
    rnd = table.get("random")
    if rnd is not None:
        if not isinstance(rnd, dict):
            raise ScenarioError("faults.random: expected a table such as { kills = 2, seed = 1 }")
        for key in rnd:
            if key not in _RANDOM_KEYS:
                raise ScenarioError(f"faults.random.{key}: unknown key (known: "
                                    f"{', '.join(sorted(_RANDOM_KEYS))})")
        n = _number(rnd.get("kills", 1), "faults.random.kills", 0, 64, True)
        seed = _number(rnd.get("seed", 0), "faults.random.seed", 0, integer=True)
        low = _number(rnd.get("from_version", 10), "faults.random.from_version", 1, integer=True)
        high = _number(rnd.get("to_version", 100), "faults.random.to_version", 1, integer=True)
        if high < low:
            raise ScenarioError(f"faults.random.to_version: {high} < from_version {low}")
        after = _restart_after(rnd, "faults.random")
        if after is not None and sc.training.collective:
            raise ScenarioError("faults.random.restart_after: a killed peer does not rejoin a "
                                "PS-less training (the others stop)")
        rng = random.Random(seed)
        for _ in range(n):
            kills.append(Kill(rng.choice(sc.training.workers), rng.randint(low, high), after))
    return sorted(kills, key=lambda k: k.at_version)


def router_names(sc: Scenario) -> list[str]:
    """The topology's forwarders that apps do not name (a netns run adds one per app host,
    except on the bottleneck, whose two hosts are these, and a topology file's nodes)."""
    if sc.topology == "minindn":
        return sc.network.switches + sc.network.relays
    if sc.topology == "star":
        return ["fwd"]
    if sc.topology == "bottleneck":
        return [BOTTLENECK_PS_HOST, BOTTLENECK_WORKERS_HOST]
    if sc.topology in ("fat-tree", "bcube"):
        from .fabric import forwarders
        return forwarders(sc)
    return ["root"] + [f"leaf{i + 1}" for i in range(sc.leaves)]


def check_local(sc: Scenario) -> None:
    """Refuse what a local run cannot do (a netns run can: every app has a host forwarder
    there, so even a star has forwarder-to-forwarder links)."""
    if not sc.links.app_faces and sc.topology == "star" and (sc.links.as_table()
                                                           or sc.links.reliability):
        raise ScenarioError("links.app_faces: false leaves a local star no link to emulate "
                            "(the apps' faces are its only links); use a tree, or --netns")


def _links_from(table: dict, where: str) -> Links:
    links = Links()
    for f in fields(Links):
        if f.name in _EVERY_LINK and f.name in table and where != "links":
            raise ScenarioError(f"{where}.{f.name}: one for every link ([links] {f.name} = "
                                "...), not for one direction of one (both ends of a link "
                                "need the same)")
        if f.name == "mtu":
            if f.name in table:
                links.mtu = _number(table["mtu"], f"{where}.mtu", MTU_MIN, MTU_MAX, True)
            continue
        if f.name in _FLAGS:
            if f.name in table:
                if not isinstance(table[f.name], bool):
                    raise ScenarioError(f"{where}.{f.name}: expected true or false, got "
                                        f"{table[f.name]!r}")
                setattr(links, f.name, table[f.name])
            continue
        if f.name in table:
            high = 1.0 if f.name == "loss" else None
            setattr(links, f.name, _number(table[f.name], f"{where}.{f.name}", 0.0, high))
    return links


def _link_overrides(entries: Any, sc: Scenario) -> dict[tuple[str, str], Links]:
    if not isinstance(entries, list):
        raise ScenarioError("link: expected an array of tables ([[link]])")
    leaves = {f"leaf{i + 1}" for i in range(sc.leaves)}
    out = {}
    for i, entry in enumerate(entries):
        where = f"link[{i}]"
        if not isinstance(entry, dict):
            raise ScenarioError(f"{where}: expected a table")
        allowed = {"from", "to"} | {f.name for f in fields(Links)}
        for key in entry:
            if key not in allowed:
                raise ScenarioError(f"{where}.{key}: unknown key (known: "
                                    f"{', '.join(sorted(allowed))})")
        ends = (entry.get("from"), entry.get("to"))
        if sc.topology != "tree" or not ({ends[0], ends[1]} <= leaves | {"root"} and
                                         "root" in ends and ends[0] != ends[1]):
            raise ScenarioError(f"{where}.from: ({ends[0]!r}, {ends[1]!r}) is not a "
                                f"forwarder-to-forwarder link (tree: root <-> leafN)")
        out[(str(ends[0]), str(ends[1]))] = _links_from(entry, where)
    return out


def apply_overrides(doc: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """`--set a.b=value`: the value is read as TOML (3, 0.5, true, [1,2], "x"), else a string."""
    doc = copy.deepcopy(doc)
    for item in overrides:
        if "=" not in item:
            raise ScenarioError(f"--set {item!r}: expected KEY=VALUE, e.g. training.epochs=3")
        key, text = item.split("=", 1)
        key = key.strip()
        try:
            value = tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            value = text
        parts = key.split(".")
        if not all(parts):
            raise ScenarioError(f"--set {item!r}: bad key {key!r}")
        node = doc
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ScenarioError(f"{key}: {part} is not a table")
            node = child
        node[parts[-1]] = value
    return doc


def builtin_names() -> list[str]:
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.toml")) if SCENARIO_DIR.is_dir() else []


def load(name_or_path: str | None, overrides: list[str] | None = None) -> Scenario:
    """A scenario by built-in name (scenarios/NAME.toml), by path, or the embedded default."""
    if name_or_path is None:
        name, text = "sync-sgd", DEFAULT_SYNC_SGD
    else:
        path = Path(name_or_path)
        if path.suffix != ".toml":
            path = SCENARIO_DIR / f"{name_or_path}.toml"
            if not path.exists():
                if name_or_path == "sync-sgd":
                    return load(None, overrides)
                raise ScenarioError(f"unknown scenario {name_or_path!r} (known: "
                                    f"{', '.join(builtin_names()) or 'none'}; or a .toml path)")
        try:
            text = path.read_text()
        except OSError as e:
            raise ScenarioError(f"cannot read {path}: {e.strerror}") from None
        name = path.stem
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{name}: {e}") from None
    # a relative topology.file: beside the scenario file, or where we are when --set gives it
    base = None if name_or_path is None else path.parent
    if any(item.split("=", 1)[0].strip() == "topology.file" for item in overrides or []):
        base = None
    return parse(apply_overrides(doc, overrides or []), name, base)
