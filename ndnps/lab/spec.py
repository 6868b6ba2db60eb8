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
                 to as many as worker_nodes (ndnps/lab/minindn.py); kind = "fat-tree"
                 (k = 4, even, up to 16), "leaf-spine" (spines = 2, leaves = 4,
                 hosts_per_leaf = 4) or "bcube" (n = 2, k = 2): ndnps/lab/fabric.py; workers
                 up to 64, or a fat-tree's or leaf-spine's hosts less the PS's
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
    [forwarder]  forwarder table limits, e.g. ppit_lifetime = 60.0 (ndnps/forwarder/config.py)
    [workers]    slowdown = { w4 = 3.0 }   compute time multiplied (stragglers)
    [run]        timeout = 300; trace_interval = 0.5; on_child_exit = "continue" | "fail";
                 restart_after = 1.0; max_restarts = 3: what the runner does when a child
                 dies without being asked to (see ndnps/lab/supervision.py, "Unplanned exits");
                 system = "ndnps" | "tcp": what trains (tcp: bench/tcp_ps.py, the plain TCP
                 PS, over the bottleneck's link: same hosts, tbf, model, workers, versions);
                 mode = "real" | "sim": processes on sockets, or every forwarder and app in
                 one process in virtual time (ndnps.sim; the same as --sim)
    [sim]        seed = 0 (the links' losses); synthetic_gradients = false (gradients of the
                 model's size, not computed): docs/simulation.md
    [netns]      enabled = false (true with the bottleneck topology); netem = true
    [faults]     kill = [{ worker = "w2", at_version = 50, restart_after = 2.0 }]: SIGKILL a
                 worker once the PS reaches that version, optionally restart it (same name)
                 that many seconds later; { ps = true, ... } kills the PS (restarted from its
                 checkpoint: training.checkpoint defaults to the run directory's); {
                 forwarder = "fwd", ... } a forwarder (restarted on the same socket); random = { kills = 3, seed = 1, from_version = 20,
                 to_version = 200, restart_after = 2.0 } adds kills drawn from the seed
    [training]   everything `python -m ndnps.apps.ps --help` lists (ndnps/protocol/config.py's
                 TrainingSpec, of the parts in ndnps/protocol/parts.py)
    [[device_kinds]], [pipeline]
                 pipeline + data parallel on devices of different speeds: see
                 ndnps/lab/pipeline_plan.py
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
import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any

from ndnps.forwarder.outgoing import Limits
from ndnps.protocol import config as training_config
from ndnps.protocol.config import TrainingSpec

from . import fabric, minindn
from .topology import router_names
from .config import EVERY_LINK, LINK_FLAGS, Bottleneck, Kill, Links, Scenario
from .faults import parse_faults
from .features import FEATURES, active
from .values import (BOTTLENECK_PS_HOST, BOTTLENECK_WORKERS_HOST, ETHERNET_HEADER, MTU_MAX,
                     MTU_MIN, ScenarioError, known_keys, number, udp_face_mtu)

# (the scenario's types and checks, as other modules have long imported them from here)
__all__ = ["BOTTLENECK_PS_HOST", "BOTTLENECK_WORKERS_HOST", "Bottleneck", "Kill", "Links",
           "Scenario", "ScenarioError", "udp_face_mtu", "apply_overrides", "builtin_names",
           "check_local", "load", "parse", "router_names"]

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


TOPOLOGIES = ("star", "tree", "bottleneck", "fat-tree", "leaf-spine", "bcube", "minindn")
SYSTEMS = ("ndnps", "tcp")
_TOP = {"description", "topology", "links", "link", "forwarder", "workers", "run", "netns",
        "training", "faults", "bottleneck", "jobs", "sim",
        *(table for feature in FEATURES for table in feature.tables)}
_TABLE_KEYS = {
    "topology": {"kind", "workers", "leaves", "k", "n", "file", "ps_node", "worker_nodes",
                 "spines", "hosts_per_leaf"},
    "links": {f.name for f in fields(Links)},
    "workers": {"slowdown"},
    "run": {"timeout", "trace_interval", "on_child_exit", "restart_after", "max_restarts",
            "system", "mode"},
    "sim": {"seed", "synthetic_gradients"},
    "netns": {"enabled", "netem"},
    "bottleneck": {f.name for f in fields(Bottleneck)},
    "faults": {"kill", "random"},
}


def parse(doc: dict[str, Any], name: str, base: Path | None = None) -> Scenario:
    """The scenario `doc` (TOML, overrides applied); `base`: the directory a relative
    topology.file is in (default: the current one)."""
    for key in doc:
        if key not in _TOP:
            raise ScenarioError(f"{key}: unknown key (known: {', '.join(sorted(_TOP))})")
    for table, allowed in _TABLE_KEYS.items():
        known_keys(doc.get(table, {}), table, allowed)
    sc = Scenario(name=name, raw=copy.deepcopy(doc))
    sc.description = str(doc.get("description", ""))

    topo = doc.get("topology", {})
    sc.topology = topo.get("kind", "minindn" if "file" in topo else sc.topology)
    if sc.topology not in TOPOLOGIES:
        raise ScenarioError(f"topology.kind: must be one of {', '.join(TOPOLOGIES)}, got "
                            f"{sc.topology!r}")
    if sc.topology == "minindn" or "file" in topo:
        minindn.read_file(topo, sc, base)
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
    if sc.topology == "leaf-spine":
        _leaf_spine(topo, sc)
    else:
        sc.leaves = number(topo.get("leaves", sc.leaves), "topology.leaves", 1, 16, True)
        for key in ("spines", "hosts_per_leaf"):
            if key in topo:
                raise ScenarioError(f"topology.{key}: applies to kind = \"leaf-spine\" only")
    # a fat-tree up to k = 16 (320 switches, 1,024 hosts: the simulator's datacentre scale)
    sc.k = number(topo.get("k", 2 if sc.topology == "bcube" else 4), "topology.k",
                   1 if sc.topology == "bcube" else 2, 16 if sc.topology == "fat-tree" else 8,
                   True)
    sc.n = number(topo.get("n", sc.n), "topology.n", 2, 8, True)
    if sc.topology == "fat-tree" and sc.k % 2:
        raise ScenarioError(f"topology.k: a fat-tree's k must be even, got {sc.k}")
    # 64 workers, or as many as a fat-tree's or leaf-spine's hosts (fabric.check counts the PS)
    most = max(64, fabric.hosts(sc)) if sc.topology in ("fat-tree", "leaf-spine") else 64
    sc.workers = number(topo.get("workers", default), "topology.workers", 1, most, True)

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
        number(value, f"forwarder.{key}")
    sc.forwarder = dict(fwd)

    run = doc.get("run", {})
    sc.timeout = number(run.get("timeout", sc.timeout), "run.timeout", 1.0)
    sc.trace_interval = number(run.get("trace_interval", sc.trace_interval),
                                "run.trace_interval", 0.05)
    sc.on_child_exit = run.get("on_child_exit", sc.on_child_exit)
    if sc.on_child_exit not in ("continue", "fail"):
        raise ScenarioError(f"run.on_child_exit: must be \"continue\" or \"fail\", got "
                            f"{sc.on_child_exit!r}")
    sc.restart_after = number(run.get("restart_after", sc.restart_after), "run.restart_after",
                               0.0, 60.0)
    sc.max_restarts = number(run.get("max_restarts", sc.max_restarts), "run.max_restarts", 0,
                              100, True)
    sc.mode = run.get("mode", sc.mode)
    if sc.mode not in ("real", "sim"):
        raise ScenarioError(f"run.mode: must be \"real\" or \"sim\", got {sc.mode!r}")
    sim = doc.get("sim", {})
    sc.sim.seed = number(sim.get("seed", sc.sim.seed), "sim.seed", 0, 2 ** 32, True)
    synthetic = sim.get("synthetic_gradients", False)
    if not isinstance(synthetic, bool):
        raise ScenarioError(f"sim.synthetic_gradients: expected true or false, got "
                            f"{synthetic!r}")
    sc.sim.synthetic_gradients = synthetic

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
    for feature in FEATURES:            # a pipeline's stages, a PS-less job's defaults
        training = feature.training(doc, sc, training)
    shared: dict[str, Any] = {}         # what every job's table gets ([share]'s aggregator)
    for feature in FEATURES:
        shared.update(feature.job_defaults(doc, sc))
    if "jobs" not in doc:
        training = {**shared, **training}
    try:
        sc.training = training_config.from_table(training)
    except training_config.ConfigError as e:
        raise ScenarioError(str(e)) from None
    if len(sc.training.who.workers) != sc.workers and "workers" in doc.get("training", {}):
        raise ScenarioError(f"training.workers: {len(sc.training.who.workers)} names for "
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
        sc.slowdown[worker] = number(factor, f"workers.slowdown.{worker}", 1.0)
    if doc.get("faults") and len(sc.all_jobs) > 1:
        raise ScenarioError("faults: not with several [[jobs]] (a fault waits for one PS's "
                            "version)")
    sc.kills = parse_faults(doc.get("faults", {}), sc, router_names(sc))
    sc.system = run.get("system", sc.system)
    if sc.system not in SYSTEMS:
        raise ScenarioError(f"run.system: must be one of {', '.join(SYSTEMS)}, got "
                            f"{sc.system!r}")
    if sc.topology in fabric.KINDS:
        fabric.check(sc)
    if sc.topology == "minindn":
        minindn.check_apps(sc, doc)
    for feature in FEATURES:            # in the table's order: [share] may change the jobs
        feature.parse(doc, sc)
    return sc


def _leaf_spine(topo: dict[str, Any], sc: Scenario) -> None:
    """kind = "leaf-spine": `spines` (default 2), `leaves` (4), `hosts_per_leaf` (4)."""
    sc.spines = number(topo.get("spines", 2), "topology.spines", 1, 64, True)
    sc.leaves = number(topo.get("leaves", 4), "topology.leaves", 1, 128, True)
    sc.hosts_per_leaf = number(topo.get("hosts_per_leaf", 4), "topology.hosts_per_leaf", 1, 64,
                               True)


def _jobs(entries: Any, base: dict[str, Any], default_workers: int,
          starts: dict[str, float]) -> list[TrainingSpec]:
    """[[jobs]]: one training per entry, [training] with the entry's keys replacing its own;
    an entry's `start` (s after the run's start: its apps wait so long) into `starts`."""
    if not isinstance(entries, list) or not entries or \
            not all(isinstance(e, dict) for e in entries):
        raise ScenarioError("jobs: expected an array of tables ([[jobs]] entries)")
    jobs: list[TrainingSpec] = []
    seen: dict[str, str] = {}                  # app name -> the key that named it first
    for i, entry in enumerate(entries):
        where = f"jobs[{i}]"
        entry = dict(entry)
        start = entry.pop("start", 0.0)
        table = {"min_workers": 1, **base, **entry, "ps": entry.get("ps", f"ps{i + 1}")}
        if start:
            starts[table["ps"]] = number(start, f"{where}.start", 0.0, 3600.0)
        workers = entry.get("workers", default_workers)
        if isinstance(workers, int) and not isinstance(workers, bool):
            number(workers, f"{where}.workers", 1, 64, True)
            table["workers"] = [f"{table['ps']}-w{k + 1}" for k in range(workers)]
        try:
            job = training_config.from_table(table)
        except training_config.ConfigError as e:
            raise ScenarioError(str(e.renamed("training.", f"{where}."))) from None
        for key, name in [("ps", job.who.ps)] + [("workers", w) for w in job.who.workers]:
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
    b.rate_mbps = number(table.get("rate_mbps", b.rate_mbps), "bottleneck.rate_mbps", 0.001,
                          100_000.0)
    b.mtu = sc.links.mtu
    if "mtu" in table:                  # the older key for the one link's MTU: links.mtu's
        mtu = number(table["mtu"], "bottleneck.mtu", MTU_MIN, MTU_MAX, True)
        if "mtu" in links and mtu != sc.links.mtu:
            raise ScenarioError(f"bottleneck.mtu: {mtu} disagrees with links.mtu = "
                                f"{sc.links.mtu} (one MTU for the link: give links.mtu)")
        b.mtu = sc.links.mtu = mtu
    frame = b.mtu + ETHERNET_HEADER        # a full-size frame must fit the bucket and the queue
    b.burst_bytes = number(table.get("burst_bytes", b.burst_bytes), "bottleneck.burst_bytes",
                            frame, 1 << 30, True)
    b.queue_bytes = number(table.get("queue_bytes", b.queue_bytes), "bottleneck.queue_bytes",
                            frame, 1 << 30, True)
    return b


def check_local(sc: Scenario) -> None:
    """Refuse what a local run cannot do (a netns run can: every app has a host forwarder
    there, so even a star has forwarder-to-forwarder links), or what this host cannot run."""
    if not sc.links.app_faces and sc.topology == "star" and (sc.links.as_table()
                                                           or sc.links.reliability):
        raise ScenarioError("links.app_faces: false leaves a local star no link to emulate "
                            "(the apps' faces are its only links); use a tree, or --netns")
    for feature in active(sc):
        feature.check_host(sc)


def _links_from(table: dict, where: str) -> Links:
    links = Links()
    for f in fields(Links):
        if f.name in EVERY_LINK and f.name in table and where != "links":
            raise ScenarioError(f"{where}.{f.name}: one for every link ([links] {f.name} = "
                                "...), not for one direction of one (both ends of a link "
                                "need the same)")
        if f.name == "mtu":
            if f.name in table:
                links.mtu = number(table["mtu"], f"{where}.mtu", MTU_MIN, MTU_MAX, True)
            continue
        if f.name in LINK_FLAGS:
            if f.name in table:
                if not isinstance(table[f.name], bool):
                    raise ScenarioError(f"{where}.{f.name}: expected true or false, got "
                                        f"{table[f.name]!r}")
                setattr(links, f.name, table[f.name])
            continue
        if f.name in table:
            high = 1.0 if f.name == "loss" else None
            setattr(links, f.name, number(table[f.name], f"{where}.{f.name}", 0.0, high))
    return links


def _link_overrides(entries: Any, sc: Scenario) -> dict[tuple[str, str], Links]:
    if not isinstance(entries, list):
        raise ScenarioError("link: expected an array of tables ([[link]])")
    leaves = {f"leaf{i + 1}" for i in range(sc.leaves)}
    out = {}
    for i, entry in enumerate(entries):
        where = f"link[{i}]"
        known_keys(entry, where, {"from", "to"} | {f.name for f in fields(Links)})
        ends = (entry.get("from"), entry.get("to"))
        if sc.topology != "tree" or not ({ends[0], ends[1]} <= leaves | {"root"} and
                                         "root" in ends and ends[0] != ends[1]):
            raise ScenarioError(f"{where}.from: ({ends[0]!r}, {ends[1]!r}) is not a "
                                f"forwarder-to-forwarder link (tree: root <-> leafN)")
        out[(str(ends[0]), str(ends[1]))] = _links_from(entry, where)
    return out


def apply_overrides(doc: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """`--set a.b=value`: the value is read as TOML (3, 0.5, true, [1,2], "x"), else a string.
    Every malformed one is named, in one ScenarioError."""
    doc = copy.deepcopy(doc)
    bad: list[str] = []
    for item in overrides:
        if "=" not in item:
            bad.append(f"--set {item!r}: expected KEY=VALUE, e.g. training.epochs=3")
            continue
        key, text = item.split("=", 1)
        key = key.strip()
        try:
            value = tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            value = text
        parts = key.split(".")
        if not all(parts):
            bad.append(f"--set {item!r}: bad key {key!r}")
            continue
        node = doc
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                bad.append(f"{key}: {part} is not a table")
                break
            node = child
        else:
            node[parts[-1]] = value
    if bad:
        raise ScenarioError("; ".join(bad))
    return doc


def _parse_overridden(doc: dict[str, Any], overrides: list[str], name: str,
                      base: Path | None) -> Scenario:
    """The scenario with every `--set` applied. The checks stop at a scenario's first error, so
    when several `--set` are given and it fails, each is tried alone on the file: every one
    that fails so is named, its own error naming its key, in one message (the error of the
    whole alone when no override alone fails with it: two that clash, or one valid only with
    another)."""
    try:
        return parse(apply_overrides(doc, overrides), name, base)
    except ScenarioError as e:
        if len(overrides) < 2:
            raise
        whole = e
    found: list[str] = []
    for item in overrides:
        try:
            parse(apply_overrides(doc, [item]), name, base)
        except ScenarioError as e:
            if str(e) not in found:
                found.append(str(e))
    if str(whole) not in found:
        # none fails so alone: the error is of them together (two that clash; or a value one
        # allows and the file's own table not, as workers beyond a fat-tree's k = 4 hosts)
        raise whole
    raise ScenarioError("; ".join(found)) from None


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
    return _parse_overridden(doc, overrides or [], name, base)
