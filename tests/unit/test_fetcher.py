"""ndnps.fetcher (windowed fetch, retransmission, bounded tries) and ndnps.segments (signed
segmentation, assembly of segments arriving in any order)."""
from __future__ import annotations

import asyncio

import pytest
from ndn.encoding import parse_data
from ndn.types import InterestNack, InterestTimeout, ValidationFailure, ValidResult

from ndnps import names
from ndnps.codec import CodecError
from ndnps.estimator import RtoEstimator
from ndnps.fetcher import FetchError, SegmentFetcher
from ndnps.security import DigestSigner, HmacSigner, Security
from ndnps.segments import Assembly, Recent, sign_segments

SEC = Security(b"k", names.key("ps", "t1"))


def name_of(s):
    return names.content("ps", "t1", "w1", s)


class FakeProducer:
    """`express` of a producer holding `blob`'s segments; `plan[(seg, attempt)]` decides
    what an attempt gets: 'timeout', 'nack', 'forged', or the Data (default)."""

    def __init__(self, blob: bytes, size: int = 100, delay: float = 0.001) -> None:
        self.wires = sign_segments(blob, name_of, SEC.signer, size=size)
        self.forged = sign_segments(blob, name_of, HmacSigner(b"bad", []), size=size)
        self.plan: dict[tuple[int, int], str] = {}
        self.attempts: dict[int, int] = {}
        self.in_flight = self.max_in_flight = 0
        self.fresh: list[bool] = []
        self.lifetimes: list[int] = []
        self.delay = delay

    async def express(self, name, validator, lifetime=4000, must_be_fresh=False, **kw):
        seg = names.parse_content(name).segment
        attempt = self.attempts.get(seg, 0)
        self.attempts[seg] = attempt + 1
        self.fresh.append(must_be_fresh)
        self.lifetimes.append(lifetime)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
            what = self.plan.get((seg, attempt), "data")
            if what == "timeout":
                raise InterestTimeout()
            if what == "nack":
                raise InterestNack(150)
            wire = (self.forged if what == "forged" else self.wires)[seg]
            name, meta, content, sig = parse_data(wire)
            if await validator(name, sig, {}) != ValidResult.PASS:
                raise ValidationFailure(name, meta, content, sig, ValidResult.FAIL)
            return name, content, {"meta_info": meta}
        finally:
            self.in_flight -= 1


BLOB = bytes(range(256)) * 10          # 2560 bytes -> 26 segments of 100


def fetcher_for(producer, **kw) -> SegmentFetcher:
    kw.setdefault("rto", RtoEstimator(initial=0.05, min_rto=0.01, max_rto=0.2))
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
async def test_rto_adapts_and_backs_off():
    prod = FakeProducer(BLOB, delay=0.001)
    f = fetcher_for(prod, window=2)
    await f.fetch(name_of)
    assert f.rto.stats.samples >= 20
    assert f.rto.rto < 0.05                     # learnt from ~1 ms round trips
    prod.plan = {(1, 0): "timeout"}
    prod.attempts.clear()
    before = f.rto.backoffs
    await f.fetch_one(name_of(1))
    assert f.rto.backoffs == before + 1


# ---- segments ---------------------------------------------------------------------------------

def test_sign_segments_sizes_and_final_block_id():
    wires = sign_segments(b"a" * 20001, name_of, DigestSigner())
    assert len(wires) == 3
    for i, wire in enumerate(wires):
        name, meta, content, _ = parse_data(wire)
        assert names.parse_content(name).segment == i
        assert names.segment_number(meta.final_block_id) == 2
        assert len(content) <= 8000 and len(wire) <= 8800
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
