"""An in-process NDN network for unit tests of the apps: no sockets, no forwarder process, but
the real forwarder core and the apps' real client.

``MemNet`` is one ``ndnps.forwarder.pipelines.Forwarder`` (the sans-I/O core the daemon runs: PIT,
persistent PIT, CS, dead-nonce list, FIB/RIB, strategies) configured as the scenario runner
configures the daemon for a training: default table limits (``Limits()``; scenarios set none)
and best-route for ``/`` with the training's retransmission suppression (its transport's
``retx_suppression_ms`` / ``retx_suppression_max_ms``, as ``ndnps.lab.topology.
forwarder_strategy`` writes it).  Its clock is the running event loop's (``loop.time()``: the
daemon's ``time.monotonic``, or a test's fake loop clock); ``Forwarder.tick`` (the daemon's
100 ms timer) runs on the first packet 100 ms or more after the last one.

``net.app()`` is an ``ndnps.client.app.App`` on a ``Face`` connected to a local face of that
forwarder, the simulator's in-process app face (``ndnps.sim.faces.AppFace``, the net its
owner as the daemon is a real face's): what the app writes is handed to
``Forwarder.on_receive`` at once; what the forwarder sends to the face reaches the app's face
in a later turn of the loop (``call_soon``), through its ``data_received`` as a socket read
would.  (``ndnps.sim.net.SimNet`` is the same with the daemon's own management and timer,
several forwarders and links between them.)  Management is
the forwarder's, as the daemon answers it: ``rib/register`` (and ``unregister``) from an app
is a RIB route to its face (origin app, cost 0, CHILD_INHERIT: NFD's defaults), answered with
a ControlResponse; any other command 501.  ``net.close(app)`` takes its face away (the
forwarder drops its routes, PIT records and persistent entries; the app's pending Interests
end).  To emulate an outage, a test sets ``app.face.running``.

``drop(kind, name, to_app)`` may return True to lose a packet the forwarder sends to
``to_app``'s face (``net_of(to_app)`` is its network): kind "interest", "push" (a Data sent along a persistent entry), "data" (any
other Data: an answer from the PIT or the CS, probes and the registration confirmation
included) or "nack"; `name` is the packet's name as a list of encoded components.

Views for tests: ``routes`` (prefix as a tuple of encoded components -> app: the RIB; setting,
deleting and updating it registers and unregisters routes), ``ppit`` (prefix -> the apps of its
unexpired persistent entry), ``pushes_out`` (the forwarder's copies along persistent entries),
``interest(app, name, lifetime_ms, fresh)`` (an Interest from `app` that awaits no answer).
"""
from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import MutableMapping
from typing import Callable, Iterator

from ndnps.forwarder.daemon import TICK_SECONDS
from ndnps.forwarder.outgoing import Limits
from ndnps.forwarder.pipelines import Forwarder
from ndnps.forwarder.strategy import BestRoute, RetxSuppression, Strategy
from ndnps.forwarder.tables.rib import CHILD_INHERIT, Route
from ndnps.client.app import App
from ndnps.client.face import Face
from ndnps.client.security import DigestSigner
from ndnps.client.wire import make_data
from ndnps.ndn import encoders, nfd, packet
from ndnps.ndn.tlv import LP_PACKET, DecodeError, component_offsets, read_tl
from ndnps.protocol.parts import Transport
from ndnps.sim.faces import AppFace

log = logging.getLogger(__name__)

ORIGIN_APP = 0                      # NFD's route origin for rib/register from an app
FormalName = list
_MGMT = nfd.LOCALHOST + nfd.NFD


def training_strategy() -> Strategy:
    """What the scenario runner sets on every forwarder for a training (topology.
    forwarder_strategy), with the training's transport defaults."""
    t = Transport()
    return BestRoute(RetxSuppression(initial=t.retx_suppression_ms / 1000,
                                     max=t.retx_suppression_max_ms / 1000))


def _loop_time() -> float:
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:                # no loop: the default loop's clock
        return time.monotonic()


_NETS: "weakref.WeakSet[MemNet]" = weakref.WeakSet()


def net_of(app: App) -> "MemNet":
    """The network `app` is on (for a drop hook, which is given the app)."""
    return next(net for net in _NETS if app in net.face_ids)


def _components(value: bytes) -> list[bytes]:
    offs = component_offsets(value)
    return [value[a:b] for a, b in zip([0] + offs, offs)]


class MemNet:
    def __init__(self, drop: Callable[[str, FormalName, App], bool] | None = None,
                 limits: Limits | None = None, strategy: Strategy | None = None) -> None:
        self.fw = Forwarder(limits or Limits(), clock=_loop_time)
        self.fw.strategy_choice.set(b"", 0, strategy or training_strategy())
        self.apps: dict[int, App] = {}             # face id -> app
        self.face_ids: dict[App, int] = {}
        self.faces: dict[int, AppFace] = {}        # face id -> the forwarder's face
        self.routes = Routes(self)
        _NETS.add(self)
        self._ticked = self.fw.clock()
        self._pushed: dict[int, int] = {}          # face id -> out_distribute seen
        self.drop = drop

    @property
    def drop(self) -> Callable[[str, FormalName, App], bool] | None:
        return self._drop

    @drop.setter
    def drop(self, hook: Callable[[str, FormalName, App], bool] | None) -> None:
        """The hook sees what the forwarder sends from now on (each face's pushes counted
        from here: how a Data is told to be a push)."""
        self._drop = hook
        self._pushed = {f.id: f.counters.out_distribute for f in self.fw.faces}

    def app(self) -> App:
        """A new app on its own face of this forwarder."""
        face = Face("unix:///memnet")
        app = App("unix:///memnet", face=face)
        mine = AppFace(self, face, f"memnet://{len(self.apps) + 1}")  # type: ignore[arg-type]
        self.apps[mine.info.id] = app
        self.face_ids[app] = mine.info.id
        self.faces[mine.info.id] = mine
        return app

    # ---- the apps' faces' owner (as the daemon is a real face's) ------------------------------

    def face_up(self, face: AppFace, local: bool, remote_uri: str, local_uri: str,
                persistency: int):
        return self.fw.add_face(local, remote_uri, "memnet://")

    def face_down(self, face: AppFace) -> None:
        self.remove(face.info.id)

    def close(self, app: App) -> None:
        """`app`'s face goes away: the forwarder drops its routes, PIT records and persistent
        entries."""
        app.face.close()

    @property
    def pushes_out(self) -> int:
        return self.fw.counters.pushes_out

    @property
    def ppit(self) -> dict[tuple[bytes, ...], set[App]]:
        """The persistent PIT's unexpired entries: prefix -> apps."""
        now = self.fw.clock()
        view = {}
        for entry in self.fw.ppit.entries():
            apps = {self.apps[f] for f, expires in entry.faces.items()
                    if expires > now and f in self.apps}
            if apps:
                view[tuple(_components(entry.prefix))] = apps
        return view

    def interest(self, src: App, name, lifetime_ms: int, fresh: bool) -> bool:
        """An Interest from `src` that awaits no answer (whatever comes back is dispatched as
        usual); False if the forwarder Nacked it at once (no route)."""
        face_id = self.face_ids[src]
        wire = encoders.encode_interest(name, int.from_bytes(packet.new_nonce(), "big"),
                                      lifetime_ms, False, fresh)
        out = self.receive(face_id, wire)
        return not any(f == face_id and item[0] == LP_PACKET for f, item in out)

    def add_route(self, app: App, prefix: bytes) -> None:
        """rib/register of `prefix` (a TLV-VALUE) from `app`'s face."""
        self.fw.rib.add(prefix, len(component_offsets(prefix)),
                        Route(self.face_ids[app], ORIGIN_APP, 0, CHILD_INHERIT, None))

    # ---- the faces between the apps and the forwarder ------------------------------------------

    def receive(self, face: AppFace | int, wire: bytes) -> list:
        """The app of `face_id` sent `wire`: the forwarder handles it now; what it sends to
        apps' faces is delivered in a later turn of the loop (unless `drop` loses it).
        Returns the forwarder's actions."""
        face_id = face if isinstance(face, int) else face.info.id
        fw = self.fw
        now = fw.clock()
        if now - self._ticked >= TICK_SECONDS:
            self._ticked = now
            fw.tick()
        if wire[:1] == b"\x05" and _MGMT in wire[:24] and self._management(face_id, wire):
            return []
        out = fw.on_receive(face_id, wire)
        for dest_id, item in out:
            self._deliver(dest_id, item)
        return out

    def _deliver(self, face_id: int, item: bytes) -> None:
        dest = self.apps.get(face_id)
        if dest is None:                    # the internal face (management): not ours
            return
        if self._drop is not None and self._lost(face_id, item, dest):
            return
        self.faces[face_id].send(item)

    def _management(self, face_id: int, wire: bytes) -> bool:
        """A control command, answered as the daemon answers: rib/register and unregister;
        any other command 501.  False: not /localhost/nfd (the forwarder's)."""
        try:
            interest = packet.decode(wire)
            assert isinstance(interest, packet.Interest)
            comps = _components(interest.name)
        except (DecodeError, AssertionError):
            return False
        if b"".join(comps[:2]) != _MGMT:
            return False
        verb = b"/".join(read_component_value(c) for c in comps[2:4])
        params = None
        try:
            cp_wire = read_component_value(comps[4])
            _, off, end = read_tl(cp_wire, 0, len(cp_wire))
            cp = nfd.parse_control_parameters(cp_wire, off, end)
            if verb in (b"rib/register", b"rib/unregister") and cp.name is not None:
                if verb == b"rib/register":
                    self.add_route(self.apps[face_id], cp.name)
                else:
                    self.fw.rib.remove(cp.name, face_id, ORIGIN_APP)
                code, text = 200, "OK"
                params = nfd.control_parameters(cp.name, {"face_id": face_id,
                                                          "origin": ORIGIN_APP, "cost": 0,
                                                          "flags": CHILD_INHERIT})
            else:
                code, text = 501, "Unsupported command"
        except (DecodeError, IndexError):
            code, text = 400, "Malformed ControlParameters"
        reply = make_data(comps, nfd.control_response(code, text, params), DigestSigner())
        # (no drop: the forwarder answers its own face, as the old in-process RIB did at once)
        self.faces[face_id].send(reply)
        return True

    def _lost(self, face_id: int, item: bytes, dest: App) -> bool:
        try:
            pkt = packet.decode(item)
        except DecodeError:
            return False
        if isinstance(pkt, packet.Nack):
            kind, name = "nack", pkt.interest.name
        elif isinstance(pkt, packet.Interest):
            kind, name = "interest", pkt.name
        else:
            kind, name = "data", pkt.name
            info = self.fw.faces.get(face_id)
            pushed = info.counters.out_distribute if info is not None else 0
            if pushed != self._pushed.get(face_id, 0):
                # one packet in, at most one copy out per face: this one went along a
                # persistent entry
                self._pushed[face_id] = pushed
                kind = "push"
        return bool(self._drop(kind, _components(name), dest))

    def remove(self, face_id: int) -> None:
        app = self.apps.pop(face_id, None)
        if app is not None:
            self.face_ids.pop(app, None)
            self.faces.pop(face_id, None)
            self.fw.remove_face(face_id)
            self._pushed.pop(face_id, None)


def read_component_value(comp: bytes) -> bytes:
    _, off, end = read_tl(comp, 0, len(comp))
    return comp[off:end]


class Routes(MutableMapping):
    """The forwarder's RIB as a mapping: prefix (tuple of encoded components) -> the app of
    its first route.  ``routes[p] = app`` makes `app` the prefix's one route, ``del routes[p]``
    unregisters every route of the prefix (NFD's rib/unregister for each)."""

    def __init__(self, net: MemNet) -> None:
        self.net = net

    def _routes(self, prefix: bytes) -> list[Route]:
        for p, routes in self.net.fw.rib.entries():
            if p == prefix:
                return [r for r in routes if r.face in self.net.apps]
        return []

    def __getitem__(self, key) -> App:
        routes = self._routes(b"".join(key))
        if not routes:
            raise KeyError(key)
        return self.net.apps[min(routes, key=lambda r: (r.cost, r.face)).face]

    def __setitem__(self, key, app: App) -> None:
        prefix = b"".join(key)
        for r in self._routes(prefix):
            self.net.fw.rib.remove(prefix, r.face, r.origin)
        self.net.add_route(app, prefix)

    def __delitem__(self, key) -> None:
        prefix = b"".join(key)
        routes = self._routes(prefix)
        if not routes:
            raise KeyError(key)
        for r in routes:
            self.net.fw.rib.remove(prefix, r.face, r.origin)

    def __iter__(self) -> Iterator[tuple[bytes, ...]]:
        apps = self.net.apps
        return iter([tuple(_components(p)) for p, routes in self.net.fw.rib.entries()
                     if any(r.face in apps for r in routes)])

    def __len__(self) -> int:
        return sum(1 for _ in self)
