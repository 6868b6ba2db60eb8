"""Stream framing: packets split across reads, several per read, oversize closes the face."""
from __future__ import annotations

import asyncio
import itertools

from ndnps.ndn import tlv
from ndnps.forwarder.face_table import FaceInfo
from ndnps.forwarder.faces.stream import StreamFace


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
    """No socket under it (fileno -1: no kernel queue to ask) and nothing left unwritten."""

    def __init__(self) -> None:
        self.closed = False

    def get_extra_info(self, key):
        return {"sockname": "/x", "socket": type("S", (), {"fileno": lambda s: -1})()}.get(key)

    def set_write_buffer_limits(self, high=None, low=None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

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


def _feed_all(reads: list[bytes]) -> tuple[list[bytes], bool]:
    framer, got = tlv.StreamFramer(), []
    for r in reads:
        packets, oversize = framer.feed(r)
        got += packets
        if oversize:
            return got, True
    return got, False


def test_framer_every_cut_of_a_stream_gives_its_packets():
    # 1-, 3-, 5- and 9-byte LENGTHs, 3-, 5- and 9-byte TYPEs (an 18-byte header), packets
    # shorter than a whole header
    packets = [pkt(0), pkt(1), pkt(252), pkt(253), pkt(3000), pkt(7, typ=300), pkt(2),
               tlv.encode_varnum(5) + b"\xfe\x00\x00\x00\x03abc", pkt(1, typ=1 << 20),
               tlv.encode_varnum(1 << 40) + b"\xff" + (3).to_bytes(8, "big") + b"xyz", pkt(0)]
    stream = b"".join(packets)
    for a in range(1, len(stream)):
        for b in (a, a + 1, a + 2, a + 5, a + 17, a + 300, len(stream)):
            reads = [stream[:a], b"", stream[a:b], stream[b:]]      # empty reads too
            got, oversize = _feed_all(reads)
            assert (got, oversize) == (packets, False), (a, b)
            assert all(type(p) is bytes for p in got)


def test_framer_byte_by_byte_and_random_reads():
    import random
    rng = random.Random(7)
    packets = [pkt(rng.choice((1, 9, 100, 252, 253, 1000, 8000)), typ=rng.choice((5, 6, 253)))
               for _ in range(200)]
    stream = b"".join(packets)
    head = 5000
    whole = [p for p, end in zip(packets, itertools.accumulate(map(len, packets)))
             if end <= head]
    assert _feed_all([stream[i:i + 1] for i in range(head)]) == (whole, False)
    for _ in range(50):
        cuts = sorted(rng.sample(range(1, len(stream)), rng.randint(1, 400)))
        reads = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)])]
        assert _feed_all(reads) == (packets, False)


def test_framer_oversize_is_found_however_its_header_is_cut():
    huge = tlv.encode_varnum(6) + tlv.encode_varnum(8801)
    stream = pkt(10) + huge + b"x" * 30
    for a in range(1, len(stream)):
        got, oversize = _feed_all([stream[:a], stream[a:]])
        assert oversize and got == [pkt(10)], a


# ---- one core call per read, one send per out-face ------------------------------------------

def _interest(seq: int, prefix: bytes = b"\x08\x05bench") -> bytes:
    name = prefix + b"\x08\x08" + seq.to_bytes(8, "big")
    return tlv.encode_tlv(5, tlv.encode_tlv(7, name) + b"\x0a\x04" + seq.to_bytes(4, "big") +
                          b"\x0c\x02\x0f\xa0")


def _data(seq: int, prefix: bytes = b"\x08\x05bench") -> bytes:
    name = prefix + b"\x08\x08" + seq.to_bytes(8, "big")
    return tlv.encode_tlv(6, tlv.encode_tlv(7, name) + tlv.encode_tlv(0x15, b"x" * 10) +
                          b"\x16\x03\x1b\x01\x00\x17\x20" + bytes(32))


def _forwarder():
    from ndnps.forwarder.pipelines import Forwarder
    from ndnps.forwarder.tables.rib import CHILD_INHERIT, Route
    fw = Forwarder(clock=lambda: 100.0)
    c, p, q = (fw.add_face(True).id for _ in range(3))
    fw.rib.add(b"\x08\x05bench", 1, Route(p, 0, 0, CHILD_INHERIT, None))
    fw.rib.add(b"\x08\x05other", 1, Route(q, 0, 0, CHILD_INHERIT, None))
    return fw, c, p, q


def test_batch_is_the_packets_one_by_one_grouped_by_face():
    wires = [_interest(i, b"\x08\x05bench" if i % 3 else b"\x08\x05other") for i in range(12)]
    wires += [_interest(0), b"\x05\x01", _interest(1)]     # a loop, a malformed, a duplicate
    one, c1, p1, q1 = _forwarder()
    singles = [a for w in wires for a in one.on_receive(c1, w)]
    batch, c2, p2, q2 = _forwarder()
    grouped = batch.on_receive_batch(c2, wires)
    assert set(grouped) == {f for f, _ in singles}
    for face in grouped:
        assert grouped[face] == [item for f, item in singles if f == face]
    assert one.counters == batch.counters
    assert one.faces.get(c1).counters == batch.faces.get(c2).counters
    back = batch.on_receive_batch(p2, [_data(i) for i in range(12) if i % 3])
    assert list(back) == [c2] and len(back[c2]) == 8


def test_send_many_queues_in_order_and_drops_one_by_one_when_full():
    f, _, _ = face()
    written: list[bytes] = []
    f.transport.get_write_buffer_size = lambda: 0           # type: ignore[attr-defined]
    f.transport.writelines = written.extend                 # type: ignore[attr-defined]
    f.send_many([b"a", b"bb"])
    f.send(b"c")
    f._flush()
    assert written == [b"a", b"bb", b"c"]
    from ndnps.forwarder.faces.base import QUEUE_LIMIT_BYTES
    big = b"x" * (QUEUE_LIMIT_BYTES // 2)
    f.send_many([big, big, b"y", big])
    assert f._outq == [big, big] and f.info.counters.drops["queue_full"] == 2


class RecordingTransport(Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[list[bytes]] = []

    def writelines(self, wires) -> None:
        self.writes.append(list(wires))


def test_a_long_read_leaves_in_chunks_so_the_next_hop_starts_early():
    from ndnps.forwarder.config import Config
    from ndnps.forwarder.daemon import READ_CHUNK, ForwarderDaemon
    from ndnps.forwarder.tables.rib import CHILD_INHERIT, Route
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        daemon = ForwarderDaemon(Config())
        consumer, producer = StreamFace(daemon, "unix"), StreamFace(daemon, "unix")
        ctr, ptr = RecordingTransport(), RecordingTransport()
        consumer.connection_made(ctr)
        producer.connection_made(ptr)
        daemon.fw.rib.add(b"\x08\x05bench", 1,
                          Route(producer.info.id, 0, 0, CHILD_INHERIT, None))
        n = 2 * READ_CHUNK + 3
        consumer.data_received(b"".join(_interest(i) for i in range(n)))
        # every full chunk is on its way before the read is handled; the rest waits for the
        # end of the loop turn, to share one write with what other reads add
        assert [len(w) for w in ptr.writes] == [READ_CHUNK, READ_CHUNK]
        loop.run_until_complete(asyncio.sleep(0))
        assert [len(w) for w in ptr.writes] == [READ_CHUNK, READ_CHUNK, 3]
        sent = [p for w in ptr.writes for p in w]
        assert all(b"bench\x08\x08" + i.to_bytes(8, "big") in bytes(p) for i, p in enumerate(sent))
        assert len(sent) == n
        producer.data_received(b"".join(_data(i) for i in range(5)))   # short read: one write
        assert ctr.writes == []
        loop.run_until_complete(asyncio.sleep(0))
        assert [len(w) for w in ctr.writes] == [5]
    finally:
        loop.close()
