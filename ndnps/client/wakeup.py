"""The asyncio side of a sans-I/O exchange's timers: one loop timer at the exchange's next
deadline.  The exchange says when it next wants to be woken (`next_timer()`); the owner calls
`at(due)` after every event, and `on_wake()` runs at `due` or later, never before: a loop
timer that comes early (a deadline that moved later meanwhile, or uvloop's millisecond clock
rounding a delay down) finds nothing due and waits out the rest.  Moving a deadline later
costs no loop call (the timer, when it comes, looks again): every pushed segment moves one."""
from __future__ import annotations

import asyncio
from typing import Callable

from ndnps.ndn.rto import HALF_TICK


class Wakeup:
    def __init__(self, clock: Callable[[], float], on_wake: Callable[[], None]) -> None:
        self.clock = clock                      # the exchange's clock (any monotonic one)
        self.on_wake = on_wake
        self.handle: asyncio.TimerHandle | None = None
        self.handle_at = 0.0

    def at(self, due: float | None) -> None:
        """Wake at `due` (clock time; None: nothing pending) unless a timer comes sooner."""
        if due is None or (self.handle is not None and self.handle_at <= due):
            return
        self.cancel()
        self.handle_at = due
        self.handle = asyncio.get_running_loop().call_later(
            max(0.0, due - self.clock()) + HALF_TICK, self._run)

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None

    def _run(self) -> None:
        self.handle = None
        self.on_wake()
