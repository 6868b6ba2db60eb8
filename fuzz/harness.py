"""One fuzzing harness for the forwarder's sans-I/O core and management, shared by the
hypothesis tests (tests/unit/test_fw_fuzz.py, in CI) and the long atheris run
(fuzz/fuzz_forwarder.py, by hand).

Each input is (face selector, bytes): the bytes go through `Forwarder.on_receive` on one of a
local, a non-local and a second local face; whatever reaches the internal face goes through
management. Anything raised is a bug; after every packet the tables must be within bounds.
"""
from __future__ import annotations

import hashlib
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

from ndn.app_support.nfd_mgmt import make_command, make_command_v2
from ndn.encoding import Component, InterestParam, MetaInfo, Name, make_data, make_interest
from ndn.security import DigestSha256Signer

from ndnps.forwarder.face_table import INTERNAL_FACE
from ndnps.forwarder.mgmt import Management, install
from ndnps.ndn.packet import Interest, lp_wrap
from ndnps.forwarder.outgoing import Limits
from ndnps.forwarder.pipelines import Forwarder
from ndnps.forwarder.tables.rib import CHILD_INHERIT, Route
from ndnps.ndn.tlv import component_offsets, name_from_str

LIMITS = Limits(pit_entries=256, cs_packets=64, cs_bytes=64 << 10, dead_nonce_capacity=256,
                ppit_entries=16, ppit_faces_per_entry=4, ppit_entries_per_face=4)


class Harness:
    def __init__(self) -> None:
        self.now = 1000.0
        self.fw = Forwarder(LIMITS, clock=lambda: self.now)
        self.mgmt = Management(self.fw)
        # what the internal face hands management waits here (the daemon runs it as a task)
        self.asked: list[tuple[Interest, int]] = []
        install(self.fw, lambda interest, in_face: self.asked.append((interest, in_face)))
        self.faces = [self.fw.add_face(True).id, self.fw.add_face(False).id,
                      self.fw.add_face(True).id]
        for prefix, face in (("/ps", self.faces[1]), ("/w1", self.faces[2]), ("/a", self.faces[0]),
                             ("/isp/y", self.faces[1])):
            name = name_from_str(prefix)
            self.fw.rib.add(name, len(component_offsets(name)),
                            Route(face, 0, 0, CHILD_INHERIT, None))
        self.fw.network_region = [name_from_str("/isp/x/site")]   # hints to /isp/x are stripped
        self.packets = 0

    def feed(self, selector: int, wire: bytes) -> None:
        face = self.faces[selector % len(self.faces)]
        pending = [(face, wire)]
        while pending:                              # management replies re-enter the core
            face, wire = pending.pop()
            for out_face, item in self.fw.on_receive(face, wire):
                assert isinstance(item, bytes) and len(item) <= 8800 + 64
            while self.asked:
                reply = _run(self.mgmt.handle(*self.asked.pop(0)))
                if reply is not None:
                    pending.append((INTERNAL_FACE, reply))
        self.packets += 1
        if selector & 0x80:                         # time passes now and then
            self.now += (selector & 0x7F) / 10.0
            self.fw.tick()
        self.check_bounds()

    def check_bounds(self) -> None:
        fw = self.fw
        assert len(fw.pit) <= LIMITS.pit_entries
        assert len(fw.cs) <= LIMITS.cs_packets and fw.cs.bytes <= LIMITS.cs_bytes
        assert len(fw.dnl) <= LIMITS.dead_nonce_capacity
        assert len(fw.ppit) <= LIMITS.ppit_entries
        assert all(len(e.faces) <= LIMITS.ppit_faces_per_entry for e in fw.ppit.entries())


_T = TypeVar("_T")


def _run(coro: Coroutine[Any, Any, _T]) -> _T:
    """Management coroutines never wait on I/O here (no face creation): drive them inline."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise AssertionError("management awaited I/O in the harness")


def seeds() -> list[bytes]:
    """Valid packets of every kind the forwarder meets, for mutation."""
    signer = DigestSha256Signer()
    out = []
    for uri in ("/a/b", "/ps/t/w1", "/w1/ps/t", "/*insert*/ps/t", "/*remove*/ps/t",
                "/*distribute*/ps/t/v=1/seg=0", "/localhost/nfd/faces/list"):
        name = Name.from_str(uri)
        out.append(bytes(make_interest(name, InterestParam(can_be_prefix=True, must_be_fresh=True,
                                                           hop_limit=4, lifetime=100,
                                                           nonce=int.from_bytes(os.urandom(4),
                                                                                "big")))))
        out.append(bytes(make_data(name, MetaInfo(freshness_period=500,
                                                  final_block_id=Component.from_segment(3)),
                                   b"x" * 40, signer=signer)))
    # a full name (implicit digest of the /a/b Data above) and a ForwardingHint
    digest = hashlib.sha256(out[1]).digest()
    out.append(bytes(make_interest(Name.from_str("/a/b") + [Component.from_bytes(
        digest, Component.TYPE_IMPLICIT_SHA256)], InterestParam(lifetime=100))))
    out.append(bytes(make_interest(Name.from_str("/a/c"), InterestParam(
        forwarding_hint=["/isp/x", "/isp/y"], lifetime=100))))
    out.append(lp_wrap(out[0], b"\x01\x02\x03\x04"))
    out.append(lp_wrap(out[0], None, 150))
    out.append(b"\x64\x00")
    for verb, kw in (("register", {"name": "/p", "cost": 3}), ("unregister", {"name": "/p"}),
                     ("register", {"name": "/q", "expiration_period": 10})):
        out.append(bytes(make_interest(make_command_v2("rib", verb, **kw), InterestParam(),
                                       app_param=b"", signer=DigestSha256Signer(for_interest=True))))
    out.append(bytes(make_interest(make_command("rib", "register", name="/legacy"),
                                   InterestParam())))
    out.append(bytes(make_interest(make_command_v2("strategy-choice", "set", name="/a",
                                                   strategy="/localhost/nfd/strategy/multicast"),
                                   InterestParam(), app_param=b"",
                                   signer=DigestSha256Signer(for_interest=True))))
    return out
