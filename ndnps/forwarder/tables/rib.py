"""RIB: routes registered by apps and configuration; computes the FIB as NFD does.

A route is (prefix, face, origin) -> cost, flags, expiry. The FIB entry of a prefix holds its
own routes (cheapest per face) plus its ancestors' CHILD_INHERIT routes, up to an entry whose
route has CAPTURE.
"""
from __future__ import annotations

from dataclasses import dataclass

from ndnps.ndn.tlv import component_offsets
from .fib import Fib

CHILD_INHERIT = 1
CAPTURE = 2


@dataclass
class Route:
    face: int
    origin: int
    cost: int
    flags: int
    expires: float | None     # monotonic seconds, None = never


class Rib:
    def __init__(self, fib: Fib) -> None:
        self.fib = fib
        self._routes: dict[bytes, dict[tuple[int, int], Route]] = {}
        self._depth: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._routes)

    def entries(self) -> list[tuple[bytes, list[Route]]]:
        return [(p, list(r.values())) for p, r in self._routes.items()]

    def add(self, prefix: bytes, depth: int, route: Route) -> None:
        if depth > self.fib.max_depth:
            raise ValueError(f"prefix deeper than {self.fib.max_depth} components")
        self._routes.setdefault(prefix, {})[(route.face, route.origin)] = route
        self._depth[prefix] = depth
        self._recompute_subtree(prefix)

    def remove(self, prefix: bytes, face: int, origin: int) -> bool:
        routes = self._routes.get(prefix)
        if not routes or routes.pop((face, origin), None) is None:
            return False
        if not routes:
            del self._routes[prefix]
        self._recompute_subtree(prefix)
        return True

    def remove_face(self, face: int) -> None:
        for prefix in [p for p, r in self._routes.items() if any(f == face for f, _ in r)]:
            for key in [k for k in self._routes[prefix] if k[0] == face]:
                self.remove(prefix, *key)

    def expire(self, now: float) -> int:
        gone = [(p, k) for p, routes in self._routes.items() for k, r in routes.items()
                if r.expires is not None and r.expires <= now]
        for prefix, (face, origin) in gone:
            self.remove(prefix, face, origin)
        return len(gone)

    def _nexthops(self, prefix: bytes) -> dict[int, int]:
        hops: dict[int, int] = {}
        own = self._routes.get(prefix, {})
        for r in own.values():
            if r.face not in hops or r.cost < hops[r.face]:
                hops[r.face] = r.cost
        if any(r.flags & CAPTURE for r in own.values()):
            return hops
        # walk ancestors, deepest first, by stripping components
        ancestor = prefix
        while ancestor:
            ancestor = _parent(ancestor)
            routes = self._routes.get(ancestor)
            if routes is None:
                continue
            inherited: dict[int, int] = {}
            for r in routes.values():
                if r.flags & CHILD_INHERIT and r.face not in hops:
                    inherited[r.face] = min(r.cost, inherited.get(r.face, r.cost))
            hops.update(inherited)
            if any(r.flags & CAPTURE for r in routes.values()):
                break
        return hops

    def _recompute_subtree(self, prefix: bytes) -> None:
        for p in [prefix] + [q for q in self._routes if q != prefix and q.startswith(prefix)]:
            if p in self._routes:
                self.fib.set_nexthops(p, self._depth[p], self._nexthops(p))
            else:
                self.fib.set_nexthops(p, 0, {})


def _parent(prefix: bytes) -> bytes:
    offs = component_offsets(prefix)
    return prefix[:offs[-2]] if len(offs) >= 2 else b""
