"""The forwarder's tables and its outgoing pipelines, sans-I/O: the bottom layer of the
Forwarder (pipelines.py). `Outgoing` holds the tables, the faces and the counters, and implements
what the pipelines above it and the strategies (their `Actions`, strategy.py) send through:
outgoing Interest, Data and Nack, each to a face's bytes or to an internal face's app, and
Interest finalize (NFD's names). Its methods are called once per packet, as they were when the
Forwarder was one class: the layers are a seam in the source, not in the packet's path.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Final

from ndnps.ndn.packet import Data, Interest, Nack, data_for, nack_for
from ndnps.ndn.tlv import GENERIC_COMPONENT, encode_tlv

from .face_table import FaceInfo, FaceTable
from .internal_face import Packet
from .strategy import Actions, BestRoute, Strategy
from .tables.cs import ContentStore
from .tables.dead_nonce_list import DeadNonceList
from .tables.fib import Fib
from .tables.persistent_pit import PersistentPit
from .tables.pit import OutRecord, Pit, PitEntry
from .tables.rib import Rib
from .tables.strategy_choice import StrategyChoice
from .tracer import RateTracer

if TYPE_CHECKING:
    from .aggregator import Aggregation

LOCALHOST: Final = encode_tlv(GENERIC_COMPONENT, b"localhost")

# What on_receive returns: (face id, bytes) to send. Internal faces' packets never leave the
# core: their apps are handed them (internal_face.py).
Action = tuple[int, bytes]


@dataclass
class Limits:
    pit_entries: int = 65536
    cs_packets: int = 65536
    cs_bytes: int = 256 << 20
    dead_nonce_lifetime: float = 6.0
    dead_nonce_capacity: int = 1 << 16
    ppit_lifetime: float = 60.0
    ppit_entries: int = 4096
    ppit_faces_per_entry: int = 1024
    ppit_entries_per_face: int = 64
    ppit_inserts_per_face_per_s: float = 50.0


@dataclass
class ForwarderCounters:
    in_interests: int = 0
    in_data: int = 0
    in_nacks: int = 0
    out_interests: int = 0
    out_data: int = 0
    out_nacks: int = 0
    satisfied: int = 0
    unsatisfied: int = 0
    cs_hits: int = 0
    unsolicited: int = 0
    pushes_in: int = 0          # *distribute* Data received
    pushes_out: int = 0         # copies sent along persistent entries (not probe answers)


class Outgoing(Actions):
    """The tables, faces and counters; the outgoing pipelines and Interest finalize (the
    strategies' `Actions`). Constructed as `Forwarder(limits, clock)`."""

    # ---- construction: the tables --------------------------------------------------------------

    def __init__(self, limits: Limits | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = lim = limits or Limits()
        self.clock = clock
        self.faces = FaceTable()
        self._face_by_id = self.faces.by_id     # the table's own dict: one lookup, no call
        self.fib = Fib()
        self.rib = Rib(self.fib)
        self.pit = Pit(lim.pit_entries)
        self.cs = ContentStore(lim.cs_packets, lim.cs_bytes)
        self.dnl = DeadNonceList(lim.dead_nonce_lifetime, lim.dead_nonce_capacity)
        self.ppit = PersistentPit(lim.ppit_lifetime, lim.ppit_entries, lim.ppit_faces_per_entry,
                                  lim.ppit_entries_per_face, lim.ppit_inserts_per_face_per_s)
        self.strategy_choice: StrategyChoice[Strategy] = StrategyChoice(BestRoute())
        self.counters = ForwarderCounters()
        self.tracer: RateTracer | None = None
        # NFD's network region table: names (TLV-VALUEs) of the producer regions this
        # forwarder is in; an Interest whose ForwardingHint names one of them loses the hint
        self.network_region: list[bytes] = []
        self._out: list[Action] = []
        # internal faces (internal_face.py), and what their apps sent back while a packet was
        # handled: received once it is done
        self._internal: list[FaceInfo] = []
        self._internal_in: list[tuple[FaceInfo, Packet]] = []
        # in-network aggregation (aggregator.py): an internal producer, made by the first
        # aggregators/add; the producer regions it added (its node names)
        self.aggregation: Aggregation | None = None
        self._aggregator_face: FaceInfo | None = None
        self._aggregator_regions: list[bytes] = []

    def _from_app(self, face: FaceInfo, packets: list[Packet]) -> None:
        """What an internal face's app sent back: received once the current packet is done."""
        for pkt in packets:
            self._internal_in.append((face, pkt))

    # ---- outgoing Interest (the strategies' actions) -------------------------------------------

    def can_send_interest(self, face_id: int, interest: Interest) -> bool:
        face = self._face_by_id.get(face_id)
        if face is None:
            return False
        if not face.local:
            if interest.name.startswith(LOCALHOST):
                return False            # /localhost never leaves the host
            if interest.hop_limit == 1:
                return False            # it would leave with HopLimit 0
        return True

    def send_interest(self, entry: PitEntry, face_id: int, interest: Interest, now: float) -> None:
        """onOutgoingInterest: record the out-record and send (HopLimit decremented)."""
        entry.out_records[face_id] = OutRecord(face_id, interest.nonce or b"", now,
                                               now + interest.lifetime / 1000.0)
        face = self._face_by_id[face_id]        # strategies send only to faces that exist
        face.counters.out_interests += 1
        self.counters.out_interests += 1
        app = face.app
        if app is not None:
            self._from_app(face, app.on_interest(interest, _downstream(entry, interest), now))
            return
        wire = interest.wire_for_forwarding()
        face.counters.out_bytes += len(wire)
        if self.tracer is not None:
            self.tracer.interest(face_id, False, interest.name, len(wire))
        self._out.append((face_id, wire))

    def count_suppressed(self, face_id: int) -> None:
        face = self._face_by_id.get(face_id)
        if face is not None:
            face.drop("retx_suppressed")

    def set_expiry(self, entry: PitEntry, duration: float, now: float) -> None:
        """NFD's setExpiryTimer: the entry expires `duration` s after `now` (tick() sweeps it)."""
        if not entry.erased:
            self.pit.set_expiry(entry, now + max(duration, 0.0))

    # ---- outgoing Data -------------------------------------------------------------------------

    def send_data(self, entry: PitEntry, data: Data, face_id: int) -> None:
        """NFD's Strategy::sendData: answer one downstream, and drop its in-record."""
        rec = entry.in_records.pop(face_id, None)
        self._send_data(face_id, data, rec.pit_token if rec is not None else None)

    def send_data_to_all(self, entry: PitEntry, data: Data, in_face: int, now: float) -> None:
        """NFD's Strategy::sendDataToAll: every unexpired downstream but the Data's in-face,
        in the order they came; their in-records go (the in-face's and expired ones stay)."""
        records = entry.in_records
        kept = False
        for face_id, rec in records.items():
            if face_id != in_face and rec.expires > now:
                self._send_data(face_id, data, rec.pit_token)
            else:
                kept = True
        if kept:
            entry.in_records = {f: r for f, r in records.items()
                                if f == in_face or r.expires <= now}
        else:
            records.clear()

    def _send_data(self, face_id: int, data: Data, token: bytes | None,
                   pulled: bool = True) -> None:
        """`pulled`: answers an Interest (PIT or CS), rather than following a persistent entry."""
        face = self._face_by_id.get(face_id)
        if face is None:
            return
        app = face.app
        if app is not None:
            face.counters.out_data += 1
            self._from_app(face, app.on_data(data, self.clock()))
            return
        wire = data_for(data, token)
        face.counters.out_data += 1
        face.counters.out_bytes += len(wire)
        self.counters.out_data += 1
        if self.tracer is not None:
            cls = self.tracer.classify(data.name, True)
            self.tracer.data(face_id, False, data.name, len(wire),
                             "probe" if pulled and cls == "distribute" else cls)
        self._out.append((face_id, wire))

    # ---- outgoing Nack -------------------------------------------------------------------------

    def reject_pending_interest(self, entry: PitEntry, reason: int,
                                only_face: int | None = None, congestion_mark: int = 0) -> None:
        """Nack the downstreams (or only `only_face`) and drop them from the entry; an entry
        left with none is finalized."""
        faces = [only_face] if only_face is not None else list(entry.in_records)
        for face_id in faces:
            self.send_nack(entry, face_id, reason, congestion_mark)
        if not entry.in_records:
            self._finalize(entry, satisfied=False)

    def send_nack(self, entry: PitEntry, face_id: int, reason: int,
                  congestion_mark: int = 0) -> None:
        """onOutgoingNack: Nack the downstream's own Interest, and drop its in-record."""
        rec = entry.in_records.pop(face_id, None)
        if rec is not None:
            self._send_nack(face_id, rec.interest, reason, rec.pit_token, congestion_mark)

    def _send_nack(self, face_id: int, interest: Interest, reason: int,
                   token: bytes | None, congestion_mark: int = 0) -> None:
        face = self._face_by_id.get(face_id)
        if face is None:
            return
        app = face.app
        if app is not None:
            face.counters.out_nacks += 1
            self._from_app(face, app.on_nack(Nack(interest, reason, congestion_mark),
                                             self.clock()))
            return
        wire = nack_for(interest, reason, token, congestion_mark)
        face.counters.out_nacks += 1
        face.counters.out_bytes += len(wire)
        if self.tracer is not None:
            self.tracer.nack(face_id, False, len(wire))
        self.counters.out_nacks += 1
        self._out.append((face_id, wire))

    # ---- Interest finalize ---------------------------------------------------------------------

    def _finalize(self, entry: PitEntry, satisfied: bool, data: Data | None = None) -> None:
        """onInterestFinalize: erase the entry; remember its nonces in the dead-nonce list when
        a looping copy could still arrive and not be answered by the CS (as NFD: unsatisfied,
        or MustBeFresh satisfied by Data that goes stale before the list forgets)."""
        if entry.erased:
            return
        if not satisfied and not entry.satisfied:
            self._remember_nonces(entry, self.clock())
            self.counters.unsatisfied += 1
        else:
            # an entry held after its Data (entry.satisfied) is finalized without it: its
            # freshness unknown, MustBeFresh is enough
            if entry.must_be_fresh and (data is None or
                                        data.freshness < self.limits.dead_nonce_lifetime * 1000):
                self._remember_nonces(entry, self.clock())
            self.counters.satisfied += 1
        self.pit.erase(entry)

    def _remember_nonces(self, entry: PitEntry, now: float) -> None:
        for rec in entry.out_records.values():
            self.dnl.add(entry.name, rec.nonce, now)


def _downstream(entry: PitEntry, interest: Interest) -> int:
    """The downstream whose Interest `interest` is (by its nonce), for an internal face's app;
    0 when none is left."""
    for face_id, rec in entry.in_records.items():
        if rec.interest.nonce == interest.nonce:
            return face_id
    return next(iter(entry.in_records), 0)
