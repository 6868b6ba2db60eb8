"""An asyncio event loop in virtual time: a discrete-event simulator's clock under the real
asyncio machinery (tasks, futures, timeouts, `asyncio.sleep`).

`time()` is the virtual clock, from 0. A turn with nothing ready does not sleep: the clock
jumps to the earliest scheduled timer and the turn runs it, as ndnSIM's (ns-3's) scheduler
runs the next event (ns-3's DefaultSimulatorImpl). A turn is asyncio's
`BaseEventLoop._run_once`, step for step, with the selector's wait replaced by the clock's
jump, so callbacks run in a real loop's order (ready callbacks first, in order, then due
timers by time), and timers due at the same instant in the order they were set, as ns-3
orders events by (time, uid); asyncio's heap leaves such ties in an order of its own.  Its
heap holds (time, sequence, handle) entries, compared in C, not handles. A run is deterministic: the same program gives
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
import contextvars
import itertools
from heapq import heapify, heappop, heappush
from typing import Any, Callable, Coroutine, TypeVar

T = TypeVar("T")

# asyncio's thresholds for sweeping cancelled timers out of the heap (base_events.py)
_MIN_SCHEDULED_TIMER_HANDLES = 100
_MIN_CANCELLED_TIMER_HANDLES_FRACTION = 0.5


class Stalled(RuntimeError):
    """Nothing is ready and no timer is scheduled: the simulation can never go on."""


class _Timer(asyncio.TimerHandle):
    """asyncio's TimerHandle, made without its constructor's chain: a simulation makes one
    per frame and per timeout, and the debug checks and nested calls cost more than the
    rest of scheduling it."""

    __slots__ = ()

    def __init__(self, when: float, callback: Callable[..., object], args: tuple,
                 loop: asyncio.AbstractEventLoop, context: Any) -> None:
        me: Any = self                      # asyncio's private fields, untyped
        me._callback = callback
        me._args = args
        me._cancelled = False
        me._loop = loop
        me._repr = None
        me._context = context if context is not None else contextvars.copy_context()
        me._source_traceback = None
        me._when = when
        me._scheduled = True


class VirtualLoop(asyncio.BaseEventLoop):
    """An event loop whose clock is virtual and jumps to the next timer (see the module)."""

    # BaseEventLoop's own state, which its turn reads and typeshed does not declare
    _closed: bool
    _debug: bool
    _stopping: bool
    _ready: collections.deque
    _timer_cancelled_count: int
    _check_thread: Callable[[], None]
    _check_callback: Callable[[Callable[..., object], str], None]

    def __init__(self, start: float = 0.0) -> None:
        super().__init__()
        self._now = float(start)
        self._clock_resolution = 1e-9
        self._seq = itertools.count()
        self._events = 0
        # (when, seq, handle): ties by seq, so no two entries ever compare their handles
        self._scheduled: list[tuple[float, int, asyncio.TimerHandle]] = []

    def time(self) -> float:
        return self._now

    def call_at(self, when: float, callback: Callable[..., object],  # type: ignore[override]
                *args: Any, context: Any = None) -> asyncio.TimerHandle:
        """asyncio's call_at, with the FIFO tie-break (call_later comes here too)."""
        if when is None:
            raise TypeError("when cannot be None")
        if self._closed:                    # asyncio's _check_closed, inline
            raise RuntimeError("Event loop is closed")
        if self._debug:
            self._check_thread()
            self._check_callback(callback, "call_at")
        timer = _Timer(when, callback, args, self, context)
        heappush(self._scheduled, (when, next(self._seq), timer))
        return timer

    @property
    def events(self) -> int:
        """Callbacks run so far (as asyncio's turn takes them from the ready queue)."""
        return self._events

    def _run_once(self) -> None:
        """One turn of asyncio's BaseEventLoop._run_once (3.11 to 3.13) on the virtual clock:
        cancelled timers swept as it sweeps them, the clock moved to the earliest timer where
        it would wait, the timers due (within the clock's resolution) made ready after what
        is ready, and what was ready at that point run, in order."""
        scheduled = self._scheduled
        ready = self._ready
        count = len(scheduled)
        if (count > _MIN_SCHEDULED_TIMER_HANDLES and self._timer_cancelled_count / count
                > _MIN_CANCELLED_TIMER_HANDLES_FRACTION):
            kept = []
            for entry in scheduled:
                if entry[2]._cancelled:
                    entry[2]._scheduled = False        # type: ignore[attr-defined]
                else:
                    kept.append(entry)
            heapify(kept)
            self._scheduled = scheduled = kept
            self._timer_cancelled_count = 0
        else:
            while scheduled and scheduled[0][2]._cancelled:
                self._timer_cancelled_count -= 1
                heappop(scheduled)[2]._scheduled = False   # type: ignore[attr-defined]

        if not (ready or self._stopping):
            # where a real loop would wait: the clock jumps to the earliest timer
            if not scheduled:
                raise Stalled(f"nothing ready and no timer scheduled at t={self._now:.6f} s: "
                              "a task waits for something only the outside could bring")
            if scheduled[0][0] > self._now:
                self._now = scheduled[0][0]

        end = self._now + self._clock_resolution
        while scheduled and scheduled[0][0] < end:
            handle = heappop(scheduled)[2]
            handle._scheduled = False                    # type: ignore[attr-defined]
            ready.append(handle)

        # run what is ready now, not what these callbacks make ready (the next turn's)
        ntodo = len(ready)
        self._events += ntodo
        popleft = ready.popleft
        for _ in range(ntodo):
            handle = popleft()
            if not handle._cancelled:
                handle._run()
        handle = None       # type: ignore[assignment]  # no cycle through a raised exception

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
