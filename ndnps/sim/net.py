"""A simulated network of real forwarders: each node the daemon's own object
(`ForwarderDaemon`, with its core `Forwarder`, management and timer) on the virtual loop's
clock, its faces simulated links and in-process apps instead of sockets (faces.py); as
ndnSIM runs NFD's forwarding code on ns-3's nodes.

Built in two steps, as the daemon starts: first the shape (`add_forwarder`, `connect`,
`route`, `strategy`: what a forwarder's config says, written into that node's real `Config`),
then `await start()`, which makes the link faces, names them and puts their static routes in
(the daemon's `configure_face`), then starts each core (`start_core`: strategies, timer).
Apps come last (`app(node)`), as the daemon opens its listeners last: whoever attaches finds
the routes and faces in place.  An app is the client's real `App` on a real client `Face`,
registering prefixes through the forwarder's real management.

A link face is named by the node at its other end (a second link between the same pair:
"<peer>#2"), so a route says `route(a, "/prefix", b)`.  Everything runs in the loop's time:
on a `VirtualLoop` (loop.py) a run takes as long as its events take to compute, whatever its
virtual length; on a real loop it is a network emulated in real time.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from ndn.app_support.nfd_mgmt import parse_response
from ndn.encoding import InterestParam, Name, make_interest, parse_data

from ndnps.client.app import App
from ndnps.client.face import Face as ClientFace
from ndnps.forwarder.config import Config, FaceConfig, RouteConfig
from ndnps.forwarder.daemon import ForwarderDaemon
from ndnps.forwarder.pipelines import Forwarder
from ndnps.forwarder.face_table import INTERNAL_FACE
from ndnps.ndn.packet import decode_interest

from .faces import AppFace, LinkFace
from .link import Link, LinkSpec

APP_URI = "unix:///sim"         # what the apps' client Face is told it is connected to


def sim_config() -> Config:
    """A forwarder config with every listener off: the simulator makes the faces."""
    return Config(unix="", tcp=0, udp=0)


class SimNode:
    """One forwarder of the network."""

    def __init__(self, name: str, daemon: ForwarderDaemon) -> None:
        self.name = name
        self.daemon = daemon
        # face name (the peer's) -> face (None until start)
        self.faces: dict[str, LinkFace | None] = {}
        self.apps: list[App] = []
        self.app_faces: list[AppFace] = []          # each app's face, in the same order

    @property
    def config(self) -> Config:
        return self.daemon.config

    @property
    def fw(self) -> Forwarder:
        """The forwarder core (its tables and counters)."""
        return self.daemon.fw


@dataclass
class SimLink:
    """A link between two nodes and the faces at its ends: a's packets go `link.ab`."""
    a: SimNode
    b: SimNode
    a_face: str          # the face's name at a (b's name, or b's name#n)
    b_face: str
    link: Link | None = None         # made at start

    def counters(self) -> list[dict]:
        """Per direction: from, to and the channel's counters (bytes, packets, frames ...)."""
        if self.link is None:
            return []
        return [{"from": self.a.name, "to": self.b.name, **self.link.ab.counters.as_dict()},
                {"from": self.b.name, "to": self.a.name, **self.link.ba.counters.as_dict()}]


class SimNet:
    def __init__(self, loop: asyncio.AbstractEventLoop, seed: int = 0) -> None:
        self.loop = loop
        self.seed = seed
        self.nodes: dict[str, SimNode] = {}
        self.links: list[SimLink] = []
        self._specs: list[tuple[SimLink, LinkSpec, LinkSpec | None]] = []
        self.started = False

    # ---- the shape --------------------------------------------------------------------------

    def add_forwarder(self, name: str, config: Config | None = None) -> SimNode:
        """A forwarder named `name` with `config` (its listeners are never opened; its faces
        and routes may also be added with connect and route)."""
        if name in self.nodes:
            raise ValueError(f"forwarder {name!r} exists")
        cfg = config if config is not None else sim_config()
        node = self.nodes[name] = SimNode(name, ForwarderDaemon(cfg, clock=self.loop.time))
        return node

    def connect(self, a: SimNode | str, b: SimNode | str, spec: LinkSpec,
                spec_ba: LinkSpec | None = None, reliability: bool = False) -> SimLink:
        """A link between a and b (`spec` both ways, or a->b with `spec_ba` back), made at
        start; `reliability`: NDNLPv2 link reliability on both faces."""
        if self.started:
            raise RuntimeError("connect before start")
        na, nb = self._node(a), self._node(b)
        sl = SimLink(na, nb, self._face_name(na, nb), self._face_name(nb, na))
        for node, name in ((na, sl.a_face), (nb, sl.b_face)):
            node.config.faces.append(FaceConfig(name, f"sim://{name}", reliability=reliability))
            node.faces[name] = None             # the name is taken; the face comes at start
        self.links.append(sl)
        self._specs.append((sl, spec, spec_ba))
        return sl

    def route(self, node: SimNode | str, prefix: str, via: SimNode | str, cost: int = 0) -> None:
        """A static route at `node` for `prefix` (a URI) toward its face to `via` (a node,
        or a face name), as a forwarder config's [[route]]."""
        if self.started:
            raise RuntimeError("routes before start (then: the forwarder's rib)")
        n = self._node(node)
        face = via.name if isinstance(via, SimNode) else via
        if face not in n.faces:
            raise ValueError(f"{n.name} has no face {face!r}")
        n.config.routes.append(RouteConfig(prefix, face, cost))

    def strategy(self, node: SimNode | str, prefix: str, name: str) -> None:
        """The strategy for `prefix` at `node` (a name strategy_by_name knows)."""
        self._node(node).config.strategies[prefix] = name

    # ---- running ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Faces up, named and routed; each forwarder's core started."""
        self.started = True
        for i, (sl, spec, spec_ba) in enumerate(self._specs):
            a, b = sl.a.daemon, sl.b.daemon
            link = sl.link = Link(self.loop, spec=spec, spec_ba=spec_ba, seed=f"{self.seed}/{i}")
            ends = (LinkFace(a, link.ab, link.ba, f"sim://{sl.b.name}", f"sim://{sl.a.name}"),
                    LinkFace(b, link.ba, link.ab, f"sim://{sl.a.name}", f"sim://{sl.b.name}"))
            for node, name, face in ((sl.a, sl.a_face, ends[0]), (sl.b, sl.b_face, ends[1])):
                node.faces[name] = face
                node.daemon.configure_face(self._face_config(node, name), face.info.id)
        for node in self.nodes.values():
            node.daemon.start_core()

    def app(self, node: SimNode | str, to_app: LinkSpec | None = None,
            from_app: LinkSpec | None = None, link_repair: bool = False) -> App:
        """A new app attached to `node` on a face of its own (its client is connected); with
        `to_app` (and `from_app`, else the same), over a link of those conditions instead of
        at once. `link_repair`: the App's (the links further on repair their losses)."""
        if not self.started:
            raise RuntimeError("apps attach after start")
        n = self._node(node)
        client = ClientFace(APP_URI)
        app = App(APP_URI, face=client, link_repair=link_repair)
        link = None
        if to_app is not None:
            link = Link(self.loop, spec=to_app, spec_ba=from_app,
                        seed=f"{self.seed}/{n.name}/app{len(n.apps) + 1}")
        n.app_faces.append(AppFace(n.daemon, client, f"sim://{n.name}/app{len(n.apps) + 1}",
                                   link))
        n.apps.append(app)
        return app

    async def command(self, node: SimNode | str, name: Any) -> tuple[int, str]:
        """One management command at `node` (a Name: python-ndn's, or its URI), answered by
        its real management as one over its socket would be: (status code, status text)."""
        wire = bytes(make_interest(Name.normalize(name), InterestParam(must_be_fresh=True)))
        reply = await self._node(node).daemon.mgmt.handle(decode_interest(wire, 0, len(wire)),
                                                         INTERNAL_FACE)
        if reply is None:
            raise ValueError(f"no answer to the command {Name.to_str(Name.normalize(name))}")
        _, _, content, _ = parse_data(reply)
        response = parse_response(bytes(content or b""))
        return int(response["status_code"]), str(response["status_text"])

    async def stop(self) -> None:
        for node in self.nodes.values():
            await node.daemon.stop()

    def counters(self) -> list[dict]:
        """Every link direction's counters: the bytes per link."""
        return [row for sl in self.links for row in sl.counters()]

    # ---- helpers ------------------------------------------------------------------------------

    def _node(self, node: SimNode | str) -> SimNode:
        return node if isinstance(node, SimNode) else self.nodes[node]

    @staticmethod
    def _face_name(node: SimNode, peer: SimNode) -> str:
        name, n = peer.name, 1
        while name in node.faces:
            n += 1
            name = f"{peer.name}#{n}"
        return name

    @staticmethod
    def _face_config(node: SimNode, name: str) -> FaceConfig:
        return next(f for f in node.config.faces if f.name == name)
