"""What the sans-I/O core knows of a face: its id, scope and counters. The asyncio transport
that carries the bytes lives in faces/; both sides update the same counters."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Final, Iterator

from ndnps.ndn.fragmentation import FragmentationCounters
from ndnps.ndn.reliability import ReliabilityCounters
from ndnps.ndn.tlv import MAX_PACKET_SIZE

from .internal_face import InternalApp

INVALID_FACE: Final = 0
INTERNAL_FACE: Final = 1          # management's, as NFD's internal face
FIRST_FACE_ID: Final = 256        # NFD numbers ordinary faces from 256 too


@dataclass
class FaceCounters:
    in_interests: int = 0
    in_data: int = 0
    in_nacks: int = 0
    out_interests: int = 0
    out_data: int = 0
    out_nacks: int = 0
    in_bytes: int = 0
    out_bytes: int = 0
    in_distribute: int = 0      # pushed Data received (persistent PIT)
    out_distribute: int = 0     # pushed Data sent along persistent entries
    drops: Counter = field(default_factory=Counter)   # reason -> packets


@dataclass
class SendQueueCounters:
    """A face's send queue (faces/queue.py; UDP and stream faces); its drops are
    FaceCounters.drops["queue_full"]."""
    marked: int = 0             # packets sent with CongestionMark set by this face
    pushes_unmarked: int = 0    # pushes to an app its rule would have marked (stream faces)
    max_bytes: int = 0          # the most octets it held
    max_delay: float = 0.0      # the longest any datagram waited in it, s

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class FaceSystemCounters:
    """Faces the I/O layer closed to keep the face table bounded (faces/udp.py). Kept here,
    forwarder-wide, because the faces and their own counters are gone."""
    udp_faces_evicted: int = 0     # on-demand UDP faces closed to make room under the cap
    # on-demand UDP faces closed at once, their first datagram dropped as malformed or oversize
    udp_faces_rejected: int = 0
    # datagrams the kernel refused with an error (ICMP unreachable from a peer that is down)
    udp_send_errors: int = 0


@dataclass
class FaceInfo:
    id: int
    local: bool                     # may use /localhost (unix, or TCP/UDP from loopback)
    remote_uri: str = ""
    local_uri: str = ""
    persistency: int = 0            # NFD: 0 persistent, 1 on-demand, 2 permanent
    # NDNLPv2 reliability (faces/update flag): its counters while on, None while off
    lp_reliability: ReliabilityCounters | None = None
    mtu: int = MAX_PACKET_SIZE      # the longest datagram or packet the face sends
    # UDP faces only: NDNLPv2 fragmentation and reassembly, and the send queue
    lp_fragmentation: FragmentationCounters | None = None
    send_queue: SendQueueCounters | None = None
    counters: FaceCounters = field(default_factory=FaceCounters)
    # an internal face's app (internal_face.py), handed the packets sent to the face
    app: InternalApp | None = None

    def drop(self, reason: str) -> None:
        self.counters.drops[reason] += 1


class FaceTable:
    def __init__(self) -> None:
        # face id -> FaceInfo; the pipelines read it directly (never rebound)
        self.by_id: dict[int, FaceInfo] = {
            INTERNAL_FACE: FaceInfo(INTERNAL_FACE, True, "internal://", "internal://", 2)}
        self._next_id = FIRST_FACE_ID
        self.counters = FaceSystemCounters()

    def __contains__(self, face_id: int) -> bool:
        return face_id in self.by_id

    def __iter__(self) -> Iterator[FaceInfo]:
        return iter(list(self.by_id.values()))

    def __len__(self) -> int:
        return len(self.by_id)

    def get(self, face_id: int) -> FaceInfo | None:
        return self.by_id.get(face_id)

    def add(self, local: bool, remote_uri: str = "", local_uri: str = "",
            persistency: int = 0) -> FaceInfo:
        info = FaceInfo(self._next_id, local, remote_uri, local_uri, persistency)
        self.by_id[info.id] = info
        self._next_id += 1
        return info

    def remove(self, face_id: int) -> FaceInfo | None:
        if face_id == INTERNAL_FACE:
            return None
        return self.by_id.pop(face_id, None)
