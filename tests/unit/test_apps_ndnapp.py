"""ndnps.client.app.App, the one adapter over python-ndn's NDNApp: pushed Data reach app code, and
express ends as it should (timeouts, cancellation) despite python-ndn 0.5.2's quirks.

The event loop's clock is fake (looptime): it jumps to the next timer when nothing is ready,
so every lifetime, expiry and wait here happens at exactly its scheduled time, however loaded
the host is; python-ndn's wall-clock `utils.timestamp()`, from which python-ndn and App
compute an Interest's deadline, follows the same clock (`loop_timestamps`)."""
from __future__ import annotations

import asyncio

import pytest
from ndn import utils
from ndn.appv2 import InterestTreeNode, pass_all
from ndn.encoding import InterestParam, make_interest, parse_data
from ndn.types import InterestCanceled, InterestTimeout, ValidResult

from ndnps.protocol import names
from ndnps.client.app import App
from ndnps.client.security import DigestSigner
from ndnps.ndn.conventions import segment_component

pytestmark = pytest.mark.looptime


@pytest.fixture(autouse=True)
def loop_timestamps(monkeypatch):
    """`utils.timestamp()` (ms) read off the running loop's clock: an Interest's deadline, in
    python-ndn's PIT entry and in the handler's context, agrees with the timer that ends it."""
    wall = utils.timestamp
    epoch = wall()

    def timestamp() -> int:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return wall()
        return epoch + int(loop.time() * 1000)
    monkeypatch.setattr(utils, "timestamp", timestamp)


def data(name, content=b"x"):
    wire = App.make_data(name, content, signer=DigestSigner())
    return parse_data(wire)


def pending(app: App, name, validator=pass_all):
    fut = asyncio.get_running_loop().create_future()
    node = app._pit.setdefault(name, InterestTreeNode())
    node.append_interest(fut, utils.timestamp() + 100, InterestParam(), validator, b"")
    return fut, node


@pytest.mark.asyncio
async def test_pushed_data_reaches_on_distribute_without_a_pending_interest():
    seen = []
    app = App("unix:///nonexistent.sock", on_distribute=lambda *a: seen.append(a[0]))
    push = names.distribute("ps", "t1", 4, 0)
    name, meta, content, sig = data(push)
    await app._on_data(name, meta, content, sig, b"")
    await app._on_data(*data(names.collect("w1", "ps", "t1", 4, 0)), b"")   # not a push
    assert [names.parse_distribute(n) for n in seen] == [("ps", "t1", 4, 0)]


@pytest.mark.asyncio
async def test_a_probe_is_satisfied_and_also_seen_as_a_push():
    seen = []
    app = App("unix:///nonexistent.sock", on_distribute=lambda *a: seen.append(a[0]))
    probe = names.distribute("ps", "t1", 4, 1)
    fut, _ = pending(app, probe)
    await app._on_data(*data(probe, b"seg"), b"")
    name, content, _ = await asyncio.wait_for(fut, 1)
    assert bytes(content) == b"seg" and len(seen) == 1


@pytest.mark.asyncio
async def test_data_racing_its_timeout_is_a_timeout_not_a_key_error():
    app = App("unix:///nonexistent.sock")
    name = names.collect("w1", "ps", "t1", 0, 0)

    async def slow_validator(*_):
        await asyncio.sleep(0.3)                 # still validating when the Interest expires
        return ValidResult.PASS
    fut, node = pending(app, name, slow_validator)
    await app._on_data(*data(name), b"")        # removes the PIT node, validation pending
    with pytest.raises(InterestTimeout):
        await app._wait_for_data(fut, utils.timestamp(), name, node)


@pytest.mark.asyncio
async def test_cancelling_an_express_is_a_cancellation():
    app = App("unix:///nonexistent.sock")
    name = names.task("w1", "ps", "t1")
    fut, node = pending(app, name)
    waiter = asyncio.ensure_future(app._wait_for_data(fut, utils.timestamp() + 5000, name, node))
    await asyncio.sleep(0.01)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter


def test_counting_face_counts_and_delegates():
    app = App("unix:///nonexistent.sock")
    assert app.traffic() == {"bytes_sent": 0, "bytes_received": 0, "packets_sent": 0,
                             "packets_received": 0, "marks_received": 0}
    assert app.face.isLocalFace() and not app.face.running


# ---- issue 7 fast paths: the same packets and the same outcomes as python-ndn's own paths ----

class RecordingWriter:
    """Stands in for the StreamWriter of a face that is up: records each write call."""

    def __init__(self) -> None:
        self.writes: list[list[bytes]] = []
        self.transport = None

    def writelines(self, packets) -> None:
        self.writes.append([bytes(p) for p in packets])

    def close(self) -> None:
        pass

    async def drain(self) -> None:
        pass


def face_up(app: App) -> RecordingWriter:
    app.counting.inner.running = True
    app.counting.inner.writer = writer = RecordingWriter()
    return writer


class Sent:
    """An App whose face is up and records what it sends."""

    def __init__(self) -> None:
        self.app = App("unix:///nonexistent.sock")
        self.writer = face_up(self.app)

    @property
    def packets(self) -> list[bytes]:
        """Everything sent so far, this loop turn's packets included."""
        self.app.counting.flush()
        return [p for write in self.writer.writes for p in write]


KEY = b"k" * 16


def signed(name, content=b"payload", signer=None) -> bytes:
    from ndnps.client.security import HmacSigner
    signer = signer or HmacSigner(KEY, names.key("ps", "t1"))
    return bytes(App.make_data(name, content, signer=signer, freshness_period=1000,
                               final_block_id=segment_component(3)))


@pytest.mark.asyncio
@pytest.mark.parametrize("kwargs", [
    {}, {"lifetime": 500, "must_be_fresh": True, "can_be_prefix": False},
    {"can_be_prefix": True, "lifetime": None}, {"lifetime": 70000, "hop_limit": 7},
    {"nonce": None}, {"nonce": 0xFFFFFFFF, "lifetime": 0}])
async def test_express_sends_python_ndns_bytes(kwargs):
    from ndn.encoding import make_interest
    s = Sent()
    name = names.collect("w1", "ps", "t1", 3, 300)
    kw = dict(kwargs)
    kw.setdefault("nonce", 1234567)
    task = asyncio.ensure_future(s.app.express(name, pass_all, **kw))
    await asyncio.sleep(0)
    param = InterestParam.from_dict(kw)
    assert s.packets == [bytes(make_interest(name, param))]
    # the PIT entry is python-ndn's, with the same parameters
    entry = s.app._pit[name].pending_list[0]
    assert (entry.can_be_prefix, entry.must_be_fresh) == (param.can_be_prefix, param.must_be_fresh)
    await s.app._receive(6, signed(name))
    got_name, content, ctx = await asyncio.wait_for(task, 1)
    assert bytes(content) == b"payload" and names.parse_collect(got_name).segment == 300
    assert bytes(ctx["meta_info"].final_block_id) == segment_component(3)
    assert name not in s.app._pit


@pytest.mark.asyncio
async def test_express_random_nonce_and_defaults():
    from ndn.encoding import parse_interest
    s = Sent()
    name = names.task("w1", "ps", "t1")
    tasks = [asyncio.ensure_future(s.app.express(name, pass_all)) for _ in range(2)]
    await asyncio.sleep(0)
    params = [parse_interest(p)[1] for p in s.packets]
    assert params[0].nonce != params[1].nonce and params[0].lifetime == 4000
    assert not params[0].can_be_prefix and not params[0].must_be_fresh
    s.app.express(name, pass_all, no_response=True)           # sent, nothing pending for it
    assert len(s.packets) == 3 and len(s.app._pit[name].pending_list) == 2
    for t in tasks:
        t.cancel()


@pytest.mark.asyncio
async def test_express_other_shapes_take_python_ndns_path():
    from ndn.encoding import Name, parse_interest
    from ndnps.client.security import DigestSigner
    s = Sent()
    t1 = asyncio.ensure_future(s.app.express("/a/b", pass_all, nonce=5))          # str name
    t2 = asyncio.ensure_future(s.app.express(names.task("w1", "ps", "t1"), pass_all,
                                             app_param=b"p", signer=DigestSigner()))
    t3 = asyncio.ensure_future(s.app.express(names.task("w1", "ps", "t1"), pass_all,
                                             forwarding_hint=["/hint"]))
    await asyncio.sleep(0)
    assert Name.to_str(parse_interest(s.packets[0])[0]) == "/a/b"
    assert parse_interest(s.packets[1])[2] == b"p"
    assert parse_interest(s.packets[2])[1].forwarding_hint
    with pytest.raises(ValueError):                                # as python-ndn raises
        s.app.express(names.task("w1", "ps", "t1"), pass_all, nonce=2 ** 40)
    with pytest.raises(ValueError):
        s.app.express(names.task("w1", "ps", "t1"), None)          # validator required
    for t in (t1, t2, t3):
        t.cancel()


@pytest.mark.asyncio
async def test_received_data_validated_forged_and_unsigned_rejected():
    from ndn.types import ValidationFailure
    from ndnps.client.security import DigestSigner, HmacSigner, Security
    sec = Security(KEY, names.key("ps", "t1"))
    s = Sent()
    good, forged, digest, unsigned = (names.collect("w1", "ps", "t1", 1, i) for i in range(4))
    tasks = {bytes(n[-1]): asyncio.ensure_future(s.app.express(n, sec.validator, lifetime=1000))
             for n in (good, forged, digest, unsigned)}
    await asyncio.sleep(0)
    await s.app._receive(6, signed(good))
    await s.app._receive(6, signed(forged, signer=HmacSigner(b"wrong", names.key("ps", "t1"))))
    await s.app._receive(6, signed(digest, signer=DigestSigner()))
    await s.app._receive(6, bytes(App.make_data(unsigned, b"x", signer=None)))   # generic path
    assert bytes((await tasks[bytes(good[-1])])[1]) == b"payload"
    for n in (forged, digest, unsigned):
        with pytest.raises(ValidationFailure):
            await asyncio.wait_for(tasks[bytes(n[-1])], 1)
    assert not s.app._pit


@pytest.mark.asyncio
async def test_received_push_reaches_on_distribute_with_python_ndns_values():
    from ndn.encoding import parse_data as their_parse
    seen = []
    s = Sent()
    s.app.on_distribute = lambda *a: seen.append(a)
    push = signed(names.distribute("ps", "t1", 4, 2), b"params")
    await s.app._receive(6, push)
    assert len(seen) == 1
    name, meta, content, sig, mark = seen[0]
    assert mark == 0
    theirs = their_parse(push)
    assert [bytes(c) for c in name] == [bytes(c) for c in theirs[0]]
    assert meta == theirs[1] and bytes(content) == b"params"
    assert sig.signature_info == theirs[3].signature_info
    assert [bytes(b) for b in sig.signature_covered_part] == \
        [bytes(b) for b in theirs[3].signature_covered_part]


@pytest.mark.asyncio
async def test_lp_wrapped_and_malformed_data_take_python_ndns_path():
    """An LpPacket with only a PIT token and/or a CongestionMark is ours (test_congestion_mark);
    one with any other field, python-ndn's."""
    from ndn.encoding.ndnlp_v2 import LpPacket, LpPacketValue
    seen = []
    s = Sent()
    s.app.on_distribute = lambda *a: seen.append(a)
    push = signed(names.distribute("ps", "t1", 4, 2), b"params")
    pkt = LpPacket()
    pkt.lp_packet = LpPacketValue()
    pkt.lp_packet.pit_token = b"\x01\x02"
    pkt.lp_packet.incoming_face_id = 3
    pkt.lp_packet.fragment = push
    assert not s.app._receive_now(0x64, bytes(pkt.encode()))
    await s.app._receive(0x64, bytes(pkt.encode()))
    from ndnps.client import wire
    from ndnps.ndn.tlv import tl
    assert push[1] < 253                             # one-byte length: the Value starts at 2
    body = push[2:] + b"\x25\x01x"                  # an unknown critical element: python-ndn drops it
    assert wire.parse_data(tl(6, len(body)) + body) is None
    await s.app._receive(6, tl(6, len(body)) + body)
    assert len(seen) == 1 and bytes(seen[0][2]) == b"params"


@pytest.mark.asyncio
async def test_expiry_cancellation_shutdown_and_nack_end_as_before_and_clean_the_pit():
    from ndn.types import InterestNack
    from ndnps.client.security import Security
    sec = Security(KEY, names.key("ps", "t1"))
    s = Sent()
    a, b, c, d = (names.collect("w1", "ps", "t1", 2, i) for i in range(4))
    with pytest.raises(InterestTimeout):
        await s.app.express(a, sec.validator, lifetime=20)
    assert a not in s.app._pit
    waiter = asyncio.ensure_future(s.app.express(b, sec.validator, lifetime=5000))
    await asyncio.sleep(0.01)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert b not in s.app._pit                  # python-ndn would have kept it
    nacked = asyncio.ensure_future(s.app.express(c, sec.validator, lifetime=5000))
    dropped = asyncio.ensure_future(s.app.express(d, sec.validator, lifetime=5000))
    await asyncio.sleep(0)
    s.app._on_nack(c, 150)
    with pytest.raises(InterestNack):
        await nacked
    s.app._clean_up()                           # the face shut down
    with pytest.raises(InterestCanceled):
        await dropped
    assert not s.app._pit


@pytest.mark.asyncio
async def test_two_interests_for_one_name_are_both_satisfied_and_other_validators_still_run():
    from ndnps.client.security import Security
    sec = Security(KEY, names.key("ps", "t1"))
    calls = []

    async def counting(name, sig, ctx):
        calls.append(ctx["deadline"])
        return ValidResult.PASS

    s = Sent()
    name = names.collect("w1", "ps", "t1", 5, 0)
    t1 = asyncio.ensure_future(s.app.express(name, sec.validator, lifetime=1000))
    t2 = asyncio.ensure_future(s.app.express(name, counting, lifetime=1000))
    t3 = asyncio.ensure_future(s.app.express(name[:-1], sec.validator, lifetime=1000,
                                             can_be_prefix=True))
    t4 = asyncio.ensure_future(s.app.express(name[:-2], sec.validator, lifetime=30))
    t5 = s.app.express_future(name, counting, lifetime=1000)       # in the exact-name dict
    t6 = s.app.express_future(name[:-2], sec.validator, lifetime=30)
    await asyncio.sleep(0)
    await s.app._receive(6, signed(name))
    for t in (t1, t2, t3, t5):
        _, content, ctx = await asyncio.wait_for(t, 1)
        # python-ndn's own path (t2, t5) knows no CongestionMark
        assert bytes(content) == b"payload" and set(ctx) - {"congestion_mark"} == {
            "meta_info", "sig_ptrs", "raw_packet", "deadline"}
        assert ctx.get("congestion_mark", 0) == 0
    assert len(calls) == 2
    for t in (t4, t6):
        with pytest.raises(InterestTimeout):    # not CanBePrefix: a longer name is no match
            await t
    assert not s.app._pit and not s.app._exact


@pytest.mark.asyncio
@pytest.mark.looptime(False)
@pytest.mark.timeout(20)
async def test_the_stream_reader_frames_reads_and_hands_each_packet_on(tmp_path):
    """App's own reader of the forwarder's stream (instead of python-ndn's packet-at-a-time
    loop): packets split across reads or several in one read all arrive, in order; a Data of
    ours is handled at once, an Interest goes through python-ndn's path to its handler; an
    oversize length (framing lost) shuts the face down.

    A real socket on the real clock (a fake one would jump ahead while the kernel passes the
    bytes): nothing is asserted about time, each wait lasts until what it waits for happened,
    and the test's timeout is the only bound."""
    writers: list[asyncio.StreamWriter] = []
    server = await asyncio.start_unix_server(lambda r, w: writers.append(w),
                                             str(tmp_path / "fw.sock"))
    app = App(f"unix://{tmp_path / 'fw.sock'}")
    asked = []
    app.attach_handler(names.task("w1", "ps", "t1"), lambda name, *_: asked.append(name))
    await app.counting.open()
    reading = asyncio.ensure_future(app.face.run())
    try:
        while not writers:
            await asyncio.sleep(0.01)
        fw = writers[0]
        wanted = [names.collect("w1", "ps", "t1", 3, seg) for seg in range(3)]
        futures = [pending(app, n)[0] for n in wanted]
        datas = [App.make_data(n, bytes([seg]) * 5000, signer=DigestSigner())
                 for seg, n in enumerate(wanted)]
        interest = make_interest(names.task("w1", "ps", "t1"), InterestParam(lifetime=1000))
        stream = bytes(datas[0]) + bytes(interest) + bytes(datas[1]) + bytes(datas[2])
        for a, b in ((0, 7), (7, 6000), (6000, len(stream))):       # cuts inside packets
            fw.write(stream[a:b])
            await fw.drain()
            await asyncio.sleep(0.02)
        got = await asyncio.gather(*futures)
        assert [bytes(content) for _, content, _ in got] == [bytes([s]) * 5000 for s in range(3)]
        while not asked:
            await asyncio.sleep(0.01)
        assert asked == [names.task("w1", "ps", "t1")]
        assert app.counting.packets_in == 4 and app.counting.bytes_in == len(stream)
        fw.write(b"\x06\xfd\x30\x00")                              # a 12 KB Data: oversize
        await reading
        assert not app.face.running
    finally:
        reading.cancel()
        for w in writers:
            w.close()
        server.close()
        app.counting.shutdown()


@pytest.mark.asyncio
async def test_a_plain_interest_reaches_its_handler_now_with_python_ndns_arguments():
    from ndn.appv2 import NDNApp
    calls = []
    app = App("unix:///nonexistent.sock")
    app.attach_handler(names.node("w1"), lambda *a: calls.append(a))
    writer = face_up(app)
    name = names.collect("w1", "ps", "t1", 3, 4)
    raw = bytes(make_interest(name, InterestParam(must_be_fresh=True, nonce=9, lifetime=700)))
    assert app._receive_now(5, raw) and len(calls) == 1            # now, not from a Task
    await NDNApp._receive(app, 5, raw)                               # python-ndn's own path
    await asyncio.sleep(0)
    ours, theirs = calls
    assert [bytes(c) for c in ours[0]] == [bytes(c) for c in theirs[0]]
    assert ours[1] is None and theirs[1] is None
    assert ours[3].keys() == theirs[3].keys()
    for key in ("int_param", "pit_token", "raw_packet"):
        assert ours[3][key] == theirs[3][key], key
    assert ours[3]["deadline"] == theirs[3]["deadline"]            # one turn of the fake clock
    ours[2](b"\x06\x00")                                              # reply sends
    app.counting.flush()
    assert writer.writes == [[b"\x06\x00"]]
    # a signed Interest or one with parameters, and one nobody handles: python-ndn's path
    signed = make_interest(names.insert("ps", "t1"), InterestParam(), b"p", signer=DigestSigner())
    assert not app._receive_now(5, bytes(signed))
    other = bytes(make_interest(names.collect("w2x", "ps", "t1", 3, 4), InterestParam()))
    app2 = App("unix:///nonexistent.sock")
    assert not app2._receive_now(5, other)
    # a handler that raises is logged; the reader goes on
    app.attach_handler(names.node("w9"), lambda *a: 1 / 0)
    raw9 = bytes(make_interest(names.collect("w9", "ps", "t1", 3, 4), InterestParam()))
    assert app._receive_now(5, raw9)


@pytest.mark.asyncio
async def test_express_future_ends_as_express_does_without_a_task():
    from ndn.types import InterestNack
    from ndnps.client.security import Security
    sec = Security(KEY, names.key("ps", "t1"))
    s = Sent()
    a, b, c, d, e = (names.collect("w1", "ps", "t1", 5, i) for i in range(5))
    answered = s.app.express_future(a, sec.validator, lifetime=5000, must_be_fresh=True)
    assert not isinstance(answered, asyncio.Task)              # the PIT entry's own future
    assert b"".join(a) in s.app._exact and a not in s.app._pit  # exact name: the dict
    via_express = asyncio.ensure_future(s.app.express(a, sec.validator, lifetime=5000))
    await asyncio.sleep(0)
    assert s.packets[0] == wire_of(s.packets[0], a)             # sent at once
    assert s.app._receive_now(6, signed(a))
    (n1, c1, x1), (n2, c2, x2) = await answered, await via_express
    assert [bytes(p) for p in n1] == [bytes(p) for p in n2] and bytes(c1) == bytes(c2)
    assert x1.keys() == x2.keys()
    with pytest.raises(InterestTimeout):
        await s.app.express_future(b, sec.validator, lifetime=20)
    cancelled = s.app.express_future(c, sec.validator, lifetime=5000)
    cancelled.cancel()
    await asyncio.sleep(0)
    nacked = s.app.express_future(d, sec.validator, lifetime=5000)
    s.app._on_nack(d, 150)
    with pytest.raises(InterestNack):
        await nacked
    dropped = s.app.express_future(e, sec.validator, lifetime=5000)
    s.app._clean_up()                                           # the face shut down
    await asyncio.sleep(0)
    assert dropped.cancelled()
    assert not s.app._pit and not s.app._exact                  # every entry gone
    # CanBePrefix: python-ndn's trie, which a longer name satisfies
    prefix = s.app.express_future(a[:-1], sec.validator, lifetime=5000, can_be_prefix=True)
    assert a[:-1] in s.app._pit and not s.app._exact
    assert s.app._receive_now(6, signed(a))
    assert bytes((await prefix)[1]) == b"payload" and not s.app._pit
    # shapes only python-ndn encodes, or a face that is down: a Task around express
    s.app.counting.inner.running = False
    down = s.app.express_future(a, sec.validator, lifetime=20)
    assert isinstance(down, asyncio.Task)
    with pytest.raises(InterestTimeout):
        await down


def wire_of(packet: bytes, name) -> bytes:
    from ndn.encoding import parse_interest
    assert [bytes(p) for p in parse_interest(packet)[0]] == [bytes(p) for p in name]
    return packet


@pytest.mark.asyncio
async def test_a_datagram_faces_packets_take_the_stream_readers_path():
    """python-ndn's own reader loop (UDP) calls CountingFace._received per packet: counted,
    and handed on exactly as the stream reader does (a Data of ours at once)."""
    s = Sent()
    name = names.collect("w1", "ps", "t1", 6, 0)
    fut, _ = pending(s.app, name)
    wire = signed(name)
    await s.app.counting._received(6, wire)
    got_name, content, _ = await asyncio.wait_for(fut, 1)
    assert bytes(content) == b"payload"
    assert (s.app.counting.packets_in, s.app.counting.bytes_in) == (1, len(wire))


@pytest.mark.asyncio
async def test_a_loop_turns_packets_leave_in_one_write_and_none_is_lost_silently():
    s = Sent()
    face = s.app.counting
    for i in range(3):
        face.send(b"\x06\x01" + bytes([i]))
    assert s.writer.writes == []                    # queued until the end of this turn
    await asyncio.sleep(0)
    assert s.writer.writes == [[b"\x06\x01\x00", b"\x06\x01\x01", b"\x06\x01\x02"]]
    face.send(b"\x06\x00")
    await face.drain()                              # pacing: what is queued is written first
    assert s.writer.writes[-1] == [b"\x06\x00"]
    face.send(b"\x05\x00")
    face.shutdown()                                 # written before the face closes
    assert s.writer.writes[-1] == [b"\x05\x00"]
    face.send(b"\x05\x01")                          # the writer is gone by the flush: lost
    await asyncio.sleep(0)
    assert face.lost_sends == 1 and face.packets_out == 6


@pytest.mark.asyncio
async def test_a_nack_in_the_turn_an_entry_was_cancelled_and_asked_again_nacks_the_new_one():
    """The fetcher cancels a flight and re-expresses its name in one turn; the cancelled
    entry leaves its node only on the next, so a Nack handled in between meets it."""
    from ndn.types import InterestNack
    from ndnps.client.security import Security
    sec = Security(KEY, names.key("ps", "t1"))
    s = Sent()
    a = names.collect("w1", "ps", "t1", 2, 0)
    old = s.app.express_future(a, sec.validator, lifetime=5000)
    old.cancel()
    new = s.app.express_future(a, sec.validator, lifetime=5000)
    prefix = s.app.express_future(a, sec.validator, lifetime=5000, can_be_prefix=True)
    s.app._on_nack(a, 150)                          # no InvalidStateError
    for f in (new, prefix):
        with pytest.raises(InterestNack):
            await asyncio.wait_for(f, 1)
    await asyncio.sleep(0)
    assert not s.app._exact and not s.app._pit
