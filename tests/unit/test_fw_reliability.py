"""NDNLPv2 link reliability (ndnps/ndn/reliability.py), sans-I/O: two ends joined by a
lossy link on a fake clock.  The asyncio side (ReliableLink) runs on a fake event loop clock
too (looptime: it jumps to the next timer when nothing is ready), so its timers fire at exactly
their time however loaded the host is; the one uvloop test asserts nothing about real time."""
from __future__ import annotations

import asyncio
import random

import pytest

from ndnps.ndn.reliability import (LpReliability, ReliabilityOptions, ReliableLink,
                                         _read_own, older_than, split_lp)
from ndnps.ndn.packet import Data, Interest, Nack, decode, lp_wrap
from ndnps.ndn.tlv import (LP_ACK, LP_FRAGMENT, LP_PACKET, LP_SEQUENCE, LP_TX_SEQUENCE,
                           MAX_PACKET_SIZE, encode_tlv, read_tl)
from tests.support.fwkit import data, interest

pytestmark = [pytest.mark.timeout(30), pytest.mark.looptime]


def fields(wire: bytes) -> list[tuple[int, bytes]]:
    typ, off, end = read_tl(wire, 0, len(wire))
    assert typ == LP_PACKET
    out = []
    while off < end:
        t, v, off = read_tl(wire, off, end)
        out.append((t, wire[v:off]))
    return out


def txseq(wire: bytes) -> int:
    return int.from_bytes(dict(fields(wire))[LP_TX_SEQUENCE], "big")


def acks(wire: bytes) -> list[int]:
    return [int.from_bytes(v, "big") for t, v in fields(wire) if t == LP_ACK]


INTEREST = interest("/a/b", nonce=7)
DATA = data("/a/b", content=b"x" * 100)


def test_a_packet_travels_wrapped_and_comes_out_bare_and_acknowledged():
    a, b = LpReliability(), LpReliability()
    w = a.wrap(INTEREST, 0.0)
    assert w[0] == LP_PACKET and dict(fields(w))[LP_FRAGMENT] == INTEREST
    assert [t for t, _ in fields(w)] == [LP_SEQUENCE, LP_TX_SEQUENCE, LP_FRAGMENT]
    assert len(dict(fields(w))[LP_TX_SEQUENCE]) == 8          # fixed width, as ndn-cxx
    assert b.receive(w, 0.001) == INTEREST
    assert isinstance(decode(b.receive(a.wrap(DATA, 0.0), 0.001)), Data)
    assert a.unacked == 2
    # b's next packet carries both Acks, ahead of its own TxSequence
    back = b.wrap(DATA, 0.002)
    assert acks(back) == [txseq(w), txseq(w) + 1]
    assert a.receive(back, 0.003) == DATA
    assert a.unacked == 0 and a.counters.acknowledged == 2
    # the forwarder's decoder reads a wrapped packet too (the headers are ignorable)
    assert isinstance(decode(w), Interest)


def test_lengths_either_side_of_the_one_octet_form_are_read_back_by_python_ndn():
    """Fragment and LpPacket TLV-LENGTHs of 252 (one octet) and 253 (three) are written in
    their shortest form and read back by an independent decoder, with and without other
    headers and Acks in front of the Fragment."""
    from ndn.encoding.ndnlp_v2 import parse_lp_packet_v2
    a = LpReliability()
    lengths = set()
    for k in range(175, 265):
        packet = encode_tlv(0x05, b"i" * k)
        for other_headers in (False, True):
            a._acks = [5, 6] if other_headers else []
            wire = a.wrap(lp_wrap(packet, pit_token=b"\x01\x02") if other_headers else packet,
                          0.0)
            _, off, end = read_tl(wire, 0, len(wire))
            assert off == (2 if end - off < 253 else 4) and end == len(wire)
            fragment = dict(fields(wire))[LP_FRAGMENT]
            at = wire.index(fragment) - (1 if len(fragment) < 253 else 3)
            assert wire[at - 1] == LP_FRAGMENT             # the shortest TLV-LENGTH form
            lengths.update({end - off, len(fragment)})
            lp = parse_lp_packet_v2(wire, with_tl=True)
            assert bytes(lp.fragment) == packet
            assert (lp.pit_token is not None) == other_headers
    assert {252, 253} <= lengths


def test_other_lp_headers_are_kept_and_the_stripped_packet_decodes():
    token = b"\x01\x02\x03\x04"
    nack = lp_wrap(INTEREST, token, 150)
    a, b = LpReliability(), LpReliability()
    w = a.wrap(nack, 0.0)
    types = [t for t, _ in fields(w)]
    assert types == sorted(types[:-1]) + [LP_FRAGMENT] and len(types) == 5
    up = b.receive(w, 0.0)
    assert up == nack
    pkt = decode(up)
    assert isinstance(pkt, Nack) and pkt.reason == 150


def test_an_ack_only_packet_after_ack_delay_and_nothing_is_handed_up():
    opts = ReliabilityOptions(ack_delay=0.005)
    a, b = LpReliability(opts), LpReliability(opts)
    b.receive(a.wrap(INTEREST, 0.0), 0.0)
    assert b.deadline() == pytest.approx(0.005)
    assert b.poll(0.004) == []
    [idle] = b.poll(0.005)
    assert [t for t, _ in fields(idle)] == [LP_ACK]
    assert b.counters.idle_acks == 1 and b.deadline() is None
    assert a.receive(idle, 0.006) is None
    assert a.unacked == 0


def test_a_loss_is_repaired_after_three_later_frames_are_acknowledged():
    a, b = LpReliability(), LpReliability()
    sent = [a.wrap(interest(f"/p/{i}", nonce=i), 0.0) for i in range(5)]
    for w in sent[:1] + sent[2:]:                 # the second frame is lost
        b.receive(w, 0.001)
    assert a.deadline() != 0.0                    # no frame known lost yet
    a.receive(b.wrap(DATA, 0.002), 0.003)         # Acks of 1, 3, 4, 5
    assert a.deadline() == 0.0                    # a frame known lost: poll now
    [again] = a.poll(0.003)
    assert txseq(again) != txseq(sent[1])          # a new TxSequence for the retransmission
    assert dict(fields(again))[LP_SEQUENCE] == dict(fields(sent[1]))[LP_SEQUENCE]
    assert b.receive(again, 0.004) == interest("/p/1", nonce=1)
    assert a.counters.retransmitted == 1


def test_a_skipped_txsequence_sends_the_acks_at_once_and_the_loss_is_repaired_in_one_trip():
    # a one-way burst (a push): nothing would carry b's Acks for ack_delay; a gap in the
    # TxSequences makes them due now, and the first later Ack marks the hole lost
    opts = ReliabilityOptions(ack_delay=0.005)
    a, b = LpReliability(opts), LpReliability(opts)
    sent = [a.wrap(interest(f"/p/{i}", nonce=i), 0.0) for i in range(4)]
    b.receive(sent[0], 0.001)
    assert b.deadline() == pytest.approx(0.006)      # in order: the Ack may wait
    b.receive(sent[2], 0.001)                         # the second frame is lost
    assert b.counters.gaps == 1 and b.deadline() == pytest.approx(0.001)
    [idle] = b.poll(0.001)
    assert acks(idle) == [txseq(sent[0]), txseq(sent[2])]
    a.receive(idle, 0.002)
    [again] = a.poll(0.002)
    assert dict(fields(again))[LP_SEQUENCE] == dict(fields(sent[1]))[LP_SEQUENCE]
    b.receive(sent[3], 0.003)                         # next in order again: no new gap
    assert b.receive(again, 0.003) == interest("/p/1", nonce=1)
    assert b.counters.gaps == 1 and b.deadline() == pytest.approx(0.008)


def test_duplicates_are_known_for_the_window_and_the_memory_is_bounded():
    a, b = LpReliability(), LpReliability(ReliabilityOptions(recent_rx=4))
    first = [a.wrap(INTEREST, 0.0) for _ in range(12)]
    for i, w in enumerate(first):
        assert b.receive(w, 0.0) == INTEREST
        assert len(b._recent) + len(b._recent_old) < 2 * 4
        # every one of the last recent_rx frames handed up is still known
        for old in first[max(0, i - 3):i + 1]:
            assert b.receive(old, 0.0) is None
    assert b.counters.duplicates == sum(min(i + 1, 4) for i in range(12))
    assert b.receive(first[0], 0.0) == INTEREST     # long forgotten: handed up again


def test_a_lone_loss_is_repaired_after_the_rto():
    a = LpReliability(ReliabilityOptions(initial_rto=0.2))
    a.wrap(INTEREST, 0.0)                          # lost, and nothing after it
    assert a.deadline() == pytest.approx(0.2)
    assert a.poll(0.1) == []
    [again] = a.poll(0.2)
    assert dict(fields(again))[LP_FRAGMENT] == INTEREST


def test_a_retransmission_whose_ack_was_lost_is_delivered_once_and_acknowledged_again():
    a, b = LpReliability(ReliabilityOptions(initial_rto=0.1)), LpReliability()
    w = a.wrap(INTEREST, 0.0)
    assert b.receive(w, 0.001) == INTEREST
    b.poll(1.0)                                    # its Ack is lost
    [again] = a.poll(0.1)
    assert b.receive(again, 0.101) is None and b.counters.duplicates == 1
    assert a.receive(b.wrap(DATA, 0.102), 0.103) == DATA
    assert a.unacked == 0


def test_acks_go_twice_so_a_packet_lost_with_its_acks_costs_no_retransmission():
    a, b = LpReliability(), LpReliability()
    sent = [a.wrap(interest(f"/p/{i}", nonce=i), 0.0) for i in range(3)]
    for w in sent[:2]:
        b.receive(w, 0.001)
    lost = b.wrap(DATA, 0.002)                    # carries the Acks of frames 0 and 1: lost
    assert acks(lost) == [txseq(sent[0]), txseq(sent[1])]
    b.receive(sent[2], 0.003)
    back = b.wrap(DATA, 0.004)                    # frame 2's Ack, and 0 and 1's again
    assert acks(back) == [txseq(sent[2]), txseq(sent[0]), txseq(sent[1])]
    a.receive(back, 0.005)
    assert a.unacked == 0 and not a.lost and a.poll(0.005) == []
    assert a.counters.retransmitted == 0
    assert acks(b.wrap(DATA, 0.006)) == [txseq(sent[2])]     # then once more, and no more
    assert acks(b.wrap(DATA, 0.007)) == []


def test_timeouts_back_off_and_a_frame_is_given_up_after_max_retx():
    a = LpReliability(ReliabilityOptions(max_retx=2, initial_rto=0.1, max_rto=0.3))
    a.wrap(INTEREST, 0.0)
    assert len(a.poll(0.1)) == 1 and a.rto == pytest.approx(0.2)
    assert a.poll(0.25) == [] and len(a.poll(0.31)) == 1 and a.rto == pytest.approx(0.3)
    assert a.poll(0.65) == [] and a.unacked == 0 and a.counters.given_up == 1


def test_rto_follows_the_measured_round_trip_within_bounds():
    opts = ReliabilityOptions(min_rto=0.03, max_rto=2.0)
    a, b = LpReliability(opts), LpReliability(opts)
    for i in range(20):
        b.receive(a.wrap(INTEREST, i * 1.0), i * 1.0 + 0.004)
        a.receive(b.wrap(DATA, i * 1.0 + 0.005), i * 1.0 + 0.010)
    assert a.rto == pytest.approx(0.03)            # 10 ms round trips: floored at min_rto
    b.receive(a.wrap(INTEREST, 100.0), 100.0)
    a.receive(b.wrap(DATA, 101.0), 101.0)          # one 1 s round trip raises it
    assert 0.1 < a.rto <= 2.0


def test_bounds_unacked_frames_and_pending_acks():
    opts = ReliabilityOptions(max_unacked=10, max_acks=5)
    a, b = LpReliability(opts), LpReliability(opts)
    for i in range(25):
        b.receive(a.wrap(INTEREST, 0.0), 0.0)
    assert a.unacked == 10 and a.counters.given_up == 15
    assert len(acks(b.wrap(DATA, 0.0))) == 5 and b.counters.acks_dropped == 20


def test_acks_never_push_a_packet_past_the_mtu():
    a, b = LpReliability(), LpReliability()
    for i in range(2000):
        b.receive(a.wrap(INTEREST, 0.0), 0.0)
    big = data("/big", content=b"y" * 8000)
    w = b.wrap(big, 0.0)
    assert len(w) <= MAX_PACKET_SIZE and 0 < len(acks(w)) < 2000
    rest = b.wrap(big, 0.0)
    assert len(rest) <= MAX_PACKET_SIZE


def test_a_packet_too_large_to_wrap_goes_as_it_came():
    a = LpReliability()
    huge = data("/h", content=b"z" * (MAX_PACKET_SIZE - 60))
    assert a.wrap(huge, 0.0) == huge and a.unacked == 0


def test_bare_and_malformed_packets_are_handed_up_unchanged():
    b = LpReliability()
    assert b.receive(INTEREST, 0.0) == INTEREST
    bad = bytes([LP_PACKET, 10, 0xfd, 0x03])
    assert b.receive(bad, 0.0) == bad and b.counters.malformed == 1
    assert b.receive(b"", 0.0) == b""


def test_sequence_numbers_wrap_around():
    assert older_than(5, 3) and not older_than(3, 5)
    assert older_than(2, (1 << 64) - 2)            # 2 was sent after 2^64 - 2
    a, b = LpReliability(), LpReliability()
    a._next_seq = (1 << 64) - 2
    ws = [a.wrap(interest(f"/w/{i}", nonce=i), 0.0) for i in range(5)]
    for w in ws[:1] + ws[2:]:
        b.receive(w, 0.0)
    a.receive(b.wrap(DATA, 0.0), 0.0)
    assert a.deadline() == 0.0 and len(a.poll(0.0)) == 1


def test_split_lp_returns_headers_and_the_network_packet():
    token = encode_tlv(0x62, b"\x09\x09")
    frag = encode_tlv(LP_FRAGMENT, INTEREST)
    wire = encode_tlv(LP_PACKET, token + frag)
    assert split_lp(wire) == (token, INTEREST) and split_lp(INTEREST) == (b"", INTEREST)


@pytest.mark.parametrize("loss", [0.05, 0.2])
def test_every_packet_arrives_exactly_once_over_a_lossy_link(loss):
    """Both directions lose `loss` of everything (Acks too); 2000 packets each way, sent in
    bursts, with time advancing: each arrives once, in spite of lost Acks and frames."""
    rng = random.Random(int(loss * 100))
    # a round fails with (1 - (1 - loss)^2): at 20 %, 13 tries all fail for 1 frame in 10^6
    opts = ReliabilityOptions(max_retx=12, initial_rto=0.05, min_rto=0.02)
    ends = [LpReliability(opts), LpReliability(opts)]
    got: list[list[bytes]] = [[], []]
    t = 0.0
    in_flight: list[tuple[float, int, bytes]] = []      # (arrival, to, wire)

    def send(frm: int, wire: bytes) -> None:
        if rng.random() >= loss:
            in_flight.append((t + 0.002, 1 - frm, wire))

    packets = [[interest(f"/x/{side}/{i}", nonce=i) for i in range(2000)]
               for side in (0, 1)]
    i = 0
    while t < 60.0:
        for side in (0, 1):
            for p in packets[side][i:i + 20]:
                send(side, ends[side].wrap(p, t))
        i += 20
        t += 0.001
        arrived = [f for f in in_flight if f[0] <= t]
        in_flight = [f for f in in_flight if f[0] > t]
        for _, to, wire in arrived:
            up = ends[to].receive(wire, t)
            if up is not None:
                got[to].append(up)
        for side in (0, 1):
            for wire in ends[side].poll(t):
                send(side, wire)
        if i >= 2000 and not in_flight and all(e.unacked == 0 for e in ends) \
                and all(e.deadline() is None for e in ends):
            break
    for side in (0, 1):
        assert sorted(got[1 - side]) == sorted(packets[side])
        assert ends[side].counters.given_up == 0
    assert ends[0].counters.retransmitted > 0


def test_a_peer_that_sends_no_sequence_is_read_by_the_general_reader():
    """NFD without fragmentation may send TxSequence and Acks with no Sequence field: the
    packet is handed up and acknowledged (duplicates then cannot be told apart)."""
    a, b = LpReliability(), LpReliability()
    w = a.wrap(INTEREST, 0.0)
    seq = txseq(w)
    foreign = encode_tlv(LP_PACKET, encode_tlv(LP_ACK, (5).to_bytes(8, "big"))
                         + encode_tlv(LP_TX_SEQUENCE, (77).to_bytes(8, "big"))
                         + encode_tlv(LP_FRAGMENT, DATA))
    assert b.receive(foreign, 0.0) == DATA
    assert acks(b.wrap(INTEREST, 0.0)) == [77]
    # and Acks for our frames in a foreign-shaped packet count
    reply = encode_tlv(LP_PACKET, encode_tlv(LP_ACK, seq.to_bytes(8, "big")))
    assert a.receive(reply, 0.001) is None and a.unacked == 0


def test_a_lost_last_frame_is_probed_after_two_round_trips_before_the_rto():
    opts = ReliabilityOptions(min_pto=0.004, min_rto=0.05, ack_delay=0.001)
    a, b = LpReliability(opts), LpReliability(opts)
    b.receive(a.wrap(INTEREST, 0.0), 0.001)
    [ack] = b.poll(0.002)
    a.receive(ack, 0.003)                          # one 3 ms round trip
    sent = [a.wrap(interest(f"/t/{i}", nonce=i), 1.0) for i in range(3)]
    for w in sent[:2]:                             # the burst's last frame is lost
        b.receive(w, 1.001)
    [ack] = b.poll(1.002)
    a.receive(ack, 1.003)
    assert a.unacked == 1 and a.deadline() == pytest.approx(1.006)
    assert a.poll(1.005) == []
    [probe] = a.poll(1.006)
    assert dict(fields(probe))[LP_FRAGMENT] == interest("/t/2", nonce=2)
    assert a.counters.tail_probes == 1 and a.counters.retransmitted == 1
    # one probe per Ack: the next re-send waits for the RTO
    assert a.poll(1.03) == [] and a.deadline() == pytest.approx(1.006 + a.rto)


async def test_a_late_timer_lets_waiting_acks_in_before_judging_frames_lost():
    """The loop was busy past an RTO (uvloop runs timers before reading sockets): the timer
    waits one more socket read; an Ack read then saves the frame from a needless re-send."""
    from ndnps.ndn.reliability import DEFER

    for acked in (True, False):
        sent: list[bytes] = []
        link = ReliableLink(sent.append, asyncio.get_running_loop())
        peer = LpReliability(ReliabilityOptions(ack_delay=0.0))
        link.send(INTEREST)
        peer.receive(sent[0], 0.0)
        [ack] = peer.poll(0.0)
        link._timer.cancel()                        # the timer does not run in time: ...
        await asyncio.sleep(link.core.rto + 0.01)   # ... the loop is busy past the RTO
        link._fire()                                # late: deferred, nothing sent yet
        assert len(sent) == 1 and link._timer is not None
        if acked:
            assert link.receive_many([ack]) == []   # the read that was waiting
        await asyncio.sleep(DEFER + 0.005)
        assert len(sent) == (1 if acked else 2)
        assert link.core.unacked == (0 if acked else 1)
        link.close()


async def test_a_loss_that_acks_reveal_is_repaired_within_the_read_that_revealed_it():
    """The retransmission leaves with whatever the read makes the face send, not from a timer
    on a later turn of the event loop (one wakeup more at each end)."""
    sent: list[bytes] = []
    link = ReliableLink(sent.append, asyncio.get_running_loop())
    peer = LpReliability()
    link.send(interest("/t/1", nonce=1))
    link.send(interest("/t/2", nonce=2))        # the first is lost; the peer gets the second
    peer.receive(sent[1], 0.0)
    reply = peer.wrap(DATA, 0.0)                # its Ack rides on this
    assert link.receive_many([reply]) == [DATA]
    assert len(sent) == 3 and dict(fields(sent[2]))[LP_FRAGMENT] == interest("/t/1", nonce=1)
    assert link.core.counters.retransmitted == 1 and not link.core.lost
    link.close()


def test_under_uvloop_a_timer_is_set_once_and_finds_its_deadline_due():
    """uvloop's clock counts whole milliseconds and rounds a timer's delay to the nearest: a
    timer set for 1.4 ms ran at 1 ms, found nothing due, and re-armed every turn of the loop
    until the clock ticked over (15 timers for one Ack).  Real time: the test waits for the Ack
    however late a loaded host sends it (a late timer's deferral is not counted)."""

    import uvloop

    async def main() -> tuple[int, int]:
        loop = asyncio.get_running_loop()
        sent: list[bytes] = []
        link = ReliableLink(sent.append, asyncio.get_running_loop())
        link.core.options.ack_delay = 0.0014
        link.receive_many([LpReliability().wrap(INTEREST, 0.0)])     # owes an Ack in 1.4 ms
        timers: list[object] = []
        ack_left = loop.create_future()

        def watch() -> None:                    # every turn of the loop, until the Ack left
            timer = link._timer
            if timer is not None and not link._deferred and (not timers or timers[-1] is not timer):
                timers.append(timer)            # (a late loop's extra wait is not counted)
            if not sent:
                loop.call_soon(watch)
            else:
                ack_left.set_result(None)
        watch()
        await ack_left
        link.close()
        return len(timers), len(sent)

    assert uvloop.run(main()) == (1, 1)


async def test_the_timer_follows_a_deadline_that_moved_later_and_stops_when_none_is_left():
    """Acks that rode on a packet, frames acknowledged: a timer left at the old deadline would
    wake the process for nothing (10-12 times per version for each worker, before)."""

    sent: list[bytes] = []
    link = ReliableLink(sent.append, asyncio.get_running_loop())
    peer = LpReliability()
    link.send(interest("/t/1", nonce=1))
    assert link._timer_at == pytest.approx(link.core.deadline())     # the frame's RTO
    peer.receive(sent[0], 0.0)
    # a 10 ms round trip (fake clock): the next frame's tail probe (two round trips) is due
    # well after the Ack delay, by more than SLACK, whatever the ReliabilityOptions defaults
    await asyncio.sleep(0.01)
    assert link.receive_many([peer.wrap(DATA, 0.0)]) == [DATA]       # acked; now it owes an Ack
    owed = link.core.deadline()
    await asyncio.sleep(0)                      # after a read too: once per loop turn
    assert link.core.unacked == 0 and link._timer_at == pytest.approx(owed)
    link.send(interest("/t/2", nonce=2))                             # the Ack rides on this
    assert acks(sent[1])
    await asyncio.sleep(0)                                           # the timer follows, once per turn
    assert link._timer_at == pytest.approx(link.core.deadline()) and link._timer_at > owed
    peer.receive(sent[1], 0.0)
    [ack_only] = peer.poll(1e9)
    assert link.receive_many([ack_only]) == [] and link.core.deadline() is None
    await asyncio.sleep(0)
    assert link._timer is None
    link.send(interest("/t/3", nonce=3))
    link.send(interest("/t/4", nonce=4))        # a settle is pending ...
    link.close()
    await asyncio.sleep(0)
    assert link._timer is None                  # ... and finds the link closed


async def test_a_batch_is_wrapped_in_order_and_kept_until_acknowledged():
    sent: list[bytes] = []
    link = ReliableLink(sent.append, asyncio.get_running_loop())
    batch = [interest(f"/t/{i}", nonce=i) for i in range(5)]
    wrapped = link.wrap_many(batch)
    assert sent == [] and link.core.unacked == 5 and link._timer is not None
    assert [dict(fields(w))[LP_FRAGMENT] for w in wrapped] == batch
    assert [txseq(w) for w in wrapped] == [txseq(wrapped[0]) + i for i in range(5)]
    peer = LpReliability()
    for w in wrapped:
        peer.receive(w, 0.0)
    [ack_only] = peer.poll(1e9)
    assert link.receive_many([ack_only]) == [] and link.core.unacked == 0
    await asyncio.sleep(0)
    assert link._timer is None
    link.close()


@pytest.mark.parametrize("content,acks", [(b"", 0), (b"x" * 100, 1), (b"y" * 8000, 3),
                                          (b"z" * 200, 700)])
def test_own_frames_read_at_fixed_offsets_as_the_general_reader_reads_them(content, acks):
    """The fixed-offset reader agrees with a TLV walk of the same frame; every truncation of it
    and every flipped octet of its headers is left to the general reader, never misread."""
    a = LpReliability()
    a._acks = list(range(10**6, 10**6 + acks))
    packet = data("/d", content=content)
    wire = a.wrap(packet, 0.0)
    frame, acked, txseq, start = _read_own(wire)
    fields = {}
    _, off, end = read_tl(wire, 0, len(wire))
    while off < end:
        typ, voff, off = read_tl(wire, off, end)
        fields.setdefault(typ, []).append(wire[voff:off])
    assert frame == int.from_bytes(fields[LP_SEQUENCE][0], "big")
    assert txseq == int.from_bytes(fields[LP_TX_SEQUENCE][0], "big")
    assert acked == [int.from_bytes(v, "big") for v in fields.get(LP_ACK, [])]
    assert wire[start:] == fields[LP_FRAGMENT][0] == packet
    for cut in range(1, len(wire)):
        assert _read_own(wire[:cut]) is None
    for i in range(1, start):
        flipped = bytearray(wire)
        flipped[i] ^= 0x55
        got = _read_own(bytes(flipped))
        assert got is None or got[3] == start      # an Ack or sequence value changed only


async def test_reads_in_one_loop_turn_set_the_timer_once():
    """On UDP every datagram is a read of its own: the timer follows the deadline at the end of
    the loop turn, not once per datagram (each setting cost a cancel and a new timer)."""

    sent: list[bytes] = []
    link = ReliableLink(sent.append, asyncio.get_running_loop())
    peer = LpReliability()
    link.send(interest("/t/0", nonce=100))
    loop = asyncio.get_running_loop()
    arms = 0
    call_at = loop.call_at

    def counting_call_at(*args):
        nonlocal arms
        arms += 1
        return call_at(*args)

    loop.call_at = counting_call_at             # type: ignore[method-assign]
    try:
        for i in range(20):                     # 20 datagrams, each owed an Ack
            assert link.receive_many([peer.wrap(DATA, 0.0)]) == [DATA]
        assert arms == 0
        await asyncio.sleep(0)
        assert arms == 1 and link._timer_at == pytest.approx(link.core.deadline())
    finally:
        del loop.call_at
