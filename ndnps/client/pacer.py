"""Pacing for bursts of Data (pushes, answers to probes): a token bucket limits the rate, and
every `burst` packets the sender waits for its socket to drain and yields to the event loop, so
thousands of segments never sit in one queue at once (ours, or a forwarder's face queue)."""
from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

from ndnps.ndn.clock import monotonic


class Pacer:
    def __init__(self, rate_mbps: float = 0.0, burst: int = 16,
                 drain: Callable[[], Awaitable[None]] | None = None,
                 clock: Callable[[], float] = monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        if rate_mbps < 0 or burst < 1:
            raise ValueError("need rate_mbps >= 0 and burst >= 1")
        self.rate = rate_mbps * 1e6 / 8          # bytes per second; 0 = unlimited
        self.burst = burst
        self._drain = drain
        self._clock, self._sleep = clock, sleep
        self._capacity = burst * 8800.0
        self._tokens = self._capacity
        self._stamp = clock()
        self._since_yield = 0
        self.limited = False                     # the last send_all waited for tokens
        self.waited = 0.0                        # seconds spent waiting for tokens

    def set_rate(self, rate: float) -> None:
        """Pace at `rate` bytes per second from now on (0 = unlimited)."""
        if rate < 0:
            raise ValueError("need rate >= 0")
        self.rate = rate

    async def send(self, wire: bytes, send: Callable[[bytes], object]) -> None:
        if self.rate:
            now = self._clock()
            self._tokens = min(self._capacity, self._tokens + (now - self._stamp) * self.rate)
            self._stamp = now
            if self._tokens < len(wire):
                pause = (len(wire) - self._tokens) / self.rate
                self.waited += pause
                await self._sleep(pause)
                # the tokens of the time actually slept: a sleep that overshot (a loaded host
                # wakes the loop late) is made up by the bucket, up to its capacity, rather
                # than lost — lost, it slowed a push set at 76 Mbit/s to 45
                now = self._clock()
                self._tokens = min(self._capacity,
                                   max(len(wire), self._tokens + (now - self._stamp) * self.rate))
                self._stamp = now
            self._tokens -= len(wire)
        send(wire)
        self._since_yield += 1
        if self._since_yield >= self.burst:
            self._since_yield = 0
            if self._drain is not None:
                await self._drain()
            await self._sleep(0)

    async def send_all(self, wires, send: Callable[[bytes], object]) -> int:
        """Send every wire, paced; return once the last ones have left too (the socket drained
        after a partial last burst): a caller that records "pushed" next, and is then killed,
        must not leave the end of the push in its own write buffer.  `limited` says afterwards
        whether the rate, rather than the sender, set the pace (it waited for tokens)."""
        n = 0
        waited = self.waited
        for wire in wires:
            await self.send(wire, send)
            n += 1
        if self._since_yield and self._drain is not None:
            self._since_yield = 0
            await self._drain()
        self.limited = self.waited > waited
        return n
