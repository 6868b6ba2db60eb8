"""asyncio helpers: waiting for an event with a time limit without losing a cancellation, and
the millisecond clock Interest deadlines are counted on.

On Python 3.11, ``asyncio.wait_for(event.wait(), t)`` returns normally when the event is set in
the same loop iteration as the waiting task is cancelled: the cancellation is lost (fixed in
3.12, where wait_for is built on ``asyncio.timeout``).  A worker stopped just as the PS
collected its step then ran on until ps_timeout.  ``asyncio.timeout`` has no such window."""
from __future__ import annotations

import asyncio

from ndnps.ndn.clock import monotonic


async def wait_event(event: asyncio.Event, timeout: float) -> bool:
    """True once `event` is set, False after `timeout` seconds; a cancellation propagates."""
    if event.is_set():
        return True
    try:
        async with asyncio.timeout(max(timeout, 0.0)):
            await event.wait()
        return True
    except TimeoutError:
        return event.is_set()           # set in the very iteration the time ran out


def now_ms() -> int:
    """Milliseconds on the running event loop's clock (monotonic; a test's fake clock follows
    it): the clock of a received Interest's deadline (`ctx["deadline"]`) and of everything
    that holds Interests until then.  Outside a running loop, the process's monotonic clock
    (ndnps.ndn.clock)."""
    try:
        return int(asyncio.get_running_loop().time() * 1000)
    except RuntimeError:
        return int(monotonic() * 1000)
