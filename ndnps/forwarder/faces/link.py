"""Link emulation on a face: loss, delay with jitter, and a rate limit with a bounded queue on
what it sends (like a netem qdisc, in user space), and optionally loss on what it receives —
for links whose other end (an app) emulates nothing itself."""
from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Callable

from ..face_table import FaceInfo


@dataclass
class LinkParams:
    loss: float = 0.0          # probability a packet is dropped
    delay_ms: float = 0.0
    jitter_ms: float = 0.0     # uniform in [-jitter, +jitter], clipped at 0
    rate_mbps: float = 0.0     # 0 = unlimited
    queue_bytes: int = 1 << 20
    ingress_loss: float = 0.0  # probability a received packet is dropped

    @property
    def active(self) -> bool:
        return bool(self.loss or self.delay_ms or self.jitter_ms or self.rate_mbps
                    or self.ingress_loss)

    def validate(self) -> None:
        for key in ("loss", "ingress_loss"):
            if not 0.0 <= getattr(self, key) <= 1.0:
                raise ValueError(f"{key} must be within [0, 1]")
        for key in ("delay_ms", "jitter_ms", "rate_mbps"):
            if getattr(self, key) < 0:
                raise ValueError(f"{key} must be >= 0")
        if self.queue_bytes <= 0:
            raise ValueError("queue_bytes must be > 0")


class LinkEmulator:
    def __init__(self, params: LinkParams, deliver: Callable[[bytes], None], info: FaceInfo,
                 rng: random.Random | None = None) -> None:
        params.validate()
        self.params = params
        self._deliver = deliver
        self._info = info
        self._rng = rng or random.Random()
        self._loop = asyncio.get_running_loop()
        self._busy_until = 0.0
        self._queued = 0

    def admit(self) -> bool:
        """Whether a received packet survives the link (ingress loss)."""
        if self.params.ingress_loss and self._rng.random() < self.params.ingress_loss:
            self._info.drop("emulated_loss_in")
            return False
        return True

    def send(self, wire: bytes) -> None:
        p = self.params
        if p.loss and self._rng.random() < p.loss:
            self._info.drop("emulated_loss")
            return
        now = self._loop.time()
        depart = now
        if p.rate_mbps:
            if self._queued + len(wire) > p.queue_bytes:
                self._info.drop("emulated_queue_full")
                return
            start = max(now, self._busy_until)
            depart = start + len(wire) * 8 / (p.rate_mbps * 1e6)
            self._busy_until = depart
        delay = p.delay_ms / 1000.0
        if p.jitter_ms:
            delay = max(0.0, delay + self._rng.uniform(-p.jitter_ms, p.jitter_ms) / 1000.0)
        at = depart + delay
        if at <= now:
            self._deliver(wire)
            return
        self._queued += len(wire)
        self._loop.call_at(at, self._release, wire)

    def _release(self, wire: bytes) -> None:
        self._queued -= len(wire)
        self._deliver(wire)
