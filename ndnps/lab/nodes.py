"""The plan of a run's network: each forwarder (its faces, routes, its configuration file) and
each app (its role, the forwarder it uses); what ndnps.lab.topology, .fabric and .minindn
build and the runner starts."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ndnps.forwarder.strategy import BestRoute, RetxSuppression

# the packet classes of the forwarders' rate traces: the training protocol's exchanges
CLASSIFIER = "ndnps.protocol.names:classify"

from .config import Scenario

NDN_PORT = 6363


@dataclass
class Face:
    name: str          # the peer forwarder
    uri: str
    link: dict[str, float] = field(default_factory=dict)
    reliability: bool = False          # NDNLPv2 link reliability (both ends have it)


@dataclass
class ForwarderNode:
    name: str
    host: str | None = None               # netns host, None locally
    udp: int = NDN_PORT
    faces: list[Face] = field(default_factory=list)
    routes: list[tuple[str, str]] = field(default_factory=list)     # (prefix, face name)
    app_link: dict[str, float] = field(default_factory=dict)
    udp_mtu: int | None = None            # its UDP faces' longest datagram (None: 1472)

    def config(self, run_dir: Path, tables: dict, trace_interval: float,
               strategy: str | None = None) -> str:
        lines = []
        if strategy is not None:            # (a top-level table array: before the tables)
            lines += ["[[strategies]]", 'prefix = "/"', f'strategy = "{strategy}"']
        if tables:
            lines.append("[tables]")
            lines += [f"{k} = {v!r}" for k, v in tables.items()]
        if self.udp_mtu is not None:
            lines += ["[udp]", f"mtu = {self.udp_mtu}"]
        if self.app_link:
            lines.append("[app_links]")
            lines += [f"{k} = {v!r}" for k, v in self.app_link.items()]
        for face in self.faces:
            lines += ["[[faces]]", f'name = "{face.name}"', f'uri = "{face.uri}"']
            if face.reliability:
                lines.append("reliability = true")
            lines += [f"{k} = {v!r}" for k, v in face.link.items()]
        for prefix, face_name in self.routes:
            lines += ["[[routes]]", f'prefix = "{prefix}"', f'face = "{face_name}"']
        traces = run_dir / "traces"
        lines += ["[trace]", f'rates = "{traces / (self.name + "-rates.tsv")}"',
                  f'tables = "{traces / (self.name + "-tables.tsv")}"',
                  f"interval = {trace_interval}", f'node = "{self.name}"',
                  f'classifier = "{CLASSIFIER}"']
        return "\n".join(lines) + "\n"


def forwarder_strategy(sc: Scenario) -> str:
    """Every forwarder's strategy for the training's names: best-route, with the training's
    retransmission suppression (initial and maximum interval), which its fetchers wait for
    (the training's transport)."""
    t = sc.training
    return BestRoute(RetxSuppression(initial=t.transport.retx_suppression_ms / 1000,
                                     max=t.transport.retx_suppression_max_ms / 1000)).name


@dataclass
class AppNode:
    name: str
    role: str                  # "ps", "worker" or "peer" (PS-less training: ndnps.apps.peer)
    forwarder: str             # the forwarder it connects to


@dataclass
class Plan:
    forwarders: dict[str, ForwarderNode]
    apps: list[AppNode]
    # netns only: (host a, host b) links in creation order, and the forwarder of each host
    host_links: list[tuple[str, str]] = field(default_factory=list)


def join(a: ForwarderNode, b: ForwarderNode, uri_of_b: str, uri_of_a: str,
          link: dict[str, float], reliability: bool) -> None:
    a.faces.append(Face(b.name, uri_of_b, dict(link), reliability))
    b.faces.append(Face(a.name, uri_of_a, dict(link), reliability))


def apps(sc: Scenario, worker_at, ps_at: str) -> list[AppNode]:
    """Each job's PS (on `ps_at`), then its workers (the i-th worker of the run on
    `worker_at(i)`); a PS-less job's peers where workers go, and no PS."""
    apps, i = [], 0
    for job in sc.all_jobs:
        if not job.peers.collective:
            apps.append(AppNode(job.who.ps, "ps", ps_at))
        for w in job.who.workers:
            apps.append(AppNode(w, "peer" if job.peers.collective else "worker", worker_at(i)))
            i += 1
    return apps
