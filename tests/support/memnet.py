"""An in-process NDN network for unit tests of the apps: no sockets, no forwarder process, but
the real forwarder core.

``MemNet`` is one ``forwarder.pipelines.Forwarder`` (the sans-I/O core the daemon runs: PIT,
persistent PIT, CS, dead-nonce list, FIB/RIB, strategies) configured as the scenario runner
configures the daemon for a training: default table limits (``Limits()``; scenarios set none)
and best-route for ``/`` with the training's retransmission suppression (TrainingConfig's
``retx_suppression_ms`` / ``retx_suppression_max_ms``, as ``ndnps.lab.topology.
forwarder_strategy`` writes it).  Its clock is the running event loop's (``loop.time()``: the
daemon's ``time.monotonic``, or a test's fake loop clock); ``Forwarder.tick`` (the daemon's
100 ms timer) runs on the first packet 100 ms or more after the last one.

Each ``MemApp`` is a local face of that forwarder.  What it sends is wire bytes (Interests
encoded as ``ndnps.client.app.App`` encodes them, the apps' Data as they make them), handed to
``Forwarder.on_receive`` at once; what the forwarder sends to a face is handed to its app in a
later turn of the loop (``call_soon``) and dispatched as ``App`` does: an Interest to the
handler of the longest attached prefix; a Data first to ``on_distribute`` when its first
component is ``*distribute*``, then to the pending Interests of its name (validated with their
validator); a Nack to the pending Interests of its name (``InterestNack``).  ``register(prefix)``
is a RIB route to the app's face (origin app, cost 0, CHILD_INHERIT: NFD's rib/register
defaults).  ``MemApp`` has the slice of ``App`` the apps use (express, express_future,
attach_handler, register, make_data, send_data, drain, traffic, link_events, on_distribute,
on_reconnect, reconnects, connected) with python-ndn's exceptions and validators; its face never
goes down (``connected`` is a flag tests may set; it changes no delivery).

``drop(kind, name, to_app)`` may return True to lose a packet the forwarder sends to
``to_app``'s face: kind "interest", "push" (a Data sent along a persistent entry), "data" (any
other Data: an answer from the PIT or the CS, probes and the registration confirmation
included) or "nack"; `name` is the packet's name as a list of encoded components.

Views for tests: ``routes`` (prefix as a tuple of encoded components -> app: the RIB; setting,
deleting and updating it registers and unregisters routes), ``ppit`` (prefix -> the apps of its
unexpired persistent entry), ``pushes_out`` (the forwarder's copies along persistent entries),
``interest(app, name, lifetime_ms, fresh)`` (an Interest from `app` that awaits no answer).
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import MutableMapping
from typing import Callable, Iterator

from ndn import utils
from ndn.appv2 import DEFAULT_LIFETIME, NDNApp, PendingIntEntry
from ndn.encoding import (FormalName, InterestParam, Name, SignaturePtrs, make_interest,
                          parse_data, parse_interest)
from ndn.types import InterestNack, InterestTimeout, ValidationFailure, ValidResult
from ndn.utils import gen_nonce

from forwarder.daemon import TICK_SECONDS
from forwarder.face_table import FaceInfo
from forwarder.pipelines import Forwarder, Limits
from forwarder.strategy import BestRoute, RetxSuppression, Strategy
from forwarder.tables.rib import CHILD_INHERIT, Route
from ndnps.client import wire as app_wire
from ndnps.client.security import Security
from ndnps.ndn import packet
from ndnps.ndn.markers import DISTRIBUTE_COMPONENT
from ndnps.ndn.tlv import DATA, INTEREST, LP_PACKET, DecodeError, component_offsets
from ndnps.protocol.config import TrainingConfig

log = logging.getLogger(__name__)

ORIGIN_APP = 0                      # NFD's route origin for rib/register from an app


def training_strategy() -> Strategy:
    """What the scenario runner sets on every forwarder for a training (topology.
    forwarder_strategy), with TrainingConfig's defaults."""
    defaults = {f.name: f.default for f in dataclasses.fields(TrainingConfig)}
    return BestRoute(RetxSuppression(initial=defaults["retx_suppression_ms"] / 1000,
                                     max=defaults["retx_suppression_max_ms"] / 1000))


def _loop_time() -> float:
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:                # no loop: the default loop's clock
        return time.monotonic()


def _key(name) -> bytes:
    """A name (python-ndn's, or anything Name.normalize takes) as the forwarder keys it: its
    TLV-VALUE, the encoded components concatenated."""
    return b"".join(bytes(c) for c in Name.normalize(name))


def _components(value: bytes) -> list[bytes]:
    offs = component_offsets(value)
    return [value[a:b] for a, b in zip([0] + offs, offs)]


def _prefixes(value: bytes) -> Iterator[bytes]:
    """Every prefix of a name TLV-VALUE, longest first, down to the empty name."""
    offs = component_offsets(value)
    for off in reversed(offs):
        yield value[:off]
    yield b""


class MemNet:
    def __init__(self, drop: Callable[[str, FormalName, "MemApp"], bool] | None = None,
                 limits: Limits | None = None, strategy: Strategy | None = None) -> None:
        self.fw = Forwarder(limits or Limits(), clock=_loop_time)
        self.fw.strategy_choice.set(b"", 0, strategy or training_strategy())
        self.apps: dict[int, MemApp] = {}          # face id -> app
        self.routes = Routes(self)
        self._ticked = self.fw.clock()
        self._pushed: dict[int, int] = {}          # face id -> out_distribute seen
        self.drop = drop

    @property
    def drop(self) -> Callable[[str, FormalName, "MemApp"], bool] | None:
        return self._drop

    @drop.setter
    def drop(self, hook: Callable[[str, FormalName, "MemApp"], bool] | None) -> None:
        """The hook sees what the forwarder sends from now on (each face's pushes counted
        from here: how a Data is told to be a push)."""
        self._drop = hook
        self._pushed = {f.id: f.counters.out_distribute for f in self.fw.faces}

    def app(self) -> "MemApp":
        return MemApp(self)

    @property
    def pushes_out(self) -> int:
        return self.fw.counters.pushes_out

    @property
    def ppit(self) -> dict[tuple[bytes, ...], set["MemApp"]]:
        """The persistent PIT's unexpired entries: prefix -> apps."""
        now = self.fw.clock()
        view = {}
        for entry in self.fw.ppit.entries():
            apps = {self.apps[f] for f, expires in entry.faces.items()
                    if expires > now and f in self.apps}
            if apps:
                view[tuple(_components(entry.prefix))] = apps
        return view

    def interest(self, src: "MemApp", name, lifetime_ms: int, fresh: bool) -> bool:
        """An Interest from `src` that awaits no answer (whatever comes back is dispatched as
        usual); False if the forwarder Nacked it at once (no route)."""
        _, _, wire = src._interest(name, None, None,
                                   {"lifetime": lifetime_ms, "must_be_fresh": fresh})
        out = src._send(wire)
        return not any(f == src.face_id and item[0] == LP_PACKET for f, item in out)

    # ---- the face between the apps and the forwarder ------------------------------------------

    def receive(self, src: "MemApp", wire: bytes) -> list:
        """`src` sent `wire`: the forwarder handles it now; what it sends to apps' faces is
        delivered in a later turn of the loop (unless `drop` loses it). Returns the
        forwarder's actions."""
        fw = self.fw
        now = fw.clock()
        if now - self._ticked >= TICK_SECONDS:
            self._ticked = now
            fw.tick()
        out = fw.on_receive(src.face_id, wire)
        if not out:
            return out
        loop = asyncio.get_running_loop()
        apps = self.apps
        for face_id, item in out:
            dest = apps.get(face_id)
            if dest is None:                # the internal face (management): not ours
                continue
            if self._drop is not None and self._lost(face_id, item, dest):
                continue
            loop.call_soon(dest.receive, item)
        return out

    def _lost(self, face_id: int, item: bytes, dest: "MemApp") -> bool:
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

    def add(self, app: "MemApp") -> FaceInfo:
        info = self.fw.add_face(True, f"memnet://{len(self.apps) + 1}", "memnet://")
        self.apps[info.id] = app
        return info

    def remove(self, app: "MemApp") -> None:
        if self.apps.pop(app.face_id, None) is not None:
            self.fw.remove_face(app.face_id)
            self._pushed.pop(app.face_id, None)


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

    def __getitem__(self, key) -> "MemApp":
        routes = self._routes(b"".join(key))
        if not routes:
            raise KeyError(key)
        return self.net.apps[min(routes, key=lambda r: (r.cost, r.face)).face]

    def __setitem__(self, key, app: "MemApp") -> None:
        prefix = b"".join(key)
        for r in self._routes(prefix):
            self.net.fw.rib.remove(prefix, r.face, r.origin)
        app.add_route(prefix)

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


class MemApp:
    lp_reliability = False          # no link layer to make reliable
    link_repair = False

    def __init__(self, net: MemNet) -> None:
        self.net = net
        self.face_id = net.add(self).id
        self.handlers: dict[bytes, Callable] = {}
        # pending Interests: exact name (TLV-VALUE) -> [(future, validator, deadline)]; those
        # with CanBePrefix apart
        self.pending: dict[bytes, list] = {}
        self.pending_prefix: dict[bytes, list] = {}
        self.on_distribute = None
        self.on_reconnect: Callable[[], None] | None = None
        self.registered: list = []
        self.reconnects = 0                     # a MemNet face never goes down
        self.connected = True
        self.bytes_in = self.bytes_out = self.packets_in = self.packets_out = 0

    make_data = staticmethod(NDNApp.make_data)

    # ---- producer side ------------------------------------------------------------------------

    def attach_handler(self, name, handler, validator=None) -> None:
        self.handlers[_key(name)] = handler

    async def register(self, name) -> bool:
        """NFD's rib/register from this app's face."""
        name = Name.normalize(name)
        if name not in self.registered:
            self.registered.append(name)
        self.add_route(b"".join(bytes(c) for c in name))
        return True

    async def unregister(self, name) -> bool:
        return self.net.fw.rib.remove(_key(name), self.face_id, ORIGIN_APP)

    def add_route(self, prefix: bytes) -> None:
        self.net.fw.rib.add(prefix, len(component_offsets(prefix)),
                            Route(self.face_id, ORIGIN_APP, 0, CHILD_INHERIT, None))

    def send_data(self, wire: bytes) -> None:
        """A Data: the answer to an Interest, or a push nobody asked for (it goes where the
        forwarder's persistent entry says)."""
        self._send(bytes(wire))

    # ---- consumer side ------------------------------------------------------------------------

    def express(self, name, validator=None, app_param=None, signer=None, **kw):
        """App.express: the Interest leaves now; an awaitable of (name, content, context), or
        None with no_response=True."""
        name, param, wire = self._interest(name, app_param, signer, kw)
        if kw.get("no_response"):
            self._send(wire)
            return None
        future = self._pending(b"".join(name), param, validator)
        self._send(wire)
        return self._wait(future)

    def express_future(self, name, validator, **kw) -> asyncio.Future:
        """App.express_future: the pending entry's own future."""
        if kw.get("no_response"):
            return asyncio.ensure_future(self.express(name, validator, **kw))
        name, param, wire = self._interest(name, kw.pop("app_param", None),
                                           kw.pop("signer", None), kw)
        future = self._pending(b"".join(name), param, validator)
        self._send(wire)
        return future

    @staticmethod
    def _interest(name, app_param, signer, kw: dict) -> tuple[FormalName, InterestParam, bytes]:
        """The Interest App would send: python-ndn's InterestParam defaults (random nonce,
        4000 ms), encoded by ndnps.ndn.packet (by python-ndn with parameters or a signer)."""
        name = Name.normalize(name)
        param = InterestParam(can_be_prefix=kw.get("can_be_prefix", False),
                              must_be_fresh=kw.get("must_be_fresh", False),
                              nonce=kw["nonce"] if "nonce" in kw else gen_nonce(),
                              lifetime=kw.get("lifetime", DEFAULT_LIFETIME),
                              hop_limit=kw.get("hop_limit"))
        if app_param is None and signer is None:
            wire = packet.encode_interest(name, param.nonce, param.lifetime, param.can_be_prefix,
                                          param.must_be_fresh, param.hop_limit)
        else:
            wire = bytes(make_interest(name, param, app_param, signer=signer))
        return name, param, wire

    def _pending(self, key: bytes, param: InterestParam, validator) -> asyncio.Future:
        """A pending entry ending as App's do: Data (validated), InterestNack, InterestTimeout
        at its lifetime; cancelled or ended, it leaves the table."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        lifetime = param.lifetime if param.lifetime is not None else DEFAULT_LIFETIME
        table = self.pending_prefix if param.can_be_prefix else self.pending
        entry = (future, validator, utils.timestamp() + lifetime, param)
        table.setdefault(key, []).append(entry)

        def expire() -> None:
            if not future.done():
                future.set_exception(InterestTimeout())
        handle = loop.call_later(lifetime / 1000, expire)

        def ended(_f: asyncio.Future) -> None:
            handle.cancel()
            entries = table.get(key)
            if entries is not None and entry in entries:
                entries.remove(entry)
                if not entries:
                    del table[key]
        future.add_done_callback(ended)
        return future

    @staticmethod
    async def _wait(future: asyncio.Future):
        return await future             # a cancelled caller cancels the entry with it

    # ---- the face ------------------------------------------------------------------------------

    def _send(self, wire: bytes) -> list:
        self.packets_out += 1
        self.bytes_out += len(wire)
        return self.net.receive(self, wire)

    def receive(self, wire: bytes) -> None:
        """A packet the forwarder sent to this app's face."""
        self.packets_in += 1
        self.bytes_in += len(wire)
        typ = wire[0]
        if typ == DATA:
            parsed = app_wire.parse_data(wire)
            if parsed is None:
                parsed = parse_data(wire)
            self._data_arrived(*parsed, wire)
        elif typ == INTEREST:
            self._interest_arrived(wire)
        elif typ == LP_PACKET:
            try:
                pkt = packet.decode(wire)
            except DecodeError:
                return
            if isinstance(pkt, packet.Nack):
                self._nacked(pkt.interest.name, pkt.reason)

    def _interest_arrived(self, wire: bytes) -> None:
        """NDNApp._on_interest: the handler of the longest attached prefix (none: ignored)."""
        plain = app_wire.parse_interest(wire)
        if plain is not None:
            name, param = plain
            app_param, sig = None, SignaturePtrs()
        else:
            name, param, app_param, sig = parse_interest(wire)
        key = b"".join(bytes(c) for c in name)
        handler = next((h for p in _prefixes(key) if (h := self.handlers.get(p)) is not None),
                       None)
        if handler is None:
            return
        lifetime = param.lifetime if param.lifetime is not None else DEFAULT_LIFETIME
        deadline = utils.timestamp() + lifetime
        context = {"int_param": param, "pit_token": None, "sig_ptrs": sig,
                   "raw_packet": wire, "deadline": deadline}

        def reply(data) -> bool | None:
            if utils.timestamp() > deadline:
                return False
            self.send_data(bytes(data))
            return None
        try:
            handler(name, app_param, reply, context)
        except Exception:
            log.exception("Interest handler failed: %s", Name.to_str(name))

    def _data_arrived(self, name, meta_info, content, sig, raw: bytes) -> None:
        """App._data_arrived: on_distribute first, then the pending Interests it satisfies."""
        if self.on_distribute is not None and name and bytes(name[0]) == DISTRIBUTE_COMPONENT:
            self.on_distribute(name, meta_info, content, sig)
        key = b"".join(bytes(c) for c in name)
        entries = self.pending.pop(key, [])
        if self.pending_prefix:
            for prefix in _prefixes(key):
                entries += self.pending_prefix.pop(prefix, [])
        data = (name, meta_info, content, sig, raw)
        for future, validator, deadline, param in entries:
            if future.done():
                continue
            if getattr(validator, "__func__", None) is Security.validator:
                self._settle(future, validator.__self__, deadline, data)
            else:
                entry = PendingIntEntry(future, deadline, param.can_be_prefix,
                                        param.must_be_fresh, validator)
                asyncio.get_running_loop().create_task(entry.satisfy(data))

    @staticmethod
    def _settle(future: asyncio.Future, sec: Security, deadline: int, data: tuple) -> None:
        """App's synchronous check for a training's Security validator."""
        name, meta_info, content, sig, raw = data
        try:
            valid = sec.verify(sig)
        except Exception:
            valid = False
        if valid:
            future.set_result((name, content, {"meta_info": meta_info, "sig_ptrs": sig,
                                               "raw_packet": raw, "deadline": deadline}))
        else:
            future.set_exception(ValidationFailure(name, meta_info, content, sig,
                                                   ValidResult.FAIL))

    def _nacked(self, key: bytes, reason: int) -> None:
        for table in (self.pending, self.pending_prefix):
            for future, *_ in table.pop(key, []):
                if not future.done():
                    future.set_exception(InterestNack(reason))

    # ---- the rest of App's slice ---------------------------------------------------------------

    def close(self) -> None:
        """The face goes away: the forwarder drops its routes, PIT records and persistent
        entries."""
        self.net.remove(self)
        self.connected = False

    async def drain(self) -> None:
        await asyncio.sleep(0)

    def link_events(self) -> dict[str, int]:
        return {"reconnects": self.reconnects, "sent_while_down": 0}

    def traffic(self) -> dict[str, int]:
        return {"bytes_sent": self.bytes_out, "bytes_received": self.bytes_in,
                "packets_sent": self.packets_out, "packets_received": self.packets_in}
