"""The run's one time base, and the process's clock.

**Time base.** Every process of a run counts from the same instant, so the forwarders' rate
traces and the apps' metrics share one time axis. The scenario runner passes its own
`time.monotonic()` at the start of the run in NDNPS_RUN_T0 to every child: CLOCK_MONOTONIC is
one clock for the whole machine, network namespaces included.

**Clock.** Every time a program reads (timers it keeps itself, metrics' `t` and `ts`, a
device's wall time) comes from `monotonic()` and `wall()`: the machine's clocks, unless a
simulator running the programs in virtual time substitutes its loop's clock (`use`). Then
`run_origin()` is the simulation's origin and `wall()` a fixed epoch plus the virtual time
since it, so `ts - t` stays constant as on a real run. `monotonic` reads a module global, so
`from ndnps.ndn.clock import monotonic` follows a substitution made later.
"""
from __future__ import annotations

import math
import os
import time
from contextlib import contextmanager
from typing import Callable, Final, Iterator

__all__ = ["RUN_T0_ENV", "SIM_EPOCH", "monotonic", "wall", "run_origin", "use"]

RUN_T0_ENV: Final = "NDNPS_RUN_T0"
SIM_EPOCH: Final = 1_704_067_200.0      # 2024-01-01T00:00:00Z: a simulated run's wall clock at 0

_source: Callable[[], float] = time.monotonic
_origin: float | None = None            # set while a source is substituted
_epoch = SIM_EPOCH


def monotonic() -> float:
    """Seconds on the process's monotonic clock (the machine's, or a substituted source)."""
    return _source()


def wall() -> float:
    """Seconds since the epoch: the machine's, or under a substituted source the fixed epoch
    plus the source's time since the origin."""
    if _origin is None:
        return time.time()
    return _epoch + (_source() - _origin)


def run_origin(clock: Callable[[], float] | None = None) -> float:
    """The run's time origin on `clock` (monotonic; default `monotonic`): the substituted
    origin while a source is substituted, else NDNPS_RUN_T0 when a runner set it, else now (a
    process run by hand counts from its own start)."""
    if _origin is not None:
        return _origin
    clock = clock or monotonic
    try:
        origin = float(os.environ[RUN_T0_ENV])
    except (KeyError, ValueError):
        return clock()
    return origin if math.isfinite(origin) else clock()


@contextmanager
def use(source: Callable[[], float], origin: float, epoch: float = SIM_EPOCH) -> Iterator[None]:
    """Within the block, the process's clock is `source` (e.g. a virtual loop's `time`) and
    the run's origin `origin` (NDNPS_RUN_T0 ignored); `wall()` is `epoch` at the origin. The
    previous clock is restored on exit (blocks nest)."""
    global _source, _origin, _epoch
    saved = _source, _origin, _epoch
    _source, _origin, _epoch = source, origin, epoch
    try:
        yield
    finally:
        _source, _origin, _epoch = saved
