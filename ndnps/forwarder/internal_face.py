"""Internal faces: an app in the forwarder's process on a face of its own (NFD's InternalFace,
both transports in one), sans-I/O.

Management and the in-network aggregator are such apps. The forwarder sends to an internal face
as to any other — the strategy chose it, the PIT answers or Nacks it — but hands the app the
packet objects instead of bytes (NFD's internal transport passes Blocks): no encoding on the
way in, no decoding on the way out. What an app's call returns, the forwarder receives from that
face once the packet it is handling is done, through the same pipelines as a packet from a
socket (`Forwarder.on_receive` drains it, bounded). An app that answers later (management's
commands are coroutines) hands its answer to `Forwarder.on_receive` with its face's id, as a
socket face's I/O does.
"""
from __future__ import annotations

from typing import Union

from ndnps.ndn._mypyc import mypyc_attr
from ndnps.ndn.packet import Data, Interest, Nack

# What an app sends back through its face: received by the forwarder as from any face.
Packet = Union[Interest, Data, Nack]
# Packets an app's calls may queue while one packet is handled (each answer may bring more):
# past it they are dropped and counted on the app's face (`internal_overflow`).
MAX_INTERNAL_BURST = 1 << 16


@mypyc_attr(allow_interpreted_subclasses=True)
class InternalApp:
    """What runs at the app's end of an internal face. Each call gets what the forwarder sent
    to the face and returns what the app sends back (an empty list: nothing, yet)."""

    # Data from the app are cached in the Content Store, even unsolicited (NFD's admit-local
    # unsolicited-data policy, for this face): a producer's answer outlives its PIT entry.
    # Management's are not: a dataset must be fresh at every ask.
    caches: bool = False

    def on_interest(self, interest: Interest, in_face: int, now: float) -> list[Packet]:
        """An Interest the strategy forwarded to this face; `in_face`: the downstream it came
        from (NFD's IncomingFaceId tag)."""
        return []

    def on_data(self, data: Data, now: float) -> list[Packet]:
        """A Data that satisfied one of the app's Interests."""
        return []

    def on_nack(self, nack: Nack, now: float) -> list[Packet]:
        """A Nack of one of the app's Interests (`nack.interest` is the app's own)."""
        return []

    def on_timer(self, now: float) -> list[Packet]:
        """The forwarder's tick (a few times a second): deadlines."""
        return []
