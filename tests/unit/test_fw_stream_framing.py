"""Stream framing: packets split across reads, several per read, oversize closes the face."""
from __future__ import annotations

import asyncio

from forwarder import tlv
from forwarder.face_table import FaceInfo
from forwarder.faces.stream import StreamFace


def pkt(n: int, typ: int = 5) -> bytes:
    return tlv.encode_tlv(typ, bytes([n % 251]) * n)


class Owner:
    def __init__(self) -> None:
        self.got: list[bytes] = []
        self.calls = 0

    def face_up(self, face, local, remote_uri, local_uri, persistency) -> FaceInfo:
        return FaceInfo(300, local, remote_uri, local_uri, persistency)

    def receive(self, face, wire: bytes) -> None:
        self.got.append(wire)

    def receive_batch(self, face, wires: list[bytes]) -> None:
        self.calls += 1
        assert all(type(w) is bytes for w in wires)
        self.got.extend(wires)

    def face_down(self, face) -> None:
        pass


class Transport:
    def __init__(self) -> None:
        self.closed = False

    def get_extra_info(self, key):
        return {"sockname": "/x", "socket": type("S", (), {"fileno": lambda s: 3})()}.get(key)

    def close(self) -> None:
        self.closed = True


def face() -> tuple[StreamFace, Owner, Transport]:
    asyncio.set_event_loop(asyncio.new_event_loop())
    owner, tr = Owner(), Transport()
    f = StreamFace(owner, "unix")
    f.connection_made(tr)
    return f, owner, tr


def test_split_frames_header_forms():
    small, big = pkt(10), pkt(300)               # 1-byte and 3-byte LENGTH
    packets, off, oversize = tlv.split_frames(small + big + big[:7])
    assert packets == [small, big] and off == len(small + big) and not oversize
    assert tlv.split_frames(b"\x05") == ([], 0, False)
    assert tlv.split_frames(bytearray(small)) == ([small], len(small), False)
    huge = tlv.encode_varnum(5) + tlv.encode_varnum(9000)
    assert tlv.split_frames(small + huge) == ([small], len(small), True)


def test_one_batch_per_read_in_order_and_reassembly():
    f, owner, _ = face()
    stream = b"".join(pkt(n) for n in (1, 50, 252, 253, 400, 8000, 3))
    cuts = [0, 1, 2, 60, 61, 700, 5000, 9000, len(stream)]
    for a, b in zip(cuts, cuts[1:]):
        f.data_received(stream[a:b])
    assert b"".join(owner.got) == stream
    assert owner.got == [pkt(n) for n in (1, 50, 252, 253, 400, 8000, 3)]
    f.data_received(pkt(5) + pkt(6) + pkt(7))
    assert owner.got[-3:] == [pkt(5), pkt(6), pkt(7)]
    assert owner.calls <= len(cuts)              # never one call per packet of a read


def test_oversize_packet_closes_after_the_ones_before_it():
    f, owner, tr = face()
    f.data_received(pkt(10) + tlv.encode_varnum(6) + tlv.encode_varnum(8801) + b"x" * 20)
    assert owner.got == [pkt(10)]
    assert tr.closed and f.info.counters.drops["oversize"] == 1
