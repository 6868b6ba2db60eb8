"""A stream face's write batching (ndnps/forwarder/faces/stream.py, `batch`: the apps' faces, [listen]
batch_ms): under load a write waits until `batch` has passed since the last one, so that one
write (one wake-up of the app) carries several packets; after a quiet spell a packet leaves at
the end of its loop turn. The loop's clock is fake (looptime): the waits are exact."""
from __future__ import annotations

import asyncio

import pytest

from ndnps.forwarder.config import APP_BATCH, ConfigError, parse_config
from ndnps.forwarder.faces.stream import StreamFace
from tests.unit.test_fw_stream_marking import Owner, Transport, segment

pytestmark = [pytest.mark.timeout(30), pytest.mark.looptime]

BATCH = 0.002


def face(batch: float) -> tuple[StreamFace, Transport]:
    f = StreamFace(Owner(), "unix", batch=batch)
    tr = Transport()
    tr.protocol = f
    f.connection_made(tr)        # type: ignore[arg-type]
    return f, tr


async def turn() -> None:
    """Let the loop run what is ready now (no time passes on the fake clock)."""
    for _ in range(3):
        await asyncio.sleep(0)


async def test_a_packet_after_a_quiet_spell_leaves_at_the_end_of_its_turn():
    f, tr = face(BATCH)
    f.send(segment(1))
    assert tr.writes == []                      # not before the turn ends
    await turn()
    assert tr.writes == [[segment(1)]]


async def test_under_load_packets_within_batch_of_the_last_write_leave_together():
    loop = asyncio.get_running_loop()
    f, tr = face(BATCH)
    f.send(segment(1))
    await turn()
    written_at = [loop.time()]
    for i in range(2, 6):                       # one a loop turn, as a push arrives
        f.send(segment(i))
        await turn()
    assert tr.writes == [[segment(1)]]          # held: within BATCH of the first write
    await asyncio.sleep(BATCH)
    written_at.append(loop.time())
    assert tr.writes == [[segment(1)], [segment(i) for i in range(2, 6)]]
    assert written_at[1] - written_at[0] == pytest.approx(BATCH)
    f.send_many([segment(6), segment(7)])       # send_many waits as send does
    await turn()
    assert len(tr.writes) == 2
    await asyncio.sleep(BATCH)
    assert tr.writes[-1] == [segment(6), segment(7)]


async def test_without_batch_every_turn_writes():
    f, tr = face(0.0)
    for i in range(3):
        f.send(segment(i))
        await turn()
    assert tr.writes == [[segment(0)], [segment(1)], [segment(2)]]


async def test_a_batched_write_of_a_closed_face_is_dropped_quietly():
    f, tr = face(BATCH)
    f.send(segment(1))
    await turn()
    f.send(segment(2))
    f._closed = True                           # closed while its write waits
    await asyncio.sleep(2 * BATCH)
    assert tr.writes == [[segment(1)]]


def test_batch_ms_is_configured_under_listen_and_checked():
    assert parse_config({}).batch == APP_BATCH
    assert parse_config({"listen": {"batch_ms": 0}}).batch == 0.0
    for bad in (-1, 1000, float("nan"), "1"):
        with pytest.raises(ConfigError, match="listen.batch_ms"):
            parse_config({"listen": {"batch_ms": bad}})
