"""ndnps.client.wakeup: the loop timer of a sans-I/O exchange's next deadline comes at the
deadline or after, never before, on asyncio's loop (looptime's fake clock) and on uvloop's
millisecond clock; a deadline moved later costs no new loop timer."""
from __future__ import annotations

import asyncio

import pytest

from ndnps.client.wakeup import Wakeup


class Deadline:
    """A minimal exchange: one deadline, moved by touches (a push's quiet tail)."""

    def __init__(self, clock) -> None:
        self.clock = clock
        self.due: float | None = None
        self.fired: list[float] = []

    def touch(self, quiet: float) -> None:
        self.due = self.clock() + quiet

    def on_timer(self, now: float) -> None:
        if self.due is not None and self.due <= now:
            self.due = None
            self.fired.append(now)


def driven(clock):
    d = Deadline(clock)

    def wake() -> None:
        d.on_timer(clock())
        w.at(d.due)
    w = Wakeup(clock, wake)
    return d, w


@pytest.mark.asyncio
@pytest.mark.looptime
async def test_fires_once_the_last_touch_is_old_enough():
    loop = asyncio.get_running_loop()
    d, w = driven(loop.time)
    touched = []
    for _ in range(5):                          # a burst: each touch moves the deadline later
        d.touch(0.02)
        w.at(d.due)
        touched.append(loop.time())
        await asyncio.sleep(0.005)
    assert d.fired == []
    d.touch(0.005)                              # a shorter wait: the timer comes earlier
    w.at(d.due)
    touched.append(loop.time())
    assert w.handle_at == pytest.approx(touched[-1] + 0.005)
    await asyncio.sleep(0.05)
    assert len(d.fired) == 1
    assert touched[-1] + 0.005 <= d.fired[0] < touched[-1] + 0.005 + 0.001


@pytest.mark.parametrize("use_uvloop", [False, True])
def test_on_a_real_loop_never_fires_before_the_deadline(use_uvloop):
    """On each loop's own clock (uvloop's counts whole milliseconds and rounds a delay): the
    wake-up set for 5 ms finds the deadline moved to 20 ms and waits out the rest; a cancelled
    one never comes.  Nothing depends on the host's speed: the test waits for the call."""
    import time

    import uvloop

    async def main() -> tuple[list[float], float]:
        d, w = driven(time.monotonic)
        called = asyncio.get_running_loop().create_future()
        inner = w.on_wake

        def wake() -> None:
            inner()
            if d.fired and not called.done():
                called.set_result(None)
        w.on_wake = wake
        d.touch(0.005)
        w.at(d.due)                             # the timer is set for 5 ms ...
        before = time.monotonic()
        d.touch(0.02)                           # ... and the deadline moved to 20 ms
        w.at(d.due)
        c, cw = driven(time.monotonic)
        c.touch(0.001)
        cw.at(c.due)
        cw.cancel()
        await called
        await asyncio.sleep(0.01)
        assert c.fired == []
        return d.fired, before

    run = uvloop.run if use_uvloop else asyncio.run
    fired, before = run(main())
    assert len(fired) == 1 and fired[0] >= before + 0.02
