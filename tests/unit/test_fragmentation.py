"""NDNLPv2 fragmentation and reassembly (ndnps/ndn/fragmentation.py), sans-I/O on a fake
clock: fragments in NFD's format both ways, out of order, lost, duplicated, malformed, within
the bounds; below them link reliability, where a lost fragment is resent alone; and one real
exchange between two forwarders' UDP channels on loopback with a small MTU."""
from __future__ import annotations

import asyncio
import random
import socket

import pytest
import uvloop

from ndnps.forwarder.config import parse_config
from ndnps.forwarder.daemon import ForwarderDaemon
from ndnps.ndn.congestion import congestion_mark, set_congestion_mark
from ndnps.ndn.fragmentation import (FRAG_OVERHEAD, FragmentationCounters, Fragmenter,
                                     Reassembler, ReassemblyOptions, _read_plain)
from ndnps.ndn.packet import Data, Nack, decode, lp_wrap
from ndnps.ndn.reliability import WRAP_OVERHEAD, LpReliability
from ndnps.ndn.tlv import (LP_ACK, LP_CONGESTION_MARK, LP_FRAG_COUNT, LP_FRAG_INDEX,
                           LP_FRAGMENT, LP_NACK, LP_PACKET, LP_PIT_TOKEN, LP_SEQUENCE,
                           LP_TX_SEQUENCE, DecodeError, encode_nonneg, encode_tlv, read_tl)
from tests.support.fwkit import data, interest, nv

pytestmark = pytest.mark.timeout(30)

MTU = 1472
DATA = data("/big/d", content=bytes(range(256)) * 32)          # 8 KB and some
TOKEN = b"\x0a\x0b\x0c\x0d"


def fields(wire: bytes) -> list[tuple[int, bytes]]:
    """An LpPacket's fields, (TLV-TYPE, value), by an independent walk."""
    typ, off, end = read_tl(wire, 0, len(wire))
    assert typ == LP_PACKET and end == len(wire)
    out = []
    while off < end:
        t, v, off = read_tl(wire, off, end)
        out.append((t, wire[v:off]))
    return out


def value(wire: bytes, typ: int) -> bytes:
    return dict(fields(wire))[typ]


def number(wire: bytes, typ: int) -> int:
    return int.from_bytes(value(wire, typ), "big")


def nfd_fragments(packet: bytes, mtu: int, seq: int, headers: bytes = b"") -> list[bytes]:
    """Fragments as NFD's LpFragmenter writes them (MAX_FRAG_OVERHEAD 49 octets, the first
    fragment's payload smaller by its other headers), encoded field by field here."""
    room = mtu - 49
    chunks = [packet[:room - len(headers)]]
    rest = packet[room - len(headers):]
    chunks += [rest[i:i + room] for i in range(0, len(rest), room)]
    out = []
    for i, chunk in enumerate(chunks):
        body = (encode_tlv(LP_SEQUENCE, ((seq + i) % (1 << 64)).to_bytes(8, "big"))
                + encode_tlv(LP_FRAG_INDEX, encode_nonneg(i))
                + encode_tlv(LP_FRAG_COUNT, encode_nonneg(len(chunks)))
                + (headers if i == 0 else b"") + encode_tlv(LP_FRAGMENT, chunk))
        out.append(encode_tlv(LP_PACKET, body))
    return out


def reassemble(frags, r: Reassembler | None = None, now: float = 0.0):
    r = r if r is not None else Reassembler()
    out = [r.receive(f, now) for f in frags]
    assert out[:-1] == [None] * (len(out) - 1)
    return out[-1]


# ---- the fragmenter -------------------------------------------------------------------------

def test_a_packet_over_the_mtu_leaves_as_fragments_in_ndnlpv2_field_order():
    f = Fragmenter()
    frags = f.fragment(DATA, MTU)
    assert len(frags) == 6 and all(len(w) <= MTU for w in frags)
    seqs = [number(w, LP_SEQUENCE) for w in frags]
    assert seqs == [(seqs[0] + i) % (1 << 64) for i in range(6)]
    for i, w in enumerate(frags):
        assert [t for t, _ in fields(w)] == [LP_SEQUENCE, LP_FRAG_INDEX, LP_FRAG_COUNT,
                                             LP_FRAGMENT]
        assert len(value(w, LP_SEQUENCE)) == 8                     # as ndn-cxx requires
        assert (number(w, LP_FRAG_INDEX), number(w, LP_FRAG_COUNT)) == (i, 6)
    assert b"".join(value(w, LP_FRAGMENT) for w in frags) == DATA
    assert f.counters.fragmented == 1 and f.counters.fragments_out == 6
    assert f.fragment(data("/small"), MTU) == [data("/small")]      # fits: as it is


def test_other_headers_go_in_the_first_fragment_only_and_come_back_with_the_packet():
    nack = set_congestion_mark(lp_wrap(interest("/n", app_param=b"p" * 3000), TOKEN, 150))
    frags = Fragmenter().fragment(nack, 1000)
    assert [t for t, _ in fields(frags[0])] == [LP_SEQUENCE, LP_FRAG_INDEX, LP_FRAG_COUNT,
                                                LP_PIT_TOKEN, LP_NACK, LP_CONGESTION_MARK,
                                                LP_FRAGMENT]
    assert all([t for t, _ in fields(w)][3] == LP_FRAGMENT for w in frags[1:])
    whole = reassemble(frags)
    assert whole == nack                    # the same fields, in the same order
    pkt = decode(whole)
    assert isinstance(pkt, Nack) and pkt.reason == 150 and pkt.interest.pit_token == TOKEN
    assert congestion_mark(whole) == 1


def test_link_fields_of_a_packet_are_not_copied_into_its_fragments():
    stale = encode_tlv(LP_PACKET, encode_tlv(LP_SEQUENCE, bytes(8))
                       + encode_tlv(LP_PIT_TOKEN, TOKEN) + encode_tlv(LP_TX_SEQUENCE, bytes(8))
                       + encode_tlv(LP_FRAGMENT, DATA))
    frags = Fragmenter().fragment(stale, MTU)
    assert [t for t, _ in fields(frags[0])].count(LP_SEQUENCE) == 1
    assert LP_TX_SEQUENCE not in dict(fields(frags[0]))
    assert reassemble(frags) == lp_wrap(DATA, TOKEN)


@pytest.mark.parametrize("mtu", [576, 577, 1000, 1452, 1472, 4000, 8799])
def test_every_fragment_fits_and_the_count_is_the_least(mtu):
    f = Fragmenter()
    for size in sorted({min(n, 8700) for n in (mtu - 20, mtu + 1, 3 * mtu, 8700)}):
        packet = data("/s", content=b"z" * size)
        frags = f.fragment(lp_wrap(packet, TOKEN), mtu)
        if len(lp_wrap(packet, TOKEN)) <= mtu:
            continue
        assert all(len(w) <= mtu for w in frags)
        room = mtu - FRAG_OVERHEAD
        assert len(frags) == 1 + -(-(len(packet) - (room - 6)) // room)
        assert reassemble(frags) == lp_wrap(packet, TOKEN)


def test_a_packet_that_cannot_be_split_is_dropped_and_counted():
    counters = FragmentationCounters()
    f = Fragmenter(counters, max_fragments=5)
    assert f.fragment(DATA, 1000) == []                             # 9 fragments needed
    headers = lp_wrap(DATA, b"t" * 32)
    assert Fragmenter(counters).fragment(headers, 60) == []         # no room past headers
    assert Fragmenter(counters).fragment(b"\x64\x05\x50\x09abc" + b"x" * 2000, 576) == []
    assert counters.fragment_errors == 3 and counters.fragmented == 0


def test_sequences_wrap_around_64_bits():
    f = Fragmenter()
    f.next_sequence = (1 << 64) - 3
    frags = f.fragment(DATA, MTU)
    assert [number(w, LP_SEQUENCE) for w in frags] == [(1 << 64) - 3, (1 << 64) - 2,
                                                        (1 << 64) - 1, 0, 1, 2]
    assert f.next_sequence == 3
    assert reassemble(reversed(frags)) == DATA


# ---- the reassembler ------------------------------------------------------------------------

def test_fragments_in_any_order_make_the_packet_once():
    rng = random.Random(5)
    f, r = Fragmenter(), Reassembler()
    packets = [data(f"/o/{i}", content=bytes([i]) * 5000) for i in range(20)]
    frags = [w for p in packets for w in f.fragment(p, MTU)]
    rng.shuffle(frags)
    out = [r.receive(w, 0.0) for w in frags]
    assert sorted(p for p in out if p is not None) == sorted(packets)
    assert r.counters.reassembled == 20 and len(r) == 0 and r.bytes == 0


def test_duplicates_are_dropped_and_counted():
    frags = Fragmenter().fragment(DATA, MTU)
    r = Reassembler()
    assert r.receive(frags[0], 0.0) is None and r.receive(frags[0], 0.0) is None
    assert reassemble(frags[1:], r) == DATA
    assert r.counters.duplicates == 1 and r.counters.reassembled == 1


def test_a_partial_packet_times_out_after_its_latest_fragment():
    frags = Fragmenter().fragment(DATA, MTU)
    r = Reassembler(ReassemblyOptions(timeout=0.5))
    r.receive(frags[0], 0.0)
    r.receive(frags[1], 0.4)                    # refreshes: due at 0.9
    r.expire(0.89)
    assert len(r) == 1
    r.expire(0.9)
    assert len(r) == 0 and r.bytes == 0 and r.counters.timed_out == 1
    # the rest, late, make a new partial packet that times out in its turn
    for w in frags[2:]:
        assert r.receive(w, 1.0) is None
    assert r.receive(frags[0], 1.6) is None and r.counters.timed_out == 2 and len(r) == 1


def test_partial_packets_are_bounded_in_number_and_octets():
    f = Fragmenter()
    r = Reassembler(ReassemblyOptions(max_partial=3, max_bytes=10_000))
    firsts = [f.fragment(data(f"/b/{i}", content=b"b" * 6000), MTU) for i in range(5)]
    for frags in firsts[:4]:
        r.receive(frags[0], 0.0)
    assert len(r) == 3 and r.counters.evicted == 1            # the least recently added to
    for frags in firsts[1:4]:
        r.receive(frags[1], 0.1)            # 3 x 2 x 1446 octets: under 10,000
    assert r.counters.evicted == 1 and r.bytes == 6 * 1446
    r.receive(firsts[1][2], 0.2)            # 7 fragments: over; the least recent (2) goes
    assert r.counters.evicted == 2 and r.bytes == 5 * 1446 and len(r) == 2
    assert r.receive(firsts[2][2], 0.3) is None and len(r) == 3       # 2 again, afresh
    assert r.counters.timed_out == 0


@pytest.mark.parametrize("bad, why", [
    (encode_tlv(LP_PACKET, encode_tlv(LP_SEQUENCE, bytes(8)) + encode_tlv(LP_FRAG_INDEX, b"\x02")
                + encode_tlv(LP_FRAG_COUNT, b"\x02") + encode_tlv(LP_FRAGMENT, b"x")), "FragIndex"),
    (encode_tlv(LP_PACKET, encode_tlv(LP_FRAG_INDEX, b"\x00") + encode_tlv(LP_FRAG_COUNT, b"\x02")
                + encode_tlv(LP_FRAGMENT, b"x")), "Sequence"),
    (encode_tlv(LP_PACKET, encode_tlv(LP_SEQUENCE, bytes(8)) + encode_tlv(LP_FRAG_INDEX, b"\x00")
                + encode_tlv(LP_FRAG_COUNT, (401).to_bytes(2, "big"))
                + encode_tlv(LP_FRAGMENT, b"x")), "FragCount"),
    (encode_tlv(LP_PACKET, encode_tlv(LP_SEQUENCE, bytes(8)) + encode_tlv(LP_FRAG_COUNT, b"\x02")),
     "payload"),
    (encode_tlv(LP_PACKET, encode_tlv(LP_SEQUENCE, bytes(3)) + encode_tlv(LP_FRAG_COUNT, b"\x02")
                + encode_tlv(LP_FRAGMENT, b"x")), "NonNegativeInteger"),
    (bytes([LP_PACKET, 30, LP_SEQUENCE, 8]) + bytes(8), "truncated|exceeds|TLV"),
])
def test_malformed_fragments_raise_and_are_counted(bad, why):
    r = Reassembler()
    with pytest.raises(DecodeError, match=why):
        r.receive(bad, 0.0)
    assert r.counters.malformed == 1 and len(r) == 0


def test_a_fragcount_that_changes_or_a_packet_over_8800_octets_drops_the_partial():
    frags = nfd_fragments(DATA, MTU, seq=100)
    r = Reassembler()
    r.receive(frags[0], 0.0)
    liar = nfd_fragments(DATA, 1000, seq=100)[1]            # message 100, FragCount 9
    with pytest.raises(DecodeError, match="FragCount changed"):
        r.receive(liar, 0.0)
    assert len(r) == 0
    huge = nfd_fragments(b"\x06" * 9000, MTU, seq=500)
    with pytest.raises(DecodeError, match="8800|MAX_PACKET_SIZE"):
        reassemble(huge, r)
    assert r.counters.malformed == 2 and len(r) == 0 and r.bytes == 0


def test_whole_packets_pass_through_untouched():
    r = Reassembler()
    single = encode_tlv(LP_PACKET, encode_tlv(LP_SEQUENCE, bytes(8))
                        + encode_tlv(LP_FRAG_COUNT, b"\x01") + encode_tlv(LP_FRAGMENT, DATA))
    for wire in (DATA, lp_wrap(DATA, TOKEN), single, set_congestion_mark(DATA), b""):
        assert r.receive(wire, 0.0) is wire
    assert isinstance(decode(single), Data)
    assert r.counters.as_dict() == FragmentationCounters().as_dict()


@pytest.mark.parametrize("seq", [7, (1 << 64) - 2])
def test_nfd_fragments_are_reassembled_with_their_first_fragment_headers(seq):
    headers = encode_tlv(LP_PIT_TOKEN, TOKEN) + encode_tlv(LP_CONGESTION_MARK, b"\x01")
    frags = nfd_fragments(DATA, MTU, seq, headers)
    assert len(frags) == 6
    order = [3, 0, 5, 1, 2, 4]
    whole = reassemble([frags[i] for i in order])
    pkt = decode(whole)
    assert isinstance(pkt, Data) and pkt.wire == DATA and pkt.pit_token == TOKEN
    assert congestion_mark(whole) == 1


# ---- with link reliability below ------------------------------------------------------------

def test_each_fragment_is_a_reliable_frame_and_a_lost_one_is_resent_alone():
    sender = LpReliability(mtu=MTU)
    receiver = LpReliability(mtu=MTU)
    receiver._acks = list(range(1000, 1100))        # Acks to piggyback: frames stay <= MTU
    f, r = Fragmenter(), Reassembler()
    frags = f.fragment(lp_wrap(DATA, TOKEN), MTU - WRAP_OVERHEAD)
    frames = [sender.wrap(w, 0.0) for w in frags]
    for w, frame in zip(frags, frames):
        assert len(frame) <= MTU
        types = [t for t, _ in fields(frame)]
        assert types.count(LP_SEQUENCE) == 1 and types == sorted(types[:-1]) + [LP_FRAGMENT]
        assert value(frame, LP_SEQUENCE) == value(w, LP_SEQUENCE)        # the frame number
    lost = 2
    up = []
    for i, frame in enumerate(frames):
        if i != lost:
            got = receiver.receive(frame, 0.001)
            assert got is not None and [t for t, _ in fields(got)][:3] == [
                LP_SEQUENCE, LP_FRAG_INDEX, LP_FRAG_COUNT]
            up.append(r.receive(got, 0.001))
    assert up == [None] * 5 and len(r) == 1
    # the receiver's Acks for the later frames show the loss: that frame alone goes again
    reply = receiver.wrap(interest("/back"), 0.002)
    assert LP_ACK in dict(fields(reply))
    sender.receive(reply, 0.003)
    again = sender.poll(0.003)
    assert len(again) == 1 and sender.counters.retransmitted == 1
    assert value(again[0], LP_SEQUENCE) == value(frags[lost], LP_SEQUENCE)
    whole = r.receive(receiver.receive(again[0], 0.004), 0.004)
    assert whole == lp_wrap(DATA, TOKEN) and r.counters.reassembled == 1


# ---- two forwarders' UDP channels on loopback, one face with a small MTU ------------------------

def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _exchange(reliability: bool) -> tuple[bytes, dict, dict]:
    """consumer -> A -(udp, mtu 1000)- B -> producer: an 8 KB Data back, through A's
    reassembly.  The apps are bare UDP sockets on loopback (on-demand faces, 8800 octets)."""
    loop = asyncio.get_running_loop()
    port_a, port_b = _free_udp_port(), _free_udp_port()

    def config(port: int, peer: int) -> dict:
        return {"listen": {"unix": "", "tcp": 0, "udp": port, "host": "127.0.0.1"},
                "faces": [{"name": "peer", "uri": f"udp4://127.0.0.1:{peer}", "mtu": 1000,
                           "reliability": reliability}],
                "routes": [{"prefix": "/p", "face": "peer"}]}

    a = ForwarderDaemon(parse_config(config(port_a, port_b)))
    b = ForwarderDaemon(parse_config(config(port_b, port_a)))
    b.config.routes.clear()                         # B routes /p to the producer instead
    await a.start()
    await b.start()
    producer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    consumer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for s in (producer, consumer):
            s.bind(("127.0.0.1", 0))
            s.setblocking(False)
        producer.sendto(interest("/hello"), ("127.0.0.1", port_b))     # opens its face on B
        await asyncio.wait_for(loop.sock_recv(producer, 9000), 5)       # its Nack
        [prod_face] = [f.id for f in b.fw.faces
                       if f.remote_uri.endswith(f":{producer.getsockname()[1]}")]
        b.fw.fib.add_nexthop(nv("/p"), 1, prod_face, 0)
        content = bytes(range(256)) * 32
        consumer.sendto(interest("/p/x"), ("127.0.0.1", port_a))
        got = await asyncio.wait_for(loop.sock_recv(producer, 9000), 5)
        assert decode(got).name == nv("/p/x")
        producer.sendto(data("/p/x", content=content), ("127.0.0.1", port_b))
        reply = await asyncio.wait_for(loop.sock_recv(consumer, 9000), 5)
        [a_peer] = [f for f in a.fw.faces if f.remote_uri.endswith(f":{port_b}")]
        [b_peer] = [f for f in b.fw.faces if f.remote_uri.endswith(f":{port_a}")]
        assert a_peer.mtu == b_peer.mtu == 1000
        return (reply, a_peer.lp_fragmentation.as_dict(),     # type: ignore[union-attr]
                b_peer.lp_fragmentation.as_dict())            # type: ignore[union-attr]
    finally:
        producer.close()
        consumer.close()
        await a.stop()
        await b.stop()


@pytest.mark.parametrize("reliability", [False, True])
@pytest.mark.parametrize("run", [asyncio.run, uvloop.run], ids=["asyncio", "uvloop"])
def test_an_8kb_data_crosses_a_small_mtu_udp_link_in_fragments_and_arrives_whole(run,
                                                                                 reliability):
    reply, at_a, at_b = run(_exchange(reliability))
    assert reply == data("/p/x", content=bytes(range(256)) * 32)
    assert at_b["fragmented"] == 1 and at_b["fragments_out"] == 9
    assert at_a["reassembled"] == 1 and at_a["fragments_in"] == 9
    assert at_a["malformed"] == at_a["timed_out"] == 0


def test_truncated_or_flipped_fragments_never_raise_anything_but_decodeerror():
    """The fixed-offset reader agrees with a TLV walk; every truncation of a fragment, and
    every octet of its headers flipped, is taken or refused as malformed, never a crash."""
    rng = random.Random(9)
    frags = Fragmenter().fragment(lp_wrap(DATA, TOKEN), MTU)
    assert _read_plain(frags[0]) is None                        # other headers: the walk
    for w in frags[1:]:
        assert _read_plain(w) == (number(w, LP_SEQUENCE), number(w, LP_FRAG_INDEX),
                                  number(w, LP_FRAG_COUNT), value(w, LP_FRAGMENT))
    for wire in frags[:2]:                      # with other headers, and plain
        cases = [wire[:cut] for cut in range(1, 60)]
        for i in range(1, 40):
            for _ in range(3):
                flipped = bytearray(wire)
                flipped[i] ^= rng.randrange(1, 256)
                cases.append(bytes(flipped))
        for case in cases:
            r = Reassembler()
            try:
                r.receive(case, 0.0)
            except DecodeError:
                assert r.counters.malformed == 1
            assert r.bytes == sum(p.size for p in r._partial.values())
