"""What a transfer (ndnps.exchanges.transport.fetch) and its owner hand each other: the
flights — one Interest each — it asks the owner to send (`Send`) or forget (`Cancel`), the
segments it gives back, and how it fails (`FetchError`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union


class FetchError(Exception):
    """A segment could not be fetched within its tries.  `rejected`: every answer failed its
    signature check (the producer signs with another key)."""

    def __init__(self, why: str, rejected: bool = False) -> None:
        super().__init__(why)
        self.rejected = rejected


@dataclass
class Segment:
    number: int
    content: bytes | memoryview     # a view of the packet it came in, from the client
    final: int | None            # FinalBlockId, if the Data carried one


class Flight:
    """One Interest in flight.  `sample`: no earlier Interest for its segment is alive (none
    was sent, or each one's lifetime is over), so an answer can only be to this one and its
    round trip measures the path (Karn's rule, made exact by lifetimes: a try after a timeout
    is a sample too, and before it, a fetch whose every first try was lost never measured
    anything, and kept its initial timeouts).  `fresh`: it asks MustBeFresh.  `epoch`: its
    window's epoch when it left (a signal from before the window's last decrease is none)."""
    __slots__ = ("seg", "seq", "sent", "sample", "held", "life", "fresh", "order", "handle",
                 "epoch")

    def __init__(self, seg: int, seq: int, sent: float, sample: bool, held: bool,
                 life: float, fresh: bool = False) -> None:
        self.seg, self.seq, self.sent, self.sample, self.held, self.life = \
            seg, seq, sent, sample, held, life
        self.fresh = fresh
        # the order the producer answers in: Interests it holds go out in segment order once
        # it is ready (before anything sent later); the others in the order they were sent
        self.order = (0, seg, seq) if held else (1, seq, 0)
        self.handle: object = None              # the owner's (its pending Interest)
        self.epoch = 0


@dataclass(frozen=True)
class Send:
    """Express the flight's Interest (its segment's name, lifetime `flight.life`)."""
    flight: Flight


@dataclass(frozen=True)
class Cancel:
    """Forget the flight's Interest (superseded, or the transfer is over)."""
    flight: Flight


Action = Union[Send, Cancel]
