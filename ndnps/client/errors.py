"""How an expressed Interest ends when no valid Data answers it (python-ndn's names, our
classes: a caller catches these, never python-ndn's)."""
from __future__ import annotations


class NetworkError(Exception):
    """An Interest that got no valid Data."""


class InterestTimeout(NetworkError):
    """Its lifetime passed without an answer."""


class FaceDown(InterestTimeout):
    """An Interest expressed while the face to the forwarder was down: it never left.  A
    timeout to callers that only know those; a segment fetcher re-expresses it without
    backing off (an outage says nothing about the path it will take once the face is back)."""


class InterestCanceled(NetworkError):
    """The face closed while it was pending (its answer can no longer arrive)."""


class InterestNack(NetworkError):
    """The network refused it: `reason` is the NDNLPv2 NackReason (50 congestion, 100
    duplicate, 150 no route; 0 when the Nack gave none)."""

    def __init__(self, reason: int) -> None:
        super().__init__(f"Nack (reason {reason})")
        self.reason = reason


class ValidationFailure(NetworkError):
    """A Data came but its validator refused it (a forgery, another key, unsigned): `data`."""

    def __init__(self, data: object) -> None:
        super().__init__("Data failed validation")
        self.data = data
