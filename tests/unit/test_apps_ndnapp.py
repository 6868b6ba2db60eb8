"""ndnps.client.app.App, the apps' client on the project's own NDN base: pushed Data reach app
code, every expressed Interest ends as it should (Data, ValidationFailure, Nack, timeout, face
closed, cancellation), Interests reach the handler of their longest attached prefix, and the
face frames, batches and counts — each rule pinned here, with python-ndn reading what the
client writes and writing what it reads.

The event loop's clock is fake (looptime): it jumps to the next timer when nothing is ready,
so every lifetime, expiry and wait here happens at exactly its scheduled time, however loaded
the host is; an Interest's deadline (``ndnps.client.events.now_ms``) follows the same clock.
Tests on real sockets say so and assert nothing about time."""
from __future__ import annotations

import asyncio
import logging
import socket

import pytest
from ndn.encoding import InterestParam, Name, make_data, make_interest, parse_data, parse_interest
from ndn.encoding.ndnlp_v2 import LpPacket, LpPacketValue
from ndn.security import DigestSha256Signer

from ndnps.client.app import App
from ndnps.client.errors import (FaceDown, InterestCanceled, InterestNack, InterestTimeout,
                                 ValidationFailure)
from ndnps.client.events import now_ms
from ndnps.client.face import Face, transport_uri
from ndnps.client.security import DigestSigner, HmacSigner, Security, pass_all
from ndnps.client.wire import Data
from ndnps.ndn import nfd
from ndnps.ndn.conventions import segment_component
from ndnps.ndn.packet import NACK_CONGESTION, NACK_NO_ROUTE, lp_wrap
from ndnps.ndn.tlv import LP_PACKET, tl
from ndnps.protocol import names

pytestmark = pytest.mark.looptime

KEY = b"k" * 16
SEC = Security(KEY, names.key("ps", "t1"))


class Recording:
    """A transport that is up and records each write call (one list per call)."""

    def __init__(self) -> None:
        self.writes: list[list[bytes]] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append([bytes(data)])

    def writelines(self, packets: list[bytes]) -> None:
        self.writes.append([bytes(p) for p in packets])

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default=None):
        return default


class Sent:
    """An App whose face is up on a Recording transport."""

    def __init__(self, on_distribute=None) -> None:
        self.app = App("unix:///nonexistent.sock", on_distribute=on_distribute)
        self.transport = Recording()
        self.app.face.connection_made(self.transport)        # type: ignore[arg-type]

    @property
    def packets(self) -> list[bytes]:
        """Everything sent so far, this loop turn's packets included."""
        self.app.face.flush()
        return [p for write in self.transport.writes for p in write]


def signed(name, content=b"payload", signer=None, final=3) -> bytes:
    return App.make_data(name, content, signer or HmacSigner(KEY, names.key("ps", "t1")),
                         freshness_period=1000, final_block_id=segment_component(final))


def table(app: App) -> int:
    """Entries still waiting in the app's pending table."""
    return len(app.pit) if app._pit is not None else 0


# ---- pushed Data ---------------------------------------------------------------------------

async def test_pushed_data_reaches_on_distribute_without_a_pending_interest():
    seen = []
    s = Sent(lambda d: seen.append(d))
    s.app.receive(signed(names.distribute("ps", "t1", 4, 0)))
    s.app.receive(signed(names.collect("w1", "ps", "t1", 4, 0)))      # not a push
    assert [names.parse_distribute(d.name) for d in seen] == [("ps", "t1", 4, 0)]
    assert s.app.unsolicited == 1                           # the other: nobody waited for it


async def test_a_probe_is_satisfied_and_also_seen_as_a_push():
    seen = []
    s = Sent(lambda d: seen.append(d))
    probe = names.distribute("ps", "t1", 4, 1)
    fut = s.app.express(probe, SEC.validator)
    s.app.receive(signed(probe, b"seg"))
    assert bytes((await fut).content) == b"seg" and len(seen) == 1


async def test_a_push_has_python_ndns_values_and_the_on_distribute_that_raises_is_logged(
        caplog):
    seen = []
    s = Sent(lambda d: seen.append(d))
    push = signed(names.distribute("ps", "t1", 4, 2), b"params")
    s.app.receive(push)
    (d,) = seen
    name, meta, content, sig = parse_data(push)
    assert d.name == [bytes(c) for c in name] and bytes(d.content) == bytes(content) == b"params"
    assert (d.freshness_period, d.final_block_id, d.mark) == (
        meta.freshness_period, bytes(meta.final_block_id), 0)
    assert bytes(d.covered) == b"".join(bytes(p) for p in sig.signature_covered_part)
    assert d.content.obj is push                           # a view of the received bytes
    s.app.on_distribute = lambda d: 1 / 0
    with caplog.at_level(logging.ERROR):
        s.app.receive(push)
    assert "on_distribute failed" in caplog.text


# ---- expressing ------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs", [
    {}, {"lifetime": 500, "must_be_fresh": True, "can_be_prefix": False},
    {"can_be_prefix": True, "lifetime": None}, {"lifetime": 70000, "hop_limit": 7},
    {"nonce": None}, {"nonce": 0xFFFFFFFF, "lifetime": 0}])
async def test_express_sends_python_ndns_bytes_and_gets_its_data(kwargs):
    s = Sent()
    name = names.collect("w1", "ps", "t1", 3, 300)
    kw = dict(kwargs)
    kw.setdefault("nonce", 1234567)
    fut = s.app.express(name, pass_all, **kw)
    assert not isinstance(fut, asyncio.Task)                # the pending entry's own future
    param = InterestParam(**{k: v for k, v in kw.items() if k != "lifetime"},
                          **({"lifetime": kw["lifetime"]} if "lifetime" in kw else {}))
    assert s.packets == [bytes(make_interest(name, param))]
    assert table(s.app) == 1
    s.app.receive(signed(name))
    if kw.get("lifetime") == 0:
        await asyncio.sleep(0)
    data = await asyncio.wait_for(fut, 1)
    assert isinstance(data, Data) and bytes(data.content) == b"payload"
    assert names.parse_collect(data.name).segment == 300
    assert data.final_block_id == segment_component(3)
    assert table(s.app) == 0


async def test_express_random_nonce_and_defaults_and_no_response():
    s = Sent()
    name = names.task("w1", "ps", "t1")
    futs = [s.app.express(name, pass_all) for _ in range(2)]
    params = [parse_interest(p)[1] for p in s.packets]
    assert params[0].nonce != params[1].nonce and params[0].lifetime == 4000
    assert not params[0].can_be_prefix and not params[0].must_be_fresh
    assert s.app.express(name, pass_all, no_response=True) is None    # sent, nothing pending
    assert len(s.packets) == 3 and table(s.app) == 2
    for f in futs:
        f.cancel()


async def test_express_other_shapes_are_python_ndns_too():
    s = Sent()
    futs = [s.app.express("/a/b", pass_all, nonce=5),                      # an NDN URI
            s.app.express(names.task("w1", "ps", "t1"), pass_all, app_param=b"p",
                          signer=DigestSigner()),
            s.app.express(names.task("w1", "ps", "t1"), pass_all, forwarding_hint=["/hint"])]
    uri, signed_i, hinted = s.packets
    assert Name.to_str(parse_interest(uri)[0]) == "/a/b"
    assert parse_interest(signed_i)[2] == b"p"
    assert parse_interest(hinted)[1].forwarding_hint
    with pytest.raises(ValueError):                                # as python-ndn raises
        s.app.express(names.task("w1", "ps", "t1"), pass_all, nonce=2 ** 40)
    with pytest.raises(ValueError):
        s.app.express(names.task("w1", "ps", "t1"), None)          # validator required
    # the signed one's Data carries the full name (its ParametersSha256Digest): it answers it
    full = [bytes(c) for c in parse_interest(signed_i, )[0]]
    s.app.receive(App.make_data(full, b"ok", DigestSigner()))
    assert bytes((await futs[1]).content) == b"ok"
    for f in futs:
        f.cancel()


async def test_received_data_validated_forged_digest_and_unsigned_rejected():
    s = Sent()
    good, forged, digest, unsigned = (names.collect("w1", "ps", "t1", 1, i) for i in range(4))
    futs = {bytes(n[-1]): s.app.express(n, SEC.validator, lifetime=1000)
            for n in (good, forged, digest, unsigned)}
    s.app.receive(signed(good))
    s.app.receive(signed(forged, signer=HmacSigner(b"wrong", names.key("ps", "t1"))))
    s.app.receive(signed(digest, signer=DigestSigner()))
    s.app.receive(bytes(make_data(unsigned, None, b"x", signer=None)))
    assert bytes((await futs[bytes(good[-1])]).content) == b"payload"
    for n in (forged, digest, unsigned):
        with pytest.raises(ValidationFailure) as failed:
            await asyncio.wait_for(futs[bytes(n[-1])], 1)
        assert failed.value.data.name == n                # the Data it refused
    assert table(s.app) == 0


async def test_a_validator_that_raises_refuses():
    s = Sent()
    name = names.collect("w1", "ps", "t1", 1, 0)

    def broken(_data):
        raise RuntimeError("bug")
    fut = s.app.express(name, broken)
    s.app.receive(signed(name))
    with pytest.raises(ValidationFailure):
        await fut


async def test_expiry_cancellation_shutdown_and_nack_end_the_entry():
    s = Sent()
    a, b, c, d = (names.collect("w1", "ps", "t1", 2, i) for i in range(4))
    with pytest.raises(InterestTimeout):
        await s.app.express(a, SEC.validator, lifetime=20)
    assert table(s.app) == 0

    async def waiting():
        return await s.app.express(b, SEC.validator, lifetime=5000)
    waiter = asyncio.ensure_future(waiting())
    await asyncio.sleep(0.01)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):             # a cancellation, not a failure
        await waiter
    assert table(s.app) == 0
    s.app.receive(signed(b))                                # comes late: nobody is settled
    nacked = s.app.express(c, SEC.validator, lifetime=5000)
    dropped = s.app.express(d, SEC.validator, lifetime=5000)
    s.app.receive(lp_wrap(bytes(make_interest(c, InterestParam(nonce=1))), None, NACK_NO_ROUTE))
    with pytest.raises(InterestNack) as nack:
        await nacked
    assert nack.value.reason == NACK_NO_ROUTE
    s.app.face.connection_lost(None)                        # the forwarder went away
    with pytest.raises(InterestCanceled):
        await dropped
    assert table(s.app) == 0


async def test_data_after_the_lifetime_is_unsolicited_and_a_newer_interest_unharmed():
    s = Sent()
    name = names.collect("w1", "ps", "t1", 0, 0)
    old = s.app.express(name, SEC.validator, lifetime=100)
    await asyncio.sleep(0.05)
    new = s.app.express(name, SEC.validator, lifetime=1000)    # re-expressed
    with pytest.raises(InterestTimeout):
        await old
    s.app.receive(signed(name))                             # answers the newer one only
    assert bytes((await new).content) == b"payload"
    s.app.receive(signed(name))
    assert s.app.unsolicited == 1


async def test_two_interests_for_one_name_both_satisfied_prefixes_and_digests():
    calls = []

    def counting(data):
        calls.append(data)
        return True

    s = Sent()
    name = names.collect("w1", "ps", "t1", 5, 0)
    raw = signed(name)
    t1 = s.app.express(name, SEC.validator, lifetime=1000)
    t2 = s.app.express(name, counting, lifetime=1000)
    t3 = s.app.express(name[:-1], SEC.validator, lifetime=1000, can_be_prefix=True)
    t4 = s.app.express(name[:-2], SEC.validator, lifetime=30)          # not CanBePrefix
    import hashlib
    digest = bytes((1, 32)) + hashlib.sha256(raw).digest()
    t5 = s.app.express(name + [digest], SEC.validator, lifetime=1000)  # implicit digest
    t6 = s.app.express(name + [bytes((1, 32)) + bytes(32)], SEC.validator, lifetime=30)
    s.app.receive(raw)
    for t in (t1, t2, t3, t5):
        assert bytes((await asyncio.wait_for(t, 1)).content) == b"payload"
    assert len(calls) == 1
    for t in (t4, t6):
        with pytest.raises(InterestTimeout):                # a longer name, another digest
            await t
    assert table(s.app) == 0


async def test_a_nack_ends_the_exact_and_prefix_entries_of_its_name_only():
    s = Sent()
    a = names.collect("w1", "ps", "t1", 2, 0)
    old = s.app.express(a, SEC.validator, lifetime=5000)
    old.cancel()                                            # cancelled, re-asked in one turn
    new = s.app.express(a, SEC.validator, lifetime=5000)
    prefix = s.app.express(a, SEC.validator, lifetime=5000, can_be_prefix=True)
    other = s.app.express(names.collect("w1", "ps", "t1", 2, 1), SEC.validator, lifetime=50)
    s.app.receive(lp_wrap(bytes(make_interest(a, InterestParam())), b"tk", NACK_CONGESTION, 1))
    for f in (new, prefix):
        with pytest.raises(InterestNack):
            await asyncio.wait_for(f, 1)
    assert s.app.marks_in == 1                              # a marked Nack is counted too
    with pytest.raises(InterestTimeout):
        await other


async def test_express_while_the_face_is_down_is_lost_until_it_is_back():
    app = App("unix:///nonexistent.sock")
    assert not app.connected
    lost = app.express(names.task("w1", "ps", "t1"), pass_all, lifetime=200)
    assert isinstance(lost, asyncio.Task)
    with pytest.raises(FaceDown):
        await lost
    assert app.express(names.task("w1", "ps", "t1"), pass_all, no_response=True) is None
    app.send_data(b"\x06\x00")
    waiting = app.express_future(names.task("w1", "ps", "t1"), pass_all, lifetime=60_000)
    await asyncio.sleep(1)
    await app.after_reconnect()                             # back (nothing to re-register)
    with pytest.raises(FaceDown):                           # at once, not after 60 s
        await asyncio.wait_for(waiting, 0.1)
    assert app.link_events() == {"reconnects": 0, "sent_while_down": 4}


async def test_express_wire_keeps_the_name_it_is_given():
    s = Sent()
    name = names.collect("w1", "ps", "t1", 9, 0)
    raw = bytes(make_interest(name, InterestParam(nonce=3)))
    fut = s.app.express_wire(name, raw, 1000, SEC.validator, must_be_fresh=True)
    assert s.packets == [raw]
    s.app.receive(signed(name))
    assert bytes((await fut).content) == b"payload"


# ---- serving ---------------------------------------------------------------------------------

async def test_an_interest_reaches_the_longest_attached_prefix_with_python_ndns_values():
    calls = []
    s = Sent()
    s.app.attach_handler(names.node("w1"), lambda *a: calls.append(("node", *a)))
    s.app.attach_handler(names.task("w1", "ps", "t1")[:2], lambda *a: calls.append(("ps", *a)))
    name = names.collect("w1", "ps", "t1", 3, 4)
    raw = bytes(make_interest(name, InterestParam(must_be_fresh=True, nonce=9, lifetime=700)))
    s.app.receive(raw)
    (which, got, app_param, reply, ctx), = calls
    assert which == "ps" and got == name and app_param is None
    assert ctx["deadline"] == now_ms() + 700
    i = ctx["interest"]
    assert (i.must_be_fresh, i.nonce, i.lifetime, bytes(i.wire)) == (True, 9, 700, raw)
    assert reply(b"\x06\x00") is None and s.packets == [b"\x06\x00"]
    await asyncio.sleep(0.8)
    assert reply(b"\x06\x00") is False                      # its lifetime is over
    s.app.detach_handler(names.task("w1", "ps", "t1")[:2])
    s.app.receive(raw)
    assert calls[-1][0] == "node"


async def test_signed_interests_with_parameters_reach_their_handler_too():
    calls = []
    s = Sent()
    s.app.attach_handler(names.insert_prefix("ps"), lambda *a: calls.append(a))
    raw = bytes(make_interest(names.insert("ps", "t1"), InterestParam(), b"p",
                              signer=DigestSha256Signer()))
    s.app.receive(raw)
    (name, app_param, _, ctx), = calls
    assert bytes(app_param) == b"p" and name[:-1] == names.insert("ps", "t1")
    s.app.receive(raw[:-1] + bytes([raw[-1] ^ 1]))          # its digest no longer matches
    assert len(calls) == 1 and s.app.malformed_in == 1


async def test_a_tokened_interests_answer_echoes_its_token_and_marks_are_counted():
    calls = []
    s = Sent()
    s.app.attach_handler(names.node("w1"), lambda *a: calls.append(a))
    raw = bytes(make_interest(names.collect("w1", "ps", "t1", 3, 4), InterestParam(nonce=1)))
    s.app.receive(lp_wrap(raw, b"tk", None, 2))
    (_, _, reply, ctx), = calls
    assert ctx["interest"].pit_token == b"tk" and ctx["interest"].mark == 2
    reply(b"\x06\x00")
    assert s.packets == [lp_wrap(b"\x06\x00", b"tk")]
    assert s.app.traffic()["marks_received"] == 1


async def test_unhandled_interests_malformed_packets_and_a_handler_that_raises(caplog):
    s = Sent()
    s.app.receive(bytes(make_interest(names.collect("w2", "ps", "t1", 3, 4), InterestParam())))
    assert s.app.unhandled == 1
    s.app.attach_handler(names.node("w9"), lambda *a: 1 / 0)
    with caplog.at_level(logging.ERROR):
        s.app.receive(bytes(make_interest(names.collect("w9", "ps", "t1", 3, 4),
                                          InterestParam())))
    assert "Interest handler failed" in caplog.text
    for garbage in (b"\x06\x01\x00", b"\x05\x00", b"\x99\x00", b"\x64\x03\x50\x01\x06",
                    lp_wrap(b"\x07\x00")):
        s.app.receive(garbage)
    assert s.app.traffic()["malformed_received"] == 5


async def test_lp_packets_with_other_fields_take_the_bases_general_reader():
    """A PIT token with an IncomingFaceId (not the shape parse_lp reads at fixed offsets):
    the base's packet.decode reads it, the push still arrives."""
    seen = []
    s = Sent(lambda d: seen.append(d))
    push = signed(names.distribute("ps", "t1", 4, 2), b"params")
    pkt = LpPacket()
    pkt.lp_packet = LpPacketValue()
    pkt.lp_packet.pit_token = b"\x01\x02"
    pkt.lp_packet.incoming_face_id = 3
    pkt.lp_packet.fragment = push
    s.app.receive(bytes(pkt.encode()))
    assert len(seen) == 1 and bytes(seen[0].content) == b"params"
    s.app.receive(bytes((LP_PACKET, 4, 0x51, 2, 0, 0)))       # an ack-only frame: nothing


# ---- the face --------------------------------------------------------------------------------

async def test_a_loop_turns_packets_leave_in_one_write_a_lone_one_at_once():
    s = Sent()
    face = s.app.face
    face.send(b"\x06\x01\x00")
    assert s.transport.writes == [[b"\x06\x01\x00"]]        # at once
    for i in (1, 2):
        face.send(b"\x06\x01" + bytes([i]))
    assert len(s.transport.writes) == 1                     # the rest wait for the turn's end
    await asyncio.sleep(0)
    assert s.transport.writes[1] == [b"\x06\x01\x01", b"\x06\x01\x02"]
    face.send(b"\x06\x00")                                  # a new turn: at once again
    face.send(b"\x05\x00")
    await face.drain()                                      # pacing: what waits is written
    assert s.transport.writes[-1] == [b"\x05\x00"]
    face.send(b"\x05\x01")                                  # (the same turn: they wait)
    face.send(b"\x05\x02")
    s.app.shutdown()                                        # written before the face closes
    assert s.transport.writes[-1] == [b"\x05\x01", b"\x05\x02"] and s.transport.closed
    face.send(b"\x05\x03")                                  # the face is closed: lost
    assert face.lost_sends == 1 and face.packets_out == 8


async def test_a_reads_answers_leave_together_after_it():
    s = Sent()
    s.app.attach_handler(names.node("w1"), lambda n, p, reply, c: reply(b"\x06\x01" + n[-1][-1:]))
    stream = b"".join(bytes(make_interest(names.collect("w1", "ps", "t1", 3, i),
                                          InterestParam(nonce=i))) for i in range(3))
    s.app.face.data_received(stream)
    assert len(s.transport.writes) == 1 and len(s.transport.writes[0]) == 3


async def test_drain_waits_while_the_transport_is_above_its_high_water_mark():
    s = Sent()
    face = s.app.face
    face.pause_writing()
    drained = asyncio.ensure_future(face.drain())
    await asyncio.sleep(0.1)
    assert not drained.done()
    face.resume_writing()
    await asyncio.wait_for(drained, 1)


def test_counters_start_at_zero_and_the_face_is_down():
    app = App("unix:///nonexistent.sock")
    assert app.traffic() == {"bytes_sent": 0, "bytes_received": 0, "packets_sent": 0,
                             "packets_received": 0, "marks_received": 0,
                             "malformed_received": 0}
    assert app.face.is_local() and not app.face.running and not app.connected


def test_the_transport_is_read_as_python_ndn_reads_it(monkeypatch, tmp_path):
    monkeypatch.setenv("NDN_CLIENT_TRANSPORT", "tcp://127.0.0.1:7000")
    assert App().transport == "tcp://127.0.0.1:7000"
    monkeypatch.delenv("NDN_CLIENT_TRANSPORT")
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ndn").mkdir()
    (tmp_path / ".ndn" / "client.conf").write_text("; a comment\ntransport=unix:///tmp/x.sock\n")
    assert transport_uri() == "unix:///tmp/x.sock"
    assert Face("udp6://[::1]").is_local() and not Face("tcp://10.0.0.1").is_local()
    with pytest.raises(ValueError, match="ws://"):
        Face("ws://example.org")


async def test_marked_frames_with_link_reliability_are_read_and_counted():
    """The frames pass ReliableLink.receive_many first, which hands up [CongestionMark,
    Fragment] once it has taken its own headers off."""
    from ndnps.ndn.congestion import set_congestion_mark
    from ndnps.ndn.reliability import LpReliability
    seen = []
    s = Sent(lambda d: seen.append(d.mark))
    s.app.face.start_reliability()
    sender = LpReliability()
    loop = asyncio.get_running_loop()
    pushes = [signed(names.distribute("ps", "t1", 4, i)) for i in range(3)]
    frames = [sender.wrap(set_congestion_mark(pushes[0]), loop.time()),
              sender.wrap(pushes[1], loop.time()),
              sender.wrap(lp_wrap(pushes[2], b"tk", None, 5), loop.time())]
    try:
        s.app.face.data_received(b"".join(frames))
    finally:
        s.app.face.stop_reliability()
    assert seen == [1, 0, 5] and s.app.traffic()["marks_received"] == 2


# ---- real sockets: the real clock; nothing asserted about time, the test's timeout bounds ---

@pytest.mark.looptime(False)
@pytest.mark.timeout(20)
async def test_the_unix_face_frames_reads_and_an_oversize_length_closes_it(tmp_path):
    writers: list[asyncio.StreamWriter] = []
    server = await asyncio.start_unix_server(lambda r, w: writers.append(w),
                                             str(tmp_path / "fw.sock"))
    app = App(f"unix://{tmp_path / 'fw.sock'}")
    asked = []
    app.attach_handler(names.task("w1", "ps", "t1"), lambda name, *_: asked.append(name))
    await app.face.open()
    running = asyncio.ensure_future(app.face.run())
    try:
        while not writers:
            await asyncio.sleep(0.01)
        fw = writers[0]
        wanted = [names.collect("w1", "ps", "t1", 3, seg) for seg in range(3)]
        futures = [app.express(n, pass_all) for n in wanted]
        datas = [App.make_data(n, bytes([seg]) * 5000, DigestSigner())
                 for seg, n in enumerate(wanted)]
        interest = make_interest(names.task("w1", "ps", "t1"), InterestParam(lifetime=1000))
        stream = datas[0] + bytes(interest) + datas[1] + datas[2]
        for a, b in ((0, 7), (7, 6000), (6000, len(stream))):       # cuts inside packets
            fw.write(stream[a:b])
            await fw.drain()
            await asyncio.sleep(0.02)
        got = await asyncio.gather(*futures)
        assert [bytes(d.content) for d in got] == [bytes([s]) * 5000 for s in range(3)]
        while not asked:
            await asyncio.sleep(0.01)
        assert asked == [names.task("w1", "ps", "t1")]
        assert app.face.packets_in == 4 and app.face.bytes_in == len(stream)
        fw.write(b"\x06\xfd\x30\x00")                              # a 12 KB Data: oversize
        await running
        assert not app.face.running and app.face.malformed == 1
    finally:
        running.cancel()
        for w in writers:
            w.close()
        server.close()
        app.shutdown()


@pytest.mark.looptime(False)
@pytest.mark.timeout(20)
async def test_tcp_and_udp_faces_carry_packets_and_commands():
    """A TCP face (framed) and a UDP face (one datagram, one packet) to a fake forwarder that
    answers rib/register: the app's register is a signed command it reads with python-ndn."""
    commands = []

    def answer(raw: bytes) -> bytes:
        name, _, app_param, sig = parse_interest(raw)
        commands.append(Name.to_str(name))
        params = nfd.control_parameters(Name.to_bytes(Name.from_str("/p"))[2:], {"face_id": 9})
        return App.make_data([bytes(c) for c in name], nfd.control_response(200, "OK", params),
                             DigestSigner())

    async def on_tcp(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readexactly(2)
        if head[1] == 253:
            head += await reader.readexactly(2)
            size = int.from_bytes(head[2:], "big")
        else:
            size = head[1]
        writer.write(answer(head + await reader.readexactly(size)))
        await writer.drain()

    server = await asyncio.start_server(on_tcp, "127.0.0.1", 0)
    tcp_port = server.sockets[0].getsockname()[1]
    loop = asyncio.get_running_loop()

    class Udp(asyncio.DatagramProtocol):
        def connection_made(self, transport):
            self.transport = transport

        def datagram_received(self, data, addr):
            self.transport.sendto(answer(data), addr)

    udp, _ = await loop.create_datagram_endpoint(Udp, local_addr=("127.0.0.1", 0),
                                                 family=socket.AF_INET)
    udp_port = udp.get_extra_info("sockname")[1]
    try:
        for uri in (f"tcp://127.0.0.1:{tcp_port}", f"udp4://127.0.0.1:{udp_port}"):
            app = App(uri)
            await app.face.open()
            try:
                assert await app.register("/p")
                assert app.registered == [names.node("p")]
            finally:
                app.shutdown()
        assert len(commands) == 2
        assert all(c.startswith("/localhost/nfd/rib/register/") for c in commands)
    finally:
        server.close()
        udp.close()
