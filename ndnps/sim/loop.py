"""An asyncio event loop in virtual time: a discrete-event simulator's clock under the real
asyncio machinery (tasks, futures, timeouts, `asyncio.sleep`).

`time()` is the virtual clock, from 0. A turn with nothing ready does not sleep: the clock
jumps to the earliest scheduled timer and the turn runs it, as ndnSIM's (ns-3's) scheduler
runs the next event (ns-3's DefaultSimulatorImpl). The loop is asyncio's own
`BaseEventLoop._run_once` with a selector that only moves the clock, so callbacks run in a
real loop's order (ready callbacks first, in order, then due timers by time), and timers due
at the same instant in the order they were set, as ns-3 orders events by (time, uid); asyncio's
heap leaves such ties in an order of its own. A run is deterministic: the same program gives
the same events at the same virtual times.

There is no real I/O in it: no selector, no executor, no signal handlers. Sockets and
`run_in_executor` (getaddrinfo included) raise at once, and a turn with nothing ready and
nothing scheduled, which a real loop would sleep through forever, raises `Stalled`: in a
simulation nothing from outside can ever wake it. Unlike the `looptime` test plugin, which
patches a real selector loop and still polls its sockets, this one cannot hang.

`events` counts the callbacks run (a task's step, a timer, a delivery): the simulator's
events, for events per second.
"""
from __future__ import annotations

import asyncio
import collections
import heapq
import itertools
from typing import Any, Callable, Coroutine, TypeVar

T = TypeVar("T")


class Stalled(RuntimeError):
    """Nothing is ready and no timer is scheduled: the simulation can never go on."""


class _CountingDeque(collections.deque):
    """asyncio's ready queue, counting what `_run_once` takes from it (each handle it runs)."""

    def __init__(self) -> None:
        super().__init__()
        self.taken = 0

    def popleft(self) -> Any:
        self.taken += 1
        return super().popleft()


class _Timer(asyncio.TimerHandle):
    """A timer ordered by (time, when it was set): ties run first-come first-served."""

    __slots__ = ("_seq",)

    def __init__(self, seq: int, *args: Any) -> None:
        super().__init__(*args)
        self._seq = seq

    def __lt__(self, other: Any) -> bool:
        me: Any = self                      # asyncio's private fields, untyped
        if me._when == other._when:
            return me._seq < other._seq
        return me._when < other._when


class _Clock:
    """The selector asyncio's `_run_once` asks to wait `timeout`: it never waits, it moves the
    virtual clock to the earliest timer (exactly to its time, so the turn finds it due)."""

    def __init__(self, loop: "VirtualLoop") -> None:
        self.loop = loop

    def select(self, timeout: float | None) -> list:
        loop: Any = self.loop
        if timeout is None:
            raise Stalled(f"nothing ready and no timer scheduled at t={loop.time():.6f} s: "
                          "a task waits for something only the outside could bring")
        if timeout > 0:
            # cancelled heads were popped by _run_once before asking
            loop._now = max(loop._now, loop._scheduled[0]._when)
        return []

    def close(self) -> None:
        pass


class VirtualLoop(asyncio.BaseEventLoop):
    """An event loop whose clock is virtual and jumps to the next timer (see the module)."""

    def __init__(self, start: float = 0.0) -> None:
        super().__init__()
        self._now = float(start)
        self._selector = _Clock(self)
        self._ready = _CountingDeque()
        self._clock_resolution = 1e-9
        self._seq = itertools.count()

    def time(self) -> float:
        return self._now

    def call_at(self, when: float, callback: Callable[..., object],  # type: ignore[override]
                *args: Any, context: Any = None) -> asyncio.TimerHandle:
        """asyncio's call_at, with the FIFO tie-break (call_later comes here too)."""
        if when is None:
            raise TypeError("when cannot be None")
        base: Any = self                    # asyncio's private fields, untyped
        base._check_closed()
        timer: Any = _Timer(next(self._seq), when, callback, args, self, context)
        heapq.heappush(base._scheduled, timer)
        timer._scheduled = True
        return timer

    @property
    def events(self) -> int:
        """Callbacks run so far."""
        return self._ready.taken

    # ---- what BaseEventLoop leaves to a selector loop ------------------------------------------

    def _process_events(self, event_list: list) -> None:
        pass

    def _write_to_self(self) -> None:
        pass                    # call_soon_threadsafe: the loop never sleeps, nothing to wake

    def _real_io(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("no real I/O in a virtual-time loop: use the simulated network")

    add_reader = add_writer = remove_reader = remove_writer = _real_io  # type: ignore[assignment]
    sock_recv = sock_recv_into = sock_sendall = sock_connect = sock_accept = _real_io
    add_signal_handler = _real_io           # type: ignore[assignment]

    def run_in_executor(self, executor: Any, func: Callable[..., T],  # type: ignore[override]
                        *args: Any) -> Any:
        raise RuntimeError(f"no threads in a virtual-time loop: {func!r} would run in real "
                           "time (getaddrinfo included: give the simulated faces their peers)")


def run(main: Coroutine[Any, Any, T], start: float = 0.0) -> tuple[T, VirtualLoop]:
    """Run `main` to completion on a new VirtualLoop (as asyncio.run does, async generators
    shut down and the loop closed); returns its result and the loop (its clock and event
    count stay readable)."""
    loop = VirtualLoop(start)
    with asyncio.Runner(loop_factory=lambda: loop) as runner:
        result = runner.run(main)
    return result, loop
