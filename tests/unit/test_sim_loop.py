"""The virtual-time event loop: the clock jumps to the next timer, asyncio's order is kept,
real I/O and stalls raise instead of hanging."""
from __future__ import annotations

import asyncio
import socket

import pytest

from ndnps.sim.loop import Stalled, VirtualLoop, run

pytestmark = pytest.mark.timeout(30)


def test_sleeps_take_virtual_time_only():
    async def main():
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await asyncio.sleep(3600)
        await asyncio.sleep(0.25)
        return loop.time() - t0

    elapsed, loop = run(main())
    assert elapsed == 3600.25
    assert loop.is_closed()


def test_timers_run_in_time_order_and_ties_in_insertion_order():
    seen = []

    async def main():
        loop = asyncio.get_running_loop()
        for when, tag in ((0.3, "c"), (0.1, "a"), (0.2, "b1"), (0.2, "b2")):
            loop.call_at(when, lambda tag=tag: seen.append((tag, loop.time())))
        await asyncio.sleep(1)

    run(main())
    assert seen == [("a", 0.1), ("b1", 0.2), ("b2", 0.2), ("c", 0.3)]


def test_tasks_interleave_at_the_same_instant_as_on_a_real_loop():
    order = []

    async def worker(name, delay):
        for i in range(3):
            await asyncio.sleep(delay)
            order.append((name, i, asyncio.get_running_loop().time()))

    async def main():
        await asyncio.gather(worker("x", 1.0), worker("y", 1.5))

    run(main())
    # at 3.0 both are due: y's timer was set first (at 1.5, x's at 2.0), so y runs first
    assert [(n, t) for n, _, t in order] == [("x", 1.0), ("y", 1.5), ("x", 2.0), ("y", 3.0),
                                             ("x", 3.0), ("y", 4.5)]


def test_timeouts_fire_in_virtual_time():
    async def main():
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.sleep(10), 2)
        return asyncio.get_running_loop().time()

    assert run(main())[0] == 2


def test_events_count_the_callbacks_run():
    async def main():
        loop = asyncio.get_running_loop()
        before = loop.events
        for i in range(100):
            loop.call_later(i * 0.01, lambda: None)
        await asyncio.sleep(2)
        return loop.events - before

    n, _ = run(main())
    assert 100 <= n <= 105          # the timers, and the sleep's wake-up and task step


def test_cancelled_timers_never_run_and_are_swept_from_the_heap():
    seen = []

    async def main():
        loop = asyncio.get_running_loop()
        handles = [loop.call_at(1 + i * 0.001, seen.append, i) for i in range(300)]
        for h in handles[:250]:         # most cancelled: asyncio's rule sweeps the heap
            h.cancel()
        await asyncio.sleep(0.5)        # a turn, which sweeps them
        assert len(loop._scheduled) < 100   # type: ignore[attr-defined]
        await asyncio.sleep(1)
        return loop.time()

    t, loop = run(main())
    assert seen == list(range(250, 300)) and t == 1.5


def test_a_timer_set_for_now_runs_after_what_is_ready():
    seen = []

    async def main():
        loop = asyncio.get_running_loop()
        await asyncio.sleep(1)
        loop.call_soon(seen.append, "a")
        loop.call_at(loop.time(), seen.append, "timer")
        loop.call_soon(seen.append, "b")
        await asyncio.sleep(0)
        await asyncio.sleep(0)

    run(main())
    assert seen == ["a", "b", "timer"]


def test_a_task_waiting_for_nothing_is_an_error_not_a_hang():
    async def main():
        await asyncio.get_running_loop().create_future()

    with pytest.raises(Stalled):
        run(main())


def test_real_sockets_and_threads_are_refused():
    async def sock():
        a, b = socket.socketpair()
        try:
            await asyncio.get_running_loop().sock_recv(a, 10)
        finally:
            a.close()
            b.close()

    async def resolve():
        await asyncio.get_running_loop().getaddrinfo("localhost", 80)

    async def connect():
        await asyncio.open_connection("127.0.0.1", 9)

    for main in (sock, resolve, connect):
        with pytest.raises(RuntimeError, match="virtual-time"):
            run(main())


def test_a_loop_can_start_at_any_time():
    loop = VirtualLoop(start=100.0)
    try:
        assert loop.time() == 100.0
        loop.run_until_complete(asyncio.sleep(1))
        assert loop.time() == 101.0
    finally:
        loop.close()
