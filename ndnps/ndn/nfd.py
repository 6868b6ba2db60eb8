"""NFD's defaults that the forwarder and the apps keep to alike."""
from __future__ import annotations

from typing import Final

# RetxSuppressionExponential (best-route): a retransmission sooner than the interval after the
# last one forwarded for the same PIT entry is suppressed; each one forwarded multiplies it
RETX_INITIAL: Final = 0.010
RETX_MAX: Final = 0.250
RETX_MULTIPLIER: Final = 2.0
