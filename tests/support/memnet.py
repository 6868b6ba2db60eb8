"""An in-process NDN network for unit tests of the apps: no sockets, no forwarder process.

``MemNet`` plays one forwarder with the semantics the apps rely on (DESIGN.md): Interests go to
the app with the longest registered prefix of the name (markers stripped); ``*insert*`` /
``*remove*`` add / drop the sender in the persistent entry of the stripped name (a ``*remove*``
goes on to the producer only once the entry is empty, as the forwarder prunes); a Data goes to
the pending Interests of its name, and a ``*distribute*`` Data also to every app of the longest
persistent entry and to the pending ``*insert*`` twin, and is cached for probes.  ``MemApp`` has
the slice of ``ndnps.client.app.App`` the apps use (express, attach_handler, register, make_data,
send_data, drain, traffic, on_distribute), with python-ndn's exceptions and validators.

``drop(kind, name, to_app)`` may return True to lose a packet ("interest", "data", "push").
"""
from __future__ import annotations

import asyncio
from typing import Callable

from ndn import utils
from ndn.appv2 import NDNApp
from ndn.encoding import Component, FormalName, Name, parse_data
from ndn.types import InterestNack, InterestTimeout, ValidationFailure, ValidResult

from ndnps.ndn.markers import DISTRIBUTE_COMPONENT, INSERT_COMPONENT, REMOVE_COMPONENT

from ndnps.protocol import names

NACK_NO_ROUTE = 150
_MARKERS = {INSERT_COMPONENT, REMOVE_COMPONENT, DISTRIBUTE_COMPONENT}
_INSERT = INSERT_COMPONENT
_REMOVE = REMOVE_COMPONENT


def _key(name: FormalName) -> tuple[bytes, ...]:
    return tuple(bytes(c) for c in name)


def _stripped(key: tuple[bytes, ...]) -> tuple[bytes, ...]:
    return key[1:] if key and key[0] in _MARKERS else key


def _longest(table: dict, key: tuple[bytes, ...]):
    for n in range(len(key), -1, -1):
        if key[:n] in table:
            return table[key[:n]]
    return None


class MemNet:
    def __init__(self, drop: Callable[[str, FormalName, "MemApp"], bool] | None = None) -> None:
        self.drop = drop or (lambda kind, name, app: False)
        self.routes: dict[tuple[bytes, ...], MemApp] = {}
        self.ppit: dict[tuple[bytes, ...], set[MemApp]] = {}
        self.pit: dict[tuple[bytes, ...], set[MemApp]] = {}
        self.cs: dict[tuple[bytes, ...], bytes] = {}
        self.pushes_out = 0

    def app(self) -> "MemApp":
        return MemApp(self)

    def _later(self, fn, *args) -> None:
        asyncio.get_running_loop().call_soon(fn, *args)

    def interest(self, src: "MemApp", name: FormalName, lifetime_ms: int, fresh: bool) -> bool:
        """Forward an Interest; False if no route (the caller Nacks)."""
        key = _key(name)
        route = _stripped(key)
        if key[0] == _INSERT:
            self.ppit.setdefault(route, set()).add(src)
        elif key[0] == _REMOVE:
            members = self.ppit.get(route, set())
            members.discard(src)
            if members:
                return True                     # others still receive: not forwarded
        if not fresh and key in self.cs:
            self._later(src.receive_data, self.cs[key])
            return True
        target = _longest(self.routes, route)
        if target is None:
            return False
        self.pit.setdefault(key, set()).add(src)
        if not self.drop("interest", name, target):
            self._later(target.receive_interest, name, lifetime_ms, src)
        return True

    def data(self, src: "MemApp", wire: bytes) -> None:
        name = parse_data(wire)[0]
        key = _key(name)
        downstream = set(self.pit.pop(key, ()))
        kind = "data"
        if names.is_distribute(name):
            kind = "push"
            rest = _stripped(key)
            downstream |= self.pit.pop((_INSERT,) + rest, set())
            downstream |= set(_longest(self.ppit, rest) or ())
            self.cs[key] = wire
        for app in downstream - {src}:
            self.pushes_out += kind == "push"
            if not self.drop(kind, name, app):
                self._later(app.receive_data, wire)


class MemApp:
    lp_reliability = False          # no link layer to make reliable
    link_repair = False
    reconnects = 0                  # a MemNet link never goes down
    connected = True

    def __init__(self, net: MemNet) -> None:
        self.net = net
        self.handlers: dict[tuple[bytes, ...], Callable] = {}
        self.pending: dict[tuple[bytes, ...], list[tuple[asyncio.Future, Callable]]] = {}
        self.on_distribute = None
        self.bytes_in = self.bytes_out = self.packets_in = self.packets_out = 0

    make_data = staticmethod(NDNApp.make_data)

    def attach_handler(self, name, handler, validator=None) -> None:
        self.handlers[_key(Name.normalize(name))] = handler

    async def register(self, name) -> bool:
        self.net.routes[_key(Name.normalize(name))] = self
        return True

    def express(self, name, validator, app_param=None, signer=None, **kw):
        name = Name.normalize(name)
        lifetime = kw.get("lifetime", 4000)
        self.packets_out += 1
        self.bytes_out += 40 + sum(len(c) for c in name)
        if kw.get("no_response"):
            self.net.interest(self, name, lifetime, kw.get("must_be_fresh", False))
            return None
        return self._express(name, validator, lifetime, kw.get("must_be_fresh", False))

    def express_future(self, name, validator, **kw) -> asyncio.Future:
        return asyncio.ensure_future(self.express(name, validator, **kw))

    async def _express(self, name, validator, lifetime: int, fresh: bool):
        fut = asyncio.get_running_loop().create_future()
        entry = (fut, validator)
        key = _key(name)
        self.pending.setdefault(key, []).append(entry)
        try:
            if not self.net.interest(self, name, lifetime, fresh):
                raise InterestNack(NACK_NO_ROUTE)
            try:
                return await asyncio.wait_for(fut, lifetime / 1000)
            except TimeoutError:
                raise InterestTimeout() from None
        finally:
            entries = self.pending.get(key, [])
            if entry in entries:
                entries.remove(entry)
            if not entries:
                self.pending.pop(key, None)

    def receive_interest(self, name: FormalName, lifetime_ms: int, src: "MemApp") -> None:
        key = _key(name)
        handler = _longest(self.handlers, key)
        if handler is None:
            return
        self.packets_in += 1
        deadline = utils.timestamp() + lifetime_ms

        def reply(wire) -> bool:
            if utils.timestamp() > deadline:
                return False
            self.send_data(bytes(wire))
            return True

        handler(name, None, reply, {"deadline": deadline})

    def send_data(self, wire: bytes) -> None:
        self.packets_out += 1
        self.bytes_out += len(wire)
        self.net.data(self, wire)

    def receive_data(self, wire: bytes) -> None:
        self.packets_in += 1
        self.bytes_in += len(wire)
        name, meta, content, sig = parse_data(wire)
        if self.on_distribute is not None and names.is_distribute(name):
            self.on_distribute(name, meta, content, sig)
        for fut, validator in self.pending.pop(_key(name), []):
            asyncio.get_running_loop().create_task(
                self._validate(fut, validator, name, meta, content, sig))

    @staticmethod
    async def _validate(fut, validator, name, meta, content, sig) -> None:
        ok = await validator(name, sig, {"meta_info": meta})
        if fut.done():
            return
        if ok in (ValidResult.PASS, ValidResult.ALLOW_BYPASS):
            fut.set_result((name, content, {"meta_info": meta, "sig_ptrs": sig}))
        else:
            fut.set_exception(ValidationFailure(name, meta, content, sig, ok))

    async def drain(self) -> None:
        await asyncio.sleep(0)

    def link_events(self) -> dict[str, int]:
        return {"reconnects": self.reconnects, "sent_while_down": 0}

    def traffic(self) -> dict[str, int]:
        return {"bytes_sent": self.bytes_out, "bytes_received": self.bytes_in,
                "packets_sent": self.packets_out, "packets_received": self.packets_in}
