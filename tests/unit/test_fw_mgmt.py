"""Management commands through the sans-I/O core: defaults as NFD, bad parameters answered with
NFD's status codes and always with ControlParameters, nothing from non-local faces."""
from __future__ import annotations

from ndn.app_support.nfd_mgmt import make_command_v2, \
    parse_response
from ndn.encoding import Component, InterestParam, Name, make_interest, parse_data
from ndn.security import DigestSha256Signer

from fuzz.harness import _run
from ndnps.forwarder.face_table import INTERNAL_FACE, ReliabilityCounters
from ndnps.forwarder.mgmt import Management, install
from ndnps.forwarder.pipelines import Forwarder
from ndnps.forwarder.tables.rib import CHILD_INHERIT
from ndnps.ndn.tlv import name_from_str


def frozen() -> float:
    """The forwarder's clock here: a command's Interest and its reply meet in the PIT however
    slowly the host runs (tests of expiry move a clock of their own)."""
    return 1000.0


def setup():
    fw = Forwarder(clock=frozen)
    return fw, attach(fw, Management(fw)), fw.add_face(True).id


def attach(fw: Forwarder, mgmt: Management) -> Management:
    """Management on the internal face as the daemon installs it; the Interests it is handed
    wait in `mgmt.asked` (the daemon runs each as a task)."""
    mgmt.asked = []
    install(fw, lambda interest, in_face: mgmt.asked.append((interest, in_face)))
    return mgmt


def command(fw, mgmt, face, name) -> dict | None:
    wire = make_interest(name, InterestParam(), app_param=b"",
                         signer=DigestSha256Signer(for_interest=True))
    assert fw.on_receive(face, bytes(wire)) == []
    while mgmt.asked:
        reply = _run(mgmt.handle(*mgmt.asked.pop(0)))
        out = fw.on_receive(INTERNAL_FACE, reply)
        assert [f for f, _ in out] == [face]
        _, _, content, _ = parse_data(out[0][1])
        return parse_response(content)
    return None


def cmd(module, verb, **kw):
    return make_command_v2(module, verb, **kw)


def raw_params(module, verb, cp: bytes):
    return Name.from_str(f"/localhost/nfd/{module}/{verb}") + [Component.from_bytes(cp)]


def test_register_defaults_as_nfd():
    fw, mgmt, face = setup()
    r = command(fw, mgmt, face, cmd("rib", "register", name="/app"))
    assert (r["status_code"], r["face_id"], r["origin"], r["cost"], r["flags"]) == \
        (200, face, 0, 0, CHILD_INHERIT)
    assert fw.fib.find_exact(name_from_str("/app")).nexthops == {face: 0}


def test_errors_carry_status_codes_and_parameters():
    fw, mgmt, face = setup()
    assert command(fw, mgmt, face, cmd("rib", "register", cost=3))["status_code"] == 400
    deep = "/" + "/".join("c" for _ in range(33))
    assert command(fw, mgmt, face, cmd("rib", "register", name=deep))["status_code"] == 414
    assert command(fw, mgmt, face, cmd("rib", "register", name="/x",
                                       face_id=9999))["status_code"] == 410
    assert command(fw, mgmt, face, cmd("rib", "frobnicate", name="/x"))["status_code"] == 501
    r = command(fw, mgmt, face, cmd("strategy-choice", "set", name="/x",
                                    strategy="/localhost/nfd/strategy/nonesuch"))
    assert r["status_code"] == 404
    r = command(fw, mgmt, face, raw_params("rib", "register", b"\x68\x05\x07\x03\x08\x09x"))
    assert r["status_code"] == 400                      # Name component overruns
    r = command(fw, mgmt, face, raw_params("rib", "register", b"garbage"))
    assert r["status_code"] == 400
    assert command(fw, mgmt, face, Name.from_str("/localhost/nfd/rib/register"))[
        "status_code"] == 400                           # no parameters at all
    assert command(fw, mgmt, face, cmd("faces", "destroy"))["status_code"] == 400
    # found by atheris: a Strategy Name with a component of type 0x78 whose TLV-LENGTH python-ndn
    # parses but cannot encode back (struct.error from its encoder)
    odd = bytes.fromhex("682e07030801616b27072578c77ef7a2b6efc251ffffffffffffff64c59be63365187d"
                        "dff7e5fbf061890c020fa024740220df")
    r = command(fw, mgmt, face, raw_params("strategy-choice", "set", odd))
    assert r["status_code"] == 400


def test_strategy_parameters_set_listed_and_refused_as_nfd():
    fw, mgmt, face = setup()
    r = command(fw, mgmt, face, cmd(
        "strategy-choice", "set", name="/x",
        strategy="/localhost/nfd/strategy/best-route/v=5/retx-suppression-initial~2"))
    assert r["status_code"] == 200
    chosen = dict(fw.strategy_choice.items())[name_from_str("/x")]
    assert chosen.suppression.initial == 0.002
    assert chosen.name == "/localhost/nfd/strategy/best-route/retx-suppression-initial~2"
    r = command(fw, mgmt, face, cmd(
        "strategy-choice", "set", name="/x",
        strategy="/localhost/nfd/strategy/best-route/v=5/retx-suppression-initial~0"))
    assert r["status_code"] == 409 and "retx-suppression-initial" in r["status_text"]
    assert dict(fw.strategy_choice.items())[name_from_str("/x")] is chosen   # unchanged


def test_unregister_and_route_expiry():
    fw, mgmt, face = setup()
    t = [0.0]
    fw.clock = lambda: t[0]
    command(fw, mgmt, face, cmd("rib", "register", name="/a"))
    command(fw, mgmt, face, cmd("rib", "register", name="/b", expiration_period=500))
    assert command(fw, mgmt, face, cmd("rib", "unregister", name="/a"))["status_code"] == 200
    assert fw.fib.find_exact(name_from_str("/a")) is None
    t[0] = 1.0
    fw.tick()
    assert fw.fib.find_exact(name_from_str("/b")) is None


def test_non_local_faces_cannot_reach_management():
    fw, mgmt, _ = setup()
    remote = fw.add_face(False).id
    wire = make_interest(cmd("rib", "register", name="/evil"), InterestParam(), app_param=b"",
                         signer=DigestSha256Signer(for_interest=True))
    assert fw.on_receive(remote, bytes(wire)) == []
    assert fw.faces.get(remote).counters.drops["localhost_scope"] == 1
    assert fw.fib.find_exact(name_from_str("/evil")) is None


def test_faces_update_turns_lp_reliability_on_and_off_as_nfd():
    fw = Forwarder(clock=frozen)
    calls = []

    def set_reliability(face_id, on):
        calls.append((face_id, on))
        fw.faces.get(face_id).lp_reliability = ReliabilityCounters() if on else None
        return True

    mgmt = attach(fw, Management(fw, set_reliability=set_reliability))
    face = fw.add_face(True).id
    other = fw.add_face(True).id
    r = command(fw, mgmt, face, cmd("faces", "update", flags=2, mask=2))
    assert (r["status_code"], r["face_id"], r["flags"]) == (200, face, 2)
    assert calls == [(face, True)]
    # another face by id; Flags without Mask, and other flags, refused
    r = command(fw, mgmt, face, cmd("faces", "update", face_id=other, flags=0, mask=2))
    assert (r["status_code"], r["face_id"], r["flags"]) == (200, other, 0)
    assert command(fw, mgmt, face, cmd("faces", "update", flags=2))["status_code"] == 400
    assert command(fw, mgmt, face, cmd("faces", "update", flags=1, mask=1))["status_code"] == 409
    assert command(fw, mgmt, face, cmd("faces", "update", face_id=9999, flags=2,
                                       mask=2))["status_code"] == 404
    assert command(fw, mgmt, face, cmd("faces", "update", face_persistency=2))[
        "status_code"] == 409
    # nothing asked: the face's state, unchanged
    r = command(fw, mgmt, face, cmd("faces", "update"))
    assert (r["status_code"], r["flags"]) == (200, 2)
    assert calls == [(face, True), (other, False)]
    assert fw.faces.get(face).lp_reliability is not None
    assert fw.faces.get(other).lp_reliability is None


def test_faces_update_without_a_daemon_cannot_change_reliability():
    fw, mgmt, face = setup()
    assert command(fw, mgmt, face, cmd("faces", "update", flags=2, mask=2))["status_code"] == 404


def test_faces_create_turns_lp_reliability_on_for_the_face_it_creates():
    fw = Forwarder(clock=frozen)
    made: dict[str, int] = {}
    calls = []

    async def create_face(uri, persistency):
        if uri in made:
            return made[uri], False
        info = fw.add_face(False)
        info.remote_uri = uri
        made[uri] = info.id
        return info.id, True

    def set_reliability(face_id, on):
        calls.append((face_id, on))
        fw.faces.get(face_id).lp_reliability = ReliabilityCounters() if on else None
        return True

    mgmt = attach(fw, Management(fw, create_face=create_face,
                                 set_reliability=set_reliability))
    face = fw.add_face(True).id
    r = command(fw, mgmt, face, cmd("faces", "create", uri="udp4://127.0.0.1:7001",
                                    flags=2, mask=2))
    assert (r["status_code"], r["flags"]) == (200, 2)
    assert calls == [(r["face_id"], True)]
    r = command(fw, mgmt, face, cmd("faces", "create", uri="udp4://127.0.0.1:7002"))
    assert (r["status_code"], r["flags"]) == (200, 0)
    # an existing face: 409 with its parameters, its state unchanged (as NFD)
    r = command(fw, mgmt, face, cmd("faces", "create", uri="udp4://127.0.0.1:7002",
                                    flags=2, mask=2))
    assert (r["status_code"], r["flags"]) == (409, 0)
    # Flags without Mask; flags not implemented (local fields, congestion marking)
    assert command(fw, mgmt, face, cmd("faces", "create", uri="udp4://127.0.0.1:7003",
                                       flags=2))["status_code"] == 400
    assert command(fw, mgmt, face, cmd("faces", "create", uri="udp4://127.0.0.1:7003",
                                       flags=4, mask=4))["status_code"] == 406
    assert "udp4://127.0.0.1:7003" not in made and len(calls) == 1
