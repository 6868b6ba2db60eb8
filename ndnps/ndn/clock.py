"""The run's one time base: every process of a run counts from the same instant, so the
forwarders' rate traces and the apps' metrics share one time axis.

The scenario runner passes its own `time.monotonic()` at the start of the run in NDNPS_RUN_T0
to every child: CLOCK_MONOTONIC is one clock for the whole machine, network namespaces
included.
"""
from __future__ import annotations

import math
import os
import time
from typing import Callable, Final

RUN_T0_ENV: Final = "NDNPS_RUN_T0"


def run_origin(clock: Callable[[], float] = time.monotonic) -> float:
    """The run's time origin on `clock` (monotonic): NDNPS_RUN_T0 when a runner set it, else
    now (a process run by hand counts from its own start)."""
    try:
        origin = float(os.environ[RUN_T0_ENV])
    except (KeyError, ValueError):
        return clock()
    return origin if math.isfinite(origin) else clock()
