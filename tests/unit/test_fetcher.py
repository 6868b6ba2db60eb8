"""ndnps.exchanges.transport.fetch through its asyncio adapter ndnps.client.fetcher (windowed fetch,
retransmission, bounded tries), and signed segmentation and assembly of segments arriving in
any order.

The event loop's clock is fake (looptime): it jumps to the next timer when nothing is ready,
so every round trip, lifetime and retransmission here happens at exactly its scheduled time,
however loaded the host is."""
from __future__ import annotations

import asyncio
import random

import pytest
from ndnps.protocol import names
from ndnps.protocol.codec import CodecError
from ndnps.ndn.rto import RtoEstimator
from ndnps.ndn.rto import BACKOFF_RTTS
from ndnps.client.errors import (FaceDown, InterestCanceled, InterestNack, InterestTimeout,
                                 ValidationFailure)
from ndnps.client.fetcher import SUPPRESSION_MARGIN, Declined, FetchError, SegmentFetcher
from ndnps.exchanges.transport.flight import Flight
from ndnps.exchanges.transport.loss import judged_flights, nack_delay, tail_probe_wait
from ndnps.client.security import DigestSigner, HmacSigner, Security
from ndnps.client.segments import sign_segments
from ndnps.client.wire import parse_data
from ndnps.exchanges.transport.buffers import Assembly, Recent
from ndnps.ndn.conventions import segment_number

pytestmark = pytest.mark.looptime
SEC = Security(b"k", names.key("ps", "t1"))


def name_of(s):
    return names.content("ps", "t1", "w1", s)


class FakeProducer:
    """`express` of a producer holding `blob`'s segments; `plan[(seg, attempt)]` decides
    what an attempt gets: 'timeout', 'nack', 'forged', 'marked' (the Data with a
    CongestionMark), or the Data (default)."""

    def __init__(self, blob: bytes, size: int = 100, delay: float = 0.001) -> None:
        self.wires = sign_segments(blob, name_of, SEC.signer, size=size)
        self.forged = sign_segments(blob, name_of, HmacSigner(b"bad", []), size=size)
        self.plan: dict[tuple[int, int], str] = {}
        self.attempts: dict[int, int] = {}
        self.in_flight = self.max_in_flight = 0
        self.fresh: list[bool] = []
        self.lifetimes: list[int] = []
        self.seg_lifetimes: dict[int, list[int]] = {}
        self.sent_at: dict[int, list[float]] = {}    # loop time of each attempt, by segment
        self.delay = delay
        self.late = 0.05

    async def express(self, name, validator, lifetime=4000, must_be_fresh=False, **kw):
        seg = names.parse_content(name).segment
        attempt = self.attempts.get(seg, 0)
        self.attempts[seg] = attempt + 1
        self.fresh.append(must_be_fresh)
        self.lifetimes.append(lifetime)
        self.seg_lifetimes.setdefault(seg, []).append(lifetime)
        self.sent_at.setdefault(seg, []).append(asyncio.get_running_loop().time())
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
            what = self.plan.get((seg, attempt), "data")
            if what == "drop":                       # lost: nothing comes back
                await asyncio.sleep(lifetime / 1000)
                raise InterestTimeout()
            if what == "late":                       # answered after a long queue
                await asyncio.sleep(self.late)
                what = "data"
            if what == "timeout":
                raise InterestTimeout()
            if what == "facedown":                   # expressed while the face was down
                raise FaceDown()
            if what == "nack":
                raise InterestNack(150)
            wire = (self.forged if what == "forged" else self.wires)[seg]
            data = parse_data(wire, mark=int(what == "marked"))
            if not validator(data):
                raise ValidationFailure(data)
            return data
        finally:
            self.in_flight -= 1


BLOB = bytes(range(256)) * 10          # 2560 bytes -> 26 segments of 100


def fetcher_for(producer, **kw) -> SegmentFetcher:
    kw.setdefault("rto", RtoEstimator(initial=0.05, min_rto=0.01, max_rto=0.2))
    kw.setdefault("patience", 0.0)              # tries alone (test_..._patience sets it)
    return SegmentFetcher(producer.express, SEC.validator, **kw)


@pytest.mark.asyncio
async def test_fetches_everything_with_a_window_in_flight():
    prod = FakeProducer(BLOB)
    f = fetcher_for(prod, window=8)
    parts = await f.fetch(name_of)
    assert b"".join(parts) == BLOB
    assert len(parts) == 26
    assert prod.max_in_flight == 8               # not one at a time, never more than the window
    assert f.stats.segments == 26 and f.stats.retransmissions == 0
    assert f.stats.bytes == len(BLOB)


@pytest.mark.asyncio
async def test_a_marked_data_halves_the_producers_window_once():
    prod = FakeProducer(BLOB)
    prod.plan = {(s, 0): "marked" for s in (4, 5)}          # one round trip's queue
    f = fetcher_for(prod, window=8)
    assert b"".join(await f.fetch(name_of)) == BLOB
    assert f.stats.marks == 2 and f.stats.window_cuts == 1 and f.stats.retransmissions == 0
    assert len(f.windows) == 1                              # one producer: /ps
    w = f.windows(f.flow_of(name_of(0)))
    # segment 0 alone (its FinalBlockId tells the rest), 1-3: slow start to 6; 4 cut it
    assert w.ssthresh == 3 and w.in_flight == 0


@pytest.mark.asyncio
async def test_timeouts_and_nacks_are_retransmitted_and_counted():
    prod = FakeProducer(BLOB)
    prod.plan = {(3, 0): "timeout", (3, 1): "timeout", (7, 0): "nack", (0, 0): "timeout"}
    f = fetcher_for(prod, window=4)
    assert b"".join(await f.fetch(name_of)) == BLOB
    assert f.stats.retransmissions == 4
    assert f.stats.timeouts == 3 and f.stats.nacks == 1
    assert prod.attempts[3] == 3


@pytest.mark.asyncio
async def test_forged_data_is_rejected_and_refetched_fresh():
    prod = FakeProducer(BLOB)
    prod.plan = {(5, 0): "forged"}
    f = fetcher_for(prod)
    assert b"".join(await f.fetch(name_of)) == BLOB
    assert f.stats.rejected == 1
    # the retry asks MustBeFresh, so a cache cannot hand back the forged copy
    assert prod.fresh.count(True) == 1


@pytest.mark.asyncio
async def test_bounded_tries_then_fetch_error():
    prod = FakeProducer(BLOB)
    prod.plan = {(2, a): "timeout" for a in range(10)}
    f = fetcher_for(prod, max_tries=3)
    with pytest.raises(FetchError):
        await f.fetch(name_of)
    assert prod.attempts[2] == 3


@pytest.mark.asyncio
async def test_a_segment_is_given_up_after_its_tries_and_the_patience_both():
    """Tries a few round trips apart are over in a blink at high loss: the segment persists
    until `patience` has passed since its first try as well; told how many tries (a probe),
    a transfer keeps to them."""
    prod = FakeProducer(BLOB, delay=0.01)
    prod.plan = {(2, a): "timeout" for a in range(10_000)}
    f = fetcher_for(prod, max_tries=3, patience=1.0)
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(FetchError, match="no valid Data after"):
        await f.fetch(name_of)
    assert loop.time() - start >= 1.0 and prod.attempts[2] > 3
    prod.attempts.clear()
    with pytest.raises(FetchError):
        await f.fetch_one(name_of(2), tries=2)
    assert prod.attempts[2] == 2


@pytest.mark.asyncio
async def test_without_a_sample_an_answer_to_a_retry_still_guesses_the_round_trip():
    """Every Interest before the first Data was held, or re-sent while another was alive: no
    RTT sample, but the answer's round trip is a better first guess than the initial RTO."""
    prod = FakeProducer(BLOB, delay=0.004)
    prod.plan = {(0, 0): "drop"}
    f = fetcher_for(prod, rto=RtoEstimator(initial=1.0, min_rto=0.01, max_rto=4.0))
    t = f.transfer(name_of, life=0.05, held=True)
    t.want([0])
    await t.run()
    assert f.rto.stats.samples == 0 and f.min_rtt == pytest.approx(0.004, abs=0.002)
    assert f.base_rto() < 0.05                     # not the initial second


@pytest.mark.asyncio
async def test_only_missing_segments_are_fetched():
    prod = FakeProducer(BLOB)
    have = {s: BLOB[s * 100:(s + 1) * 100] for s in range(26) if s not in (4, 17, 25)}
    f = fetcher_for(prod)
    parts = await f.fetch(name_of, have=have, final=25)
    assert b"".join(parts) == BLOB
    assert sorted(prod.attempts) == [4, 17, 25]


@pytest.mark.asyncio
async def test_held_first_segment_uses_its_lifetime_and_is_not_loss():
    prod = FakeProducer(BLOB)
    prod.plan = {(0, 0): "timeout", (0, 1): "timeout"}       # producer not ready yet
    f = fetcher_for(prod)
    await f.fetch(name_of, first_lifetime=0.5, first_tries=5)
    assert prod.lifetimes[:3] == [500, 500, 500]
    assert f.stats.held_timeouts == 2 and f.stats.timeouts == 0


@pytest.mark.asyncio
async def test_rto_adapts_and_a_timeout_backs_off_only_its_own_segment_to_8_round_trips():
    prod = FakeProducer(BLOB, delay=0.005)
    f = fetcher_for(prod, window=2)
    await f.fetch(name_of)
    assert f.rto.stats.samples >= 20
    assert f.rto.rto < 0.05                     # learnt from 5 ms round trips
    prod.plan = {(1, a): "timeout" for a in range(4)}
    prod.seg_lifetimes.clear()
    prod.attempts.clear()
    f.window, f.max_fast = 3, 0                 # timeouts only
    f.rto.min_rto, f.rto.max_rto = 0.01, 1.0    # 5 ms round trips: the base is the floor
    await f.fetch_many(name_of, [1, 2, 3])
    assert f.stats.timeouts == 4
    # segment 1 alone, doubling up to 8 smoothed round trips (~40 ms), not to max_rto
    ceiling = int(BACKOFF_RTTS * f.rto.stats.mean * 1000)
    assert 39 <= ceiling <= 40
    assert prod.seg_lifetimes == {1: [10, 20, ceiling, ceiling, ceiling], 2: [10], 3: [10]}
    assert f.rto.backoffs == 0                  # the shared estimator does not


def slow_rto() -> RtoEstimator:
    """An RTO far above the ~1 ms round trips: a recovery that waited for it would show as a
    timeout in the counters."""
    return RtoEstimator(initial=30.0, min_rto=30.0, max_rto=60.0)


@pytest.mark.asyncio
async def test_a_lost_segment_is_resent_once_a_later_one_is_answered_rack():
    prod = FakeProducer(BLOB)
    prod.plan = {(3, 0): "drop", (10, 0): "drop"}
    f = fetcher_for(prod, window=8, rto=slow_rto())
    assert b"".join(await asyncio.wait_for(f.fetch(name_of), 10)) == BLOB
    assert f.stats.timeouts == 0
    assert f.stats.fast_retransmissions == 2 == f.stats.retransmissions
    assert prod.attempts[3] == 2 and prod.attempts[10] == 2


@pytest.mark.asyncio
async def test_a_lost_last_segment_is_probed_after_two_round_trips_not_the_rto():
    prod = FakeProducer(BLOB)
    f = fetcher_for(prod, window=8, rto=RtoEstimator(initial=0.5, min_rto=0.01, max_rto=60))
    await f.fetch(name_of)                       # learn the ~1 ms round trip
    f.rto.min_rto = 30.0                         # the RTO itself would now take 30 s
    prod.plan = {(25, 0): "drop"}
    prod.attempts.clear()
    await asyncio.wait_for(f.fetch_many(name_of, list(range(26))), 10)
    assert f.stats.timeouts == 0 and f.stats.fast_retransmissions == 1
    assert prod.attempts[25] == 2


def test_a_tail_probe_waits_two_round_trips_and_a_resent_one_the_smallest():
    assert tail_probe_wait(0.040, 0.050, 0.001, resent=False) == pytest.approx(0.100)
    assert tail_probe_wait(0.040, 0.010, 0.001, resent=False) == pytest.approx(0.080)
    assert tail_probe_wait(0.040, 0.050, 0.001, resent=True) == pytest.approx(0.001)
    assert tail_probe_wait(0.040, 0.050, None, resent=True) == pytest.approx(0.100)


@pytest.mark.asyncio
async def test_a_late_answer_to_the_original_is_taken_once():
    prod = FakeProducer(BLOB)
    prod.plan = {(2, 0): "late"}                 # after 50 ms, long after the others
    f = fetcher_for(prod, window=8, rto=slow_rto())
    assert b"".join(await asyncio.wait_for(f.fetch(name_of), 10)) == BLOB
    assert f.stats.segments == 26               # a duplicate answer is not counted twice
    assert f.stats.timeouts == 0


@pytest.mark.asyncio
async def test_early_retransmissions_are_bounded_per_segment_then_the_timeout_rules():
    prod = FakeProducer(BLOB)
    prod.plan = {(3, a): "drop" for a in range(4)}
    f = fetcher_for(prod, window=4, rto=RtoEstimator(initial=0.05, min_rto=0.05, max_rto=0.4),
                    max_fast=2)
    assert b"".join(await asyncio.wait_for(f.fetch(name_of), 10)) == BLOB
    assert f.stats.fast_retransmissions <= 2
    assert f.stats.timeouts >= 1


@pytest.mark.asyncio
@pytest.mark.parametrize("suppression", [0.002, 0.03])
async def test_early_retries_wait_for_the_forwarders_suppression_doubling(suppression):
    """A forwarder drops a retransmission sooner than its suppression interval after the last
    one it forwarded, and doubles the interval per one forwarded: a fetch re-asks no sooner
    (suppression + margin, doubled per early retry)."""
    prod = FakeProducer(BLOB)
    prod.plan = {(3, 0): "drop", (3, 1): "drop"}
    f = fetcher_for(prod, window=8, rto=slow_rto(), suppression=suppression)
    assert b"".join(await asyncio.wait_for(f.fetch(name_of), 10)) == BLOB
    assert f.stats.timeouts == 0 and prod.attempts[3] == 3
    first, second, third = prod.sent_at[3]
    assert f.retx_spacing(0) == suppression + SUPPRESSION_MARGIN
    assert f.retx_spacing(1) == 2 * suppression + SUPPRESSION_MARGIN
    assert second - first >= f.retx_spacing(0) - 1e-9
    assert third - second >= f.retx_spacing(1) - 1e-9


@pytest.mark.asyncio
async def test_held_batch_a_lost_one_is_resent_as_soon_as_the_producer_is_ready():
    prod = FakeProducer(BLOB)
    prod.plan = {(0, 0): "late", (1, 0): "late", (2, 0): "drop", (3, 0): "late"}
    f = fetcher_for(prod, window=8, rto=slow_rto())
    loop = asyncio.get_running_loop()
    parts, ready, waited = await asyncio.wait_for(
        f.fetch_held(name_of, 3, 20.0, 20.0, loop.time() + 30), 10)
    assert b"".join(parts) == BLOB
    assert ready <= loop.time() and waited >= prod.late  # segment 0's Interest was held
    assert f.stats.held_timeouts == 0 and f.stats.timeouts == 0
    assert prod.attempts[2] == 2


@pytest.mark.asyncio
async def test_a_transfer_grows_and_drops_what_arrived_another_way():
    prod = FakeProducer(BLOB)
    prod.plan = {(5, a): "drop" for a in range(8)}
    got = []
    f = fetcher_for(prod, window=4, rto=slow_rto())
    t = f.transfer(name_of, on_segment=lambda seg: got.append(seg.number))
    t.want([4, 5])
    run = asyncio.ensure_future(t.run())
    await asyncio.sleep(0.01)
    t.want([6])
    t.have(5)                                    # e.g. pushed meanwhile
    assert sorted(await asyncio.wait_for(run, 5)) == [4, 6]
    assert got == [4, 6]
    assert not t.flights


# ---- segments ---------------------------------------------------------------------------------

def test_sign_segments_sizes_and_final_block_id():
    wires = sign_segments(b"a" * 20001, name_of, DigestSigner())
    assert len(wires) == 3
    for i, wire in enumerate(wires):
        data = parse_data(wire)
        assert names.parse_content(data.name).segment == i
        assert segment_number(data.final_block_id) == 2
        assert len(data.content) <= 8000 and len(wire) <= 8800
    assert len(sign_segments(b"", name_of, DigestSigner())) == 1


def test_assembly_any_order_duplicates_and_gaps():
    parts = [b"aa", b"bb", b"cc", b"dd"]
    asm = Assembly(7)
    assert asm.add(2, parts[2], 3)
    assert asm.has_gap and asm.missing() == [0, 1, 3] and asm.holes() == [0, 1]
    assert not asm.add(2, parts[2], 3)          # duplicate
    for s in (3, 0, 1):
        asm.add(s, parts[s], 3)
    assert asm.complete and not asm.has_gap
    assert asm.blob() == b"".join(parts)
    assert asm.duplicates == 1


def test_assembly_has_gap_is_a_hole_below_the_highest_segment():
    rng = random.Random(5)
    for _ in range(2000):
        asm = Assembly(0)
        final = rng.choice([None, rng.randrange(12)])
        for _ in range(rng.randrange(1, 16)):
            asm.add(rng.randrange(-1, 14), b"x", rng.choice([None, final]))
            assert asm.has_gap == any(s not in asm.parts for s in range(asm.highest))


def test_assembly_without_final_knows_only_up_to_the_highest():
    asm = Assembly(1)
    asm.add(3, b"x", None)
    assert asm.missing() == [0, 1, 2] and not asm.complete
    with pytest.raises(ValueError):
        asm.blob()


@pytest.mark.parametrize("steps", [
    [(0, 3), (1, 2)],          # conflicting FinalBlockIds
    [(5, 3)],                  # beyond the final segment
    [(5, None), (0, 3)],       # a segment beyond a final learnt later
])
def test_assembly_inconsistent_is_corrupt(steps):
    asm = Assembly(1)
    for seg, final in steps:
        asm.add(seg, b"x", final)
    assert asm.corrupt


def test_recent_keeps_the_last_few():
    r: Recent[int, str] = Recent(2)
    for i in range(4):
        r.put(i, str(i))
    assert r.keys() == [2, 3] and r.get(1) is None and 3 in r and len(r) == 2
    assert r.pop(3) == "3" and r.pop(3) is None


def test_codec_error_is_a_value_error():
    # apps catch CodecError for malformed payloads; it must not escape as something else
    assert issubclass(CodecError, ValueError)


@pytest.mark.asyncio
async def test_express_futures_a_shutdown_cancelled_is_lost_and_asked_again():
    """An express that hands back Futures (App.express_future): the transfer adds callbacks,
    no Task; a future cancelled by anything but the transfer is asked again, as an Interest
    that never left: no timeout, no backoff."""
    prod = FakeProducer(BLOB)
    shut: list[asyncio.Future] = []

    def express_future(name, validator, **kw) -> asyncio.Future:
        fut = asyncio.ensure_future(prod.express(name, validator, **kw))
        if names.parse_content(name).segment == 5 and not shut:
            shut.append(fut)
            asyncio.get_running_loop().call_soon(fut.cancel)      # the face went down
        return fut
    f = SegmentFetcher(express_future, SEC.validator,
                       rto=RtoEstimator(initial=0.05, min_rto=0.01, max_rto=0.2), window=8)
    assert b"".join(await asyncio.wait_for(f.fetch(name_of), 10)) == BLOB
    assert shut and shut[0].cancelled() and prod.attempts[5] == 2
    assert f.stats.timeouts == 0 and f.stats.retransmissions == 1
    assert prod.seg_lifetimes[5][1] == prod.seg_lifetimes[5][0]     # not backed off


@pytest.mark.asyncio
async def test_an_interest_pending_when_the_face_closed_is_asked_again_without_backoff():
    """App ends the pending Interests of a face that closed with InterestCanceled: to the
    fetcher that is an Interest lost with the face (FaceDown), not a timeout."""
    prod = FakeProducer(BLOB)
    closed = []

    async def express(name, validator, **kw):
        if names.parse_content(name).segment == 4 and not closed:
            closed.append(kw["lifetime"])
            raise InterestCanceled()
        return await prod.express(name, validator, **kw)
    f = SegmentFetcher(express, SEC.validator,
                       rto=RtoEstimator(initial=0.05, min_rto=0.01, max_rto=0.2), window=8)
    assert b"".join(await asyncio.wait_for(f.fetch(name_of), 10)) == BLOB
    assert f.stats.timeouts == 0 and prod.seg_lifetimes[4][0] <= closed[0]


@pytest.mark.asyncio
async def test_a_declined_segment_lands_with_the_owners_content():
    prod = FakeProducer(BLOB)

    async def express(name, validator, **kw):
        if names.parse_content(name).segment == 2:
            raise Declined(b"stand-in")
        return await prod.express(name, validator, **kw)
    f = SegmentFetcher(express, SEC.validator, window=4)
    parts = await asyncio.wait_for(f.fetch(name_of), 10)
    assert parts[2] == b"stand-in" and b"".join(parts[3:]) == BLOB[300:]
    assert f.stats.retransmissions == 0


@pytest.mark.asyncio
async def test_interests_sent_while_the_face_was_down_cost_no_try_and_no_backoff():
    """A forwarder restart: Interests expressed while the face is down come back FaceDown
    (App.express holds them until the face is back).  More of them than max_tries in a row
    must not fail the fetch, and the next lifetime is not doubled: a collect whose lifetimes
    had backed off to seconds by then lost a live worker to one more loss (chaos)."""
    prod = FakeProducer(BLOB, delay=0.005)     # 8 round trips leave room to back off
    for attempt in range(6):
        prod.plan[(3, attempt)] = "facedown"
    prod.plan[(20, 0)] = "timeout"                # a real loss still backs off
    f = fetcher_for(prod, max_tries=3)
    assert b"".join(await asyncio.wait_for(f.fetch(name_of), 10)) == BLOB
    # (the first lifetime is from the initial RTO, the others from the measured one)
    assert prod.attempts[3] == 7 and max(prod.seg_lifetimes[3][1:]) <= prod.seg_lifetimes[3][0]
    assert prod.seg_lifetimes[20][1] == 2 * prod.seg_lifetimes[20][0]
    assert f.stats.timeouts == 1


@pytest.mark.asyncio
async def test_face_down_retries_stop_at_the_deadline():
    prod = FakeProducer(BLOB)
    for attempt in range(1000):
        prod.plan[(0, attempt)] = "facedown"
    f = fetcher_for(prod)
    deadline = asyncio.get_running_loop().time() + 0.2
    with pytest.raises(FetchError, match="deadline"):
        await asyncio.wait_for(f.fetch_held(name_of, None, 0.05, 0.05, deadline), 5)


@pytest.mark.asyncio
async def test_a_first_data_without_final_block_id_is_the_whole_object():
    class NoFinal(FakeProducer):
        async def express(self, name, validator, **kw):
            data = await super().express(name, validator, **kw)
            data.final_block_id = None
            return data

    prod = NoFinal(BLOB)
    parts = await asyncio.wait_for(fetcher_for(prod, window=1).fetch(name_of), 5)
    assert parts == [BLOB[:100]] and prod.attempts == {0: 1}


def test_loss_detection_walks_only_the_flights_due_before_the_last_answer():
    """`judged_flights` stops at the first unheld flight sent after the one answered last; it must
    pick what the plain definition picks: every flight due before that one, and the flight
    due last for the tail probe when it is not among them.  Random windows sent as a
    Transfer sends them: held Interests (before the first Data) first, in any segment order,
    some answered and gone."""
    rng = random.Random(7)
    for _ in range(20000):
        flights: dict[int, Flight] = {}
        segs = rng.sample(range(40), 16)
        held, seq, orders = rng.randint(0, 8), 0, [(-1, -1, -1)]
        for seg in segs[:rng.randint(0, 16)]:
            flight = Flight(seg, seq, 0.0, True, seq < held, 1.0)
            seq += 1
            flights[seg] = flight
            orders.append(flight.order)
            if rng.random() < 0.3:
                del flights[rng.choice(list(flights))]
        rack, probe = rng.choice(orders), rng.random() < 0.7
        expected = [f for f in flights.values() if f.order < rack]
        last = max(flights.values(), key=lambda f: f.order, default=None)
        if probe and last is not None and not last.order < rack:
            expected.append(last)
        assert judged_flights(flights, rack, probe) == expected


def test_under_uvloop_a_tail_probe_timer_runs_once(monkeypatch):
    """uvloop rounds a timer's delay to whole milliseconds: set for its deadline, the probe
    timer could run up to 0.5 ms before it, find nothing due, and re-arm every loop turn until
    the clock ticked over (about half the probes, depending on the deadline's fraction)."""
    import uvloop

    from ndnps.client.fetcher import Transfer

    idle_calls = 0
    on_timer = Transfer._on_timer

    def counted(self: Transfer) -> None:            # a wake-up that no answer came before
        nonlocal idle_calls
        idle_calls += self.f.stats.segments == getattr(self, "_seen", -1)
        self._seen = self.f.stats.segments
        on_timer(self)
    monkeypatch.setattr(Transfer, "_on_timer", counted)

    async def main() -> int:
        prod = FakeProducer(BLOB)
        f = fetcher_for(prod, window=8, rto=RtoEstimator(initial=0.5, min_rto=0.01, max_rto=60))
        await f.fetch(name_of)
        f.rto.min_rto = 30.0                     # only the tail probe can repair the loss
        before = idle_calls
        for _ in range(8):
            prod.plan = {(25, 0): "drop"}
            prod.attempts.clear()
            await asyncio.wait_for(f.fetch_many(name_of, list(range(26))), 10)
            assert prod.attempts[25] == 2
        assert f.stats.fast_retransmissions == 8
        return idle_calls - before

    # per fetch: the probe's timer (twice at most), nothing more
    assert uvloop.run(main()) <= 2 * 8


@pytest.mark.asyncio
async def test_retry_now_asks_again_at_once_what_a_gone_producer_left_waiting():
    """A worker's content fetch whose PS died: its next try may be a long lifetime or a
    backed-off Nack away.  When the PS is back (it re-offers the task), `retry_now` asks again
    at once, the first Interest's lifetime notwithstanding."""
    prod = FakeProducer(BLOB)
    prod.plan[(0, 0)] = "drop"                    # sent to the PS that died
    f = fetcher_for(prod)
    task = asyncio.ensure_future(f.fetch(name_of, first_lifetime=60.0, first_tries=3))
    while prod.attempts.get(0) != 1:
        await asyncio.sleep(0.001)
    assert len(f.transfers) == 1
    f.retry_now()
    assert b"".join(await asyncio.wait_for(task, 10)) == BLOB
    assert prod.attempts[0] == 2 and f.stats.timeouts == 0 and not f.transfers


@pytest.mark.asyncio
async def test_nacks_back_off_to_half_a_second_at_most():
    """No route for a while (a producer restarting): the tries after Nacks double from 50 ms
    but come at most 0.5 s apart, so a producer back is heard soon, whatever the lifetime."""
    prod = FakeProducer(BLOB, delay=0.0)
    for attempt in range(7):
        prod.plan[(0, attempt)] = "nack"
    f = fetcher_for(prod)
    task = asyncio.ensure_future(f.fetch(name_of, first_lifetime=60.0, first_tries=20))
    assert b"".join(await asyncio.wait_for(task, 10)) == BLOB
    assert prod.attempts[0] == 8 and f.stats.nacks == 7
    assert [nack_delay(t, 60.0) for t in range(7)] == [0.05, 0.1, 0.2, 0.4, 0.5, 0.5, 0.5]
    assert nack_delay(3, 0.3) == 0.3 and nack_delay(10**6, 60.0) == 0.5


@pytest.mark.asyncio
async def test_a_deadline_is_never_spent_on_one_interest():
    """With 1 s to the deadline and a long held lifetime, the first Interest lives half the
    time left; lost, the next still has time (one lost collect Interest re-sent for all of
    the last 1.9 s of worker_timeout dropped a live worker)."""
    prod = FakeProducer(BLOB)
    prod.plan[(0, 0)] = "drop"
    f = fetcher_for(prod)
    deadline = asyncio.get_running_loop().time() + 1.0
    parts, _, _ = await asyncio.wait_for(f.fetch_held(name_of, None, 5.0, 5.0, deadline), 5)
    assert b"".join(parts) == BLOB and prod.attempts[0] == 2
    first, second = prod.seg_lifetimes[0]
    assert first <= 500 and second <= first


def test_the_reordering_floor_waits_for_link_repair_on_the_face_or_further_on():
    """A consumer that re-asks before the links' own repair races it: with link reliability on
    its face, or on the links beyond its forwarder (--link-repair), it waits LINK_REPAIR."""
    from ndnps.client.fetcher import LINK_REPAIR, REORDER_FLOOR, reorder_floor
    from ndnps.client.app import App
    for lp, further, floor in ((False, False, REORDER_FLOOR), (True, False, LINK_REPAIR),
                               (False, True, LINK_REPAIR)):
        app = App("unix:///nonexistent.sock", lp_reliability=lp, link_repair=further)
        assert reorder_floor(app) == floor


@pytest.mark.asyncio
async def test_a_held_first_segment_may_start_short_and_double():
    """A worker's content: held while the PS assigns the tasks, there at once afterwards, when
    a lost Interest would otherwise wait its whole held lifetime."""
    prod = FakeProducer(BLOB)
    prod.plan = {(0, a): "timeout" for a in range(5)}
    f = fetcher_for(prod)
    await f.fetch(name_of, first_lifetime=0.25, max_lifetime=2.0, first_tries=8)
    assert prod.seg_lifetimes[0] == [250, 500, 1000, 2000, 2000, 2000]
    assert f.stats.held_timeouts == 5 and f.stats.timeouts == 0
