"""On-demand UDP faces are bounded: a face whose first datagram is garbage closes at once, and
past the cap the least recently seen on-demand face is evicted; config and management faces
neither count nor go. The real daemon owns the channel; only the socket is a stand-in."""
from __future__ import annotations

import pytest
from ndn.encoding import InterestParam, Name, make_interest

from ndnps.forwarder.config import ConfigError, Config, parse_config
from ndnps.forwarder.daemon import ForwarderDaemon
from ndnps.forwarder.faces.udp import (
    IDLE_TIMEOUT, MAX_ON_DEMAND_FACES, ON_DEMAND, PERMANENT, PERSISTENT, UdpChannel,
)
from ndnps.forwarder.mgmt import status_snapshot
from ndnps.forwarder.tables.rib import CHILD_INHERIT, Route
from ndnps.ndn.tlv import MAX_PACKET_SIZE, name_from_str
from tests.support.fwkit import FakeDatagramPort

pytestmark = pytest.mark.timeout(30)

GARBAGE = b"\x99\x03abc"                    # unknown top-level TLV type: malformed


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def channel(max_on_demand: int = MAX_ON_DEMAND_FACES,
            idle_timeout: float = IDLE_TIMEOUT) -> tuple[UdpChannel, ForwarderDaemon, Clock]:
    daemon = ForwarderDaemon(Config())
    clock = Clock()
    ch = UdpChannel(daemon, idle_timeout, max_on_demand, counters=daemon.fw.faces.counters,
                    clock=clock)
    FakeDatagramPort().start(ch)
    return ch, daemon, clock


def interest(name: str = "/nobody") -> bytes:
    return bytes(make_interest(Name.from_str(name), InterestParam(nonce=7)))


def peer(port: int) -> tuple[str, int]:
    return ("10.0.0.1", port)


def on_demand_ports(ch: UdpChannel) -> list[int]:
    return [addr[1] for addr, f in ch.faces.items() if f.info.persistency == ON_DEMAND]


def test_garbage_first_datagrams_hold_no_face():
    ch, daemon, _ = channel()
    for port in range(20000, 20280):
        ch.datagram_received(GARBAGE, peer(port))
    ch.datagram_received(b"\x06\xfd\x23\x28" + b"\x00" * MAX_PACKET_SIZE, peer(30000))
    ch.datagram_received(interest()[:-3], peer(30001))      # truncated
    assert ch.faces == {} and len(ch.on_demand_faces) == 0
    assert [f.id for f in daemon.fw.faces] == [1]             # the internal face alone
    counters = status_snapshot(daemon.fw)["counters"]
    assert counters["udp_faces_rejected"] == 282 and counters["udp_faces_evicted"] == 0


def test_a_good_first_datagram_keeps_its_face_and_later_garbage_is_only_dropped():
    ch, daemon, _ = channel()
    ch.datagram_received(interest(), peer(1))
    face = ch.faces[peer(1)]
    assert face.info.counters.in_interests == 1
    assert ch.port.sent                                      # its Nack NoRoute went out
    ch.datagram_received(GARBAGE, peer(1))
    assert ch.faces[peer(1)] is face and face.info.counters.drops["malformed"] == 1
    assert daemon.fw.faces.counters.udp_faces_rejected == 0


def test_cap_evicts_the_least_recently_seen_on_demand_face():
    ch, daemon, clock = channel(max_on_demand=3)
    for port in (1, 2, 3):
        ch.datagram_received(interest(), peer(port))
        clock.now += 1
    ch.datagram_received(interest("/again"), peer(1))      # 1 seen again: 2 is now the oldest
    clock.now += 1
    evicted_id = ch.faces[peer(2)].info.id
    ch.datagram_received(interest(), peer(4))
    assert sorted(on_demand_ports(ch)) == [1, 3, 4]
    assert evicted_id not in daemon.fw.faces and evicted_id not in daemon.faces
    ch.datagram_received(interest(), peer(5))              # then 3, then 1
    ch.datagram_received(interest(), peer(6))
    assert sorted(on_demand_ports(ch)) == [4, 5, 6]
    assert daemon.fw.faces.counters.udp_faces_evicted == 3


def test_garbage_at_the_cap_evicts_nobody():
    ch, daemon, clock = channel(max_on_demand=2)
    ch.datagram_received(interest(), peer(1))
    ch.datagram_received(interest(), peer(2))
    for port in range(100, 150):
        clock.now += 1
        ch.datagram_received(GARBAGE, peer(port))
    assert sorted(on_demand_ports(ch)) == [1, 2]
    counters = daemon.fw.faces.counters
    assert (counters.udp_faces_rejected, counters.udp_faces_evicted) == (50, 0)


def test_config_and_management_faces_neither_count_nor_go():
    ch, daemon, clock = channel(max_on_demand=1, idle_timeout=10)
    kept = [ch.open_face("10.0.0.9", 6363, PERSISTENT), ch.open_face("10.0.0.8", 6363, PERMANENT)]
    for port in (1, 2, 3):
        ch.datagram_received(interest(), peer(port))
    assert on_demand_ports(ch) == [3]
    assert daemon.fw.faces.counters.udp_faces_evicted == 2
    clock.now += 11
    ch.expire_idle(clock())
    assert on_demand_ports(ch) == [] and all(ch.faces[f.addr] is f for f in kept)
    ch.datagram_received(GARBAGE, kept[0].addr)     # from a config face's peer: that face
    assert ch.faces[kept[0].addr] is kept[0] and kept[0].info.counters.drops["malformed"] == 1


def test_idle_on_demand_faces_expire_in_order_of_last_datagram():
    ch, daemon, clock = channel(idle_timeout=10)
    for port in (1, 2, 3):
        ch.datagram_received(interest(), peer(port))
        clock.now += 4                         # seen at 1000, 1004, 1008
    ch.datagram_received(interest("/again"), peer(1))     # 1 seen again at 1012
    clock.now = 1014.5
    ch.expire_idle(clock())                    # 2 was idle 10.5 s
    assert sorted(on_demand_ports(ch)) == [1, 3]
    clock.now = 1018.5
    ch.expire_idle(clock())
    assert on_demand_ports(ch) == [1]
    assert daemon.fw.faces.counters.udp_faces_evicted == 0   # expiry is not eviction


def test_udp_table_in_config():
    cfg = parse_config({"udp": {"idle_timeout": 30, "max_on_demand_faces": 64}})
    assert (cfg.udp_faces.idle_timeout, cfg.udp_faces.max_on_demand_faces) == (30.0, 64)
    default = parse_config({}).udp_faces
    assert (default.idle_timeout, default.max_on_demand_faces) == (600.0, 1024)


@pytest.mark.parametrize("udp, key", [
    ({"idle_timeout": 0}, "udp.idle_timeout"),
    ({"idle_timeout": float("nan")}, "udp.idle_timeout"),
    ({"idle_timeout": "10"}, "udp.idle_timeout"),
    ({"max_on_demand_faces": 0}, "udp.max_on_demand_faces"),
    ({"max_on_demand_faces": 1.5}, "udp.max_on_demand_faces"),
    ({"max_on_demand_faces": True}, "udp.max_on_demand_faces"),
    ({"max_faces": 10}, "udp.max_faces"),
])
def test_bad_udp_values_name_their_key(udp, key):
    with pytest.raises(ConfigError, match=key):
        parse_config({"udp": udp})



def test_closing_faces_leaves_no_pit_record_behind():
    """Evicted faces leave the PIT (in- and out-records); a garbage face, which carried no
    Interest and so is not looked for in the PIT, leaves everyone else's entries alone."""
    ch, daemon, _ = channel(max_on_demand=2)
    fw = daemon.fw
    ch.datagram_received(interest(), peer(9))
    upstream = ch.faces[peer(9)].info.id
    fw.rib.add(name_from_str("/p"), 1, Route(upstream, 0, 0, CHILD_INHERIT, None))
    ch.datagram_received(interest("/p/1"), peer(1))         # in-record on 1, out-record on 9
    downstream = ch.faces[peer(1)].info.id
    [entry] = list(fw.pit)
    assert set(entry.in_records) == {downstream} and set(entry.out_records) == {upstream}
    ch.datagram_received(GARBAGE, peer(2))
    assert list(fw.pit) == [entry] and fw.faces.counters.udp_faces_rejected == 1
    ch.datagram_received(interest(), peer(3))               # evicts the upstream
    assert set(entry.out_records) == set() and set(entry.in_records) == {downstream}
    ch.datagram_received(interest(), peer(4))               # evicts the downstream
    assert fw.faces.counters.udp_faces_evicted == 2 and len(fw.pit) == 0


def test_a_turns_datagrams_leave_in_one_call_at_its_end_and_a_lone_one_is_not_held():
    daemon = ForwarderDaemon(Config())
    ch = UdpChannel(daemon, counters=daemon.fw.faces.counters, clock=Clock())
    port = FakeDatagramPort(deferred=True).start(ch)
    a, b = ch.open_face("10.0.0.1", 6363), ch.open_face("10.0.0.3", 6363)
    for i in range(6):
        (a if i % 2 else b).send(interest(f"/x/{i}"))
    assert port.wire == []                             # this turn's, until its end
    port.run_turn()
    assert port.calls == [6] and [addr[0] for _, addr in port.wire] == \
        ["10.0.0.3", "10.0.0.1"] * 3                   # in the order sent
    a.send(interest("/lone"))
    port.run_turn()
    assert port.calls == [6, 1]                        # at the end of its own turn


def test_one_reads_datagrams_go_up_in_one_batch_per_face_in_order():
    ch, daemon, _ = channel()
    seen: list[tuple[int, int]] = []
    real = daemon.receive_batch
    daemon.receive_batch = lambda face, wires: (seen.append((face.addr[1], len(wires))),  # type: ignore[method-assign]
                                               real(face, wires))
    ch.datagrams_received([(interest(f"/r/{i}"), peer(1 + i % 2)) for i in range(7)])
    # a new face's first datagram goes up alone (it decides whether the face stays)
    assert sorted(seen) == [(1, 1), (1, 3), (2, 1), (2, 2)]
    seen.clear()
    ch.datagrams_received([(interest(f"/s/{i}"), peer(1 + i % 2)) for i in range(7)])
    assert sorted(seen) == [(1, 4), (2, 3)]
    assert ch.faces[peer(1)].info.counters.in_interests == 8


def test_datagrams_the_kernel_refuses_are_held_and_sent_first_when_it_has_room():
    daemon = ForwarderDaemon(Config())
    ch = UdpChannel(daemon, counters=daemon.fw.faces.counters, clock=Clock())
    port = FakeDatagramPort(room=2, deferred=True).start(ch)
    a = ch.open_face("10.0.0.1", 6363)
    for i in range(5):
        a.send(interest(f"/h/{i}"))
    port.run_turn()
    assert len(port.wire) == 2 and ch.paused and port.waiting
    a.send(interest("/h/5"))                           # paused: waits in the face's queue
    assert len(a.queue) == 1
    port.kernel_sent(10)
    names = [decoded_name(w) for w, _ in port.wire]
    assert names == [f"/h/{i}" for i in range(6)] and not ch.paused


def decoded_name(wire: bytes) -> str:
    from ndnps.ndn.packet import decode
    from ndnps.ndn.tlv import name_to_str
    return name_to_str(decode(wire).name)               # type: ignore[union-attr]
