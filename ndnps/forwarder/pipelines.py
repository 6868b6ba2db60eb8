"""The forwarding pipelines, sans-I/O: `on_receive(face, bytes)` returns what to send where.

Stage names follow NFD's developer guide (onIncomingInterest, onContentStoreMiss, ...). The
persistent-PIT rules sit beside onIncomingData: `*insert*` / `*remove*` Interests update the
persistent entry of their stripped name and are routed by it; `*distribute*` Data go to every
face of the longest persistent entry, once per face, as well as to ordinary PIT downstreams.

Strategies see the forwarder only through its `Actions` (strategy.py, which describes the
triggers and how they map to NFD's): onIncomingData hands a Data that satisfies exactly one PIT
entry to that entry's strategy (after_receive_data, which may hold the entry for more Data),
and one that satisfies several to the union of their downstreams, each strategy told first
(before_satisfy_interest). on_incoming_distribute keeps the persistent-PIT fan-out to itself:
the ordinary entries a pushed Data also satisfies take the several-entries path.

A CongestionMark (NDNLPv2) travels with its packet, as NFD's tag on the packet object: a Data,
pulled or pushed, goes to each downstream with the mark it arrived with, and a forwarded
Interest upstream with its own. A Nack a strategy passes on carries the mark of the Nack that
ended the wait (NFD rebuilds it from the in-record, tagless; NDNLPv2 allows the mark on a Nack
and a consumer's window wants it). The Content Store keeps a Data's bytes only, so a cached
answer leaves unmarked, and Nacks the forwarder makes (no route, duplicate) carry none. Marking
a packet that leaves a congested face is the face's job, after the pipelines.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Final

from ndnps.ndn.markers import (AGGREGATE_COMPONENT, DISTRIBUTE_COMPONENT, INSERT_COMPONENT,
                               MARKER_BYTE, REMOVE_COMPONENT)
from ndnps.ndn.packet import (
    NACK_DUPLICATE, Data, Interest, LpFragmented, LpIdle, Nack, data_for, decode, decode_data,
    decode_interest, nack_for, with_nonce, without_forwarding_hint,
)
from ndnps.ndn.tlv import (DATA, GENERIC_COMPONENT, INTEREST, DecodeError, component_offsets,
                           encode_tlv)

from .face_table import INTERNAL_FACE, FaceInfo, FaceTable
from .internal_face import MAX_INTERNAL_BURST, InternalApp, Packet
from .strategy import Actions, BestRoute, Strategy
from .tables.cs import ContentStore
from .tables.dead_nonce_list import DeadNonceList
from .tables.fib import Fib, FibEntry
from .tables.persistent_pit import PersistentPit
from .tables.pit import InRecord, OutRecord, Pit, PitEntry, PitFull
from .tables.rib import CHILD_INHERIT, Rib, Route
from .tables.strategy_choice import StrategyChoice
from .tracer import RateTracer

if TYPE_CHECKING:
    from ndnps.ndn.aggregation import AggregatorConfig
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


class Forwarder(Actions):
    """The pipelines and the tables; the strategies' `Actions`."""

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

    # ---- faces ---------------------------------------------------------------------------

    def add_face(self, local: bool, remote_uri: str = "", local_uri: str = "",
                 persistency: int = 0) -> FaceInfo:
        return self.faces.add(local, remote_uri, local_uri, persistency)

    def add_internal_face(self, app: InternalApp, face_id: int = 0,
                          uri: str = "internal://") -> FaceInfo:
        """Put `app` at the end of an internal face: `face_id`'s (management's INTERNAL_FACE,
        which the face table makes), else a new one. Internal faces are never removed."""
        face = self._face_by_id.get(face_id) if face_id else None
        if face is None:
            face = self.faces.add(True, uri, "internal://", 2)
        face.app = app
        if face not in self._internal:
            self._internal.append(face)
        return face

    def remove_face(self, face_id: int) -> None:
        """A closed face leaves the RIB/FIB, every PIT record and every persistent entry."""
        face = self._face_by_id.get(face_id)
        if face is None or face.app is not None:
            return
        info = self.faces.remove(face_id)
        if info is None:
            return
        self.rib.remove_face(face_id)
        # PIT records come only from Interests in or out of the face (on_content_store_miss,
        # send_interest), both counted: one that carried none skips the whole-PIT scan. It is
        # what a UDP face closed on its garbage first datagram costs (faces/udp.py).
        if info.counters.in_interests or info.counters.out_interests:
            self.pit.remove_face(face_id)
        self.ppit.remove_face(face_id)

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

    # ---- in-network aggregation ----------------------------------------------------------

    def configure_aggregator(self, config: AggregatorConfig) -> None:
        """Aggregate for a training (management's aggregators/add). The aggregator is an
        internal producer on a face of its own (made with the first training), reached
        through the FIB: it is given the route `/*aggregate*/<ps>/<train>` — the name its
        Interests are routed by, `*aggregate*` being the marker routing keeps — and this
        node's name becomes a producer region, so that an Interest whose ForwardingHint names
        this node loses the hint here and follows that route (NFD's way to a producer reached
        by a hint). Interests hinted at another node go on by their hint."""
        agg = self.aggregation
        if agg is None:
            from .aggregator import Aggregation
            agg = self.aggregation = Aggregation()
            self._aggregator_face = self.add_internal_face(agg, uri="internal://aggregator")
        face = self._aggregator_face
        assert face is not None
        agg.configure(config, self.clock())
        prefix = AGGREGATE_COMPONENT + config.training
        self.rib.add(prefix, len(component_offsets(prefix)),
                     Route(face.id, 0, 0, CHILD_INHERIT, None))
        self._set_aggregator_regions()

    def remove_aggregator(self, training: bytes) -> bool:
        """Stop aggregating for a training (aggregators/remove): its sums, slots and route
        go, and this node's name as a producer region once no training is left at it."""
        agg = self.aggregation
        face = self._aggregator_face
        if agg is None or face is None or not agg.remove(training, self.clock()):
            return False
        self.rib.remove(AGGREGATE_COMPONENT + training, face.id, 0)
        self._set_aggregator_regions()
        return True

    def _set_aggregator_regions(self) -> None:
        """The producer regions: the configured ones, and the aggregator's node names."""
        agg = self.aggregation
        base = [r for r in self.network_region if r not in self._aggregator_regions]
        added: list[bytes] = []
        for node in (agg.nodes() if agg is not None else []):
            if node not in base and node not in added:
                added.append(node)
        self._aggregator_regions = added
        self.network_region = base + added

    # ---- entry point ---------------------------------------------------------------------

    def on_receive(self, face_id: int, wire: bytes) -> list[Action]:
        """One packet arrived on a face: decode what forwarding needs and run the pipelines."""
        out: list[Action] = []
        self._out = out
        face = self._face_by_id.get(face_id)
        if face is not None:
            self._receive(face, wire)
        if self._internal_in:
            self._drain_internal()
        return out

    def on_receive_batch(self, face_id: int, wires: list[bytes]) -> dict[int, list[object]]:
        """Packets that arrived together on a face (one read of a stream), in order: the
        same as on_receive for each, their actions grouped by out-face, each face's in order
        (so the I/O layer hands each face its packets in one call)."""
        out: list[Action] = []
        self._out = out
        for wire in wires:
            face = self._face_by_id.get(face_id)
            if face is None:
                break
            self._receive(face, wire)
        if self._internal_in:
            self._drain_internal()
        by_face: dict[int, list[object]] = {}
        for out_face, item in out:
            items = by_face.get(out_face)
            if items is None:
                by_face[out_face] = [item]
            else:
                items.append(item)
        return by_face

    def _receive(self, face: FaceInfo, wire: bytes) -> None:
        face.counters.in_bytes += len(wire)
        try:
            # bare Interest and Data first, without decode()'s dispatch; LpPackets through it
            first = wire[0] if wire else -1
            if first == INTEREST:
                self.on_incoming_interest(face, decode_interest(wire, 0, len(wire)))
            elif first == DATA:
                self.on_incoming_data(face, decode_data(wire, 0, len(wire)))
            else:
                pkt = decode(wire)
                if isinstance(pkt, Interest):
                    self.on_incoming_interest(face, pkt)
                elif isinstance(pkt, Data):
                    self.on_incoming_data(face, pkt)
                else:
                    self.on_incoming_nack(face, pkt)
        except DecodeError:
            face.drop("malformed")
        except LpIdle:
            face.drop("lp_idle")
        except LpFragmented:
            face.drop("lp_fragment")

    def _from_app(self, face: FaceInfo, packets: list[Packet]) -> None:
        """What an internal face's app sent back: received once the current packet is done."""
        for pkt in packets:
            self._internal_in.append((face, pkt))

    def _drain_internal(self) -> None:
        """Receive what the internal apps sent back, in order, and what that makes them send in
        turn; bounded, since each answer may bring more (the rest is dropped, counted)."""
        budget = MAX_INTERNAL_BURST
        while self._internal_in:
            todo, self._internal_in = self._internal_in, []
            for face, pkt in todo:
                if budget == 0:
                    face.drop("internal_overflow")
                    continue
                budget -= 1
                try:
                    if isinstance(pkt, Interest):
                        face.counters.in_bytes += len(pkt.wire)
                        self.on_incoming_interest(face, pkt)
                    elif isinstance(pkt, Data):
                        face.counters.in_bytes += len(pkt.wire)
                        self.on_incoming_data(face, pkt)
                    else:
                        face.counters.in_bytes += len(pkt.interest.wire)
                        self.on_incoming_nack(face, pkt)
                except DecodeError:
                    face.drop("malformed")

    # ---- Interest pipelines --------------------------------------------------------------

    def on_incoming_interest(self, face: FaceInfo, interest: Interest) -> None:
        name = interest.name
        offsets = component_offsets(name)       # a malformed name raises before any counting
        face.counters.in_interests += 1
        self.counters.in_interests += 1
        if self.tracer is not None:
            self.tracer.interest(face.id, True, name, len(interest.wire))
        if interest.hop_limit == 0:
            face.drop("hop_limit")
            return
        if not face.local and name.startswith(LOCALHOST):
            face.drop("localhost_scope")
            return
        if interest.forwarding_hint and self.in_producer_region(interest.forwarding_hint):
            interest = without_forwarding_hint(interest)
        nonce = interest.nonce
        if nonce is None:
            interest = with_nonce(interest)
            nonce = interest.nonce or b""
        now = self.clock()
        if name[2:3] == MARKER_BYTE:
            route_name, route_offsets = _routing_name(name, offsets)
        else:
            route_name, route_offsets = name, offsets

        if self.dnl.has(name, nonce, now):
            self.on_interest_loop(face, interest)
            return
        entry = self.pit.find(interest)
        pending = entry is not None and entry.expires > now
        if pending and entry is not None and _duplicate_nonce(entry, nonce, face.id):
            self.on_interest_loop(face, interest)
            return
        if route_name is not name and not name.startswith(DISTRIBUTE_COMPONENT):
            # *insert* / *remove*: membership changes only for Interests that are not loops
            if not self.on_persistent_interest(face, name, route_name, route_offsets, now):
                return
        if entry is None or not pending:
            if entry is not None:               # expired but not yet swept
                self._finalize(entry, satisfied=False)
            hit = self.cs.lookup(interest, now) if face.id != INTERNAL_FACE else None
            if hit is not None:
                self.on_content_store_hit(face, interest, hit)
                return
            try:
                entry, _ = self.pit.insert(interest)
            except PitFull:
                face.drop("pit_full")
                return
        self.on_content_store_miss(face, entry, interest, route_name, route_offsets, now)

    def on_persistent_interest(self, face: FaceInfo, name: bytes, prefix: bytes,
                               offsets: list[int], now: float) -> bool:
        """`*insert*` joins `face` to the persistent entry of the stripped name; `*remove*`
        takes it out. Both then travel upstream like ordinary Interests. False: not forwarded."""
        if name.startswith(REMOVE_COMPONENT):
            self.ppit.remove(prefix, face.id)
            # Like a multicast prune: upstream hears of it only when no downstream is left,
            # since upstream keeps one entry per link, not per worker.
            return not self.ppit.downstreams(prefix, offsets, now, exact=True)
        if not prefix:
            face.drop("ppit_empty_prefix")
            return False
        result = self.ppit.insert(prefix, len(offsets), face.id, now)
        if not result.accepted:
            face.drop(result.value)
            return False
        return True

    def on_interest_loop(self, face: FaceInfo, interest: Interest) -> None:
        face.drop("loop")
        self._send_nack(face.id, interest, NACK_DUPLICATE, interest.pit_token)

    def on_content_store_hit(self, face: FaceInfo, interest: Interest, data: Data) -> None:
        self.counters.cs_hits += 1
        self._send_data(face.id, data, interest.pit_token)

    def on_content_store_miss(self, face: FaceInfo, entry: PitEntry, interest: Interest,
                              route_name: bytes, route_offsets: list[int], now: float) -> None:
        face_id = face.id
        expires = now + interest.lifetime / 1000.0
        entry.in_records[face_id] = InRecord(face_id, interest, expires)
        if expires > entry.expires:
            self.pit.set_expiry(entry, expires)
        if interest.forwarding_hint:
            fib_entry = self.lookup_fib_by_hint(interest.forwarding_hint)
        else:
            fib_entry = self.fib.lookup(route_name, route_offsets)
        strategy = self.strategy_choice.find(route_name, route_offsets)
        strategy.after_receive_interest(self, entry, interest, face_id, fib_entry, now)

    def in_producer_region(self, hint: tuple[bytes, ...]) -> bool:
        """NFD's NetworkRegionTable::isInProducerRegion: some delegation of the hint is a
        prefix of a region name of this forwarder (a byte prefix of whole components is a
        name prefix: both parse alike from the start)."""
        return any(region.startswith(delegation)
                   for region in self.network_region for delegation in hint)

    def lookup_fib_by_hint(self, hint: tuple[bytes, ...]) -> FibEntry | None:
        """NFD's lookupFib for an Interest with a ForwardingHint (outside the producer
        region): the FIB entry of the first delegation that has next hops, else none."""
        for delegation in hint:
            entry = self.fib.lookup(delegation, component_offsets(delegation))
            if entry is not None and entry.nexthops:
                return entry
        return None

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

    def set_expiry(self, entry: PitEntry, duration: float, now: float) -> None:
        """NFD's setExpiryTimer: the entry expires `duration` s after `now` (tick() sweeps it)."""
        if not entry.erased:
            self.pit.set_expiry(entry, now + max(duration, 0.0))

    def count_suppressed(self, face_id: int) -> None:
        face = self._face_by_id.get(face_id)
        if face is not None:
            face.drop("retx_suppressed")

    # ---- Data pipelines ------------------------------------------------------------------

    def on_incoming_data(self, face: FaceInfo, data: Data) -> None:
        name = data.name
        offsets = component_offsets(name)       # a malformed name raises before any counting
        face.counters.in_data += 1
        self.counters.in_data += 1
        if self.tracer is not None:
            self.tracer.data(face.id, True, name, len(data.wire))
        if not face.local and name.startswith(LOCALHOST):
            face.drop("localhost_scope")
            return
        now = self.clock()
        if name[2:3] == MARKER_BYTE and name.startswith(DISTRIBUTE_COMPONENT):
            self.on_incoming_distribute(face, data, offsets, now)
            return
        matches = self.pit.data_matches(name, offsets, now, data.wire)
        if not matches:
            self.on_data_unsolicited(face, data)
            return
        in_face = face.id
        app = face.app
        if app is None or app.caches:
            self.cs.insert(data, now)
        if len(matches) == 1:
            # NFD: the entry's expiry timer set to now, then its strategy's afterReceiveData;
            # unless the strategy extended it, the entry is satisfied and goes at once
            entry = matches[0]
            entry.expires = now
            choice = self.strategy_choice
            strategy = choice.root if choice.single else self.effective_strategy(entry)
            strategy.after_receive_data(self, entry, data, in_face, now)
            if entry.expires <= now:
                self._finalize(entry, satisfied=True, data=data)
            elif not entry.erased:
                self._hold(entry, data, in_face, now)
            return
        for face_id, token in self._satisfy(matches, in_face, data, now).items():
            self._send_data(face_id, data, token)

    def on_incoming_distribute(self, face: FaceInfo, data: Data, offsets: list[int],
                               now: float) -> None:
        """A pushed Data: every face of the longest persistent entry of the stripped name,
        plus ordinary PIT downstreams of its exact name (probes) and of its `*insert*` twin
        (the registration confirmation). Each face gets one copy.

        A copy this forwarder already holds in its CS has been pushed through here before:
        it is an answer to a probe (or a repeated confirmation), so it goes only to the PIT
        downstreams. A copy it lacks was lost upstream of here — by every face below — so it
        is pushed again along the persistent entry: a probe repairs the tree only below the
        loss. A Data of a held name but other bytes is another object (a restarted PS that
        made a version again differently): pushed, and cached in place of the old one."""
        self.counters.pushes_in += 1
        face.counters.in_distribute += 1
        rest, rest_offsets = _strip_first(data.name, offsets)
        agg, agg_face = self.aggregation, self._aggregator_face
        if agg is not None and agg_face is not None:
            # a push frees the training's slots of older versions (the push acknowledges)
            self._from_app(agg_face, agg.on_push(rest, now))
        if self.cs.holds(data.name, data.wire):
            pushed = []
        else:
            pushed = [f for f in self.ppit.downstreams(rest, rest_offsets, now) if f != face.id]
        matches = self.pit.data_matches(data.name, offsets, now, data.wire)
        insert_name = INSERT_COMPONENT + rest
        matches += self.pit.data_matches(insert_name, component_offsets(insert_name), now)
        if not pushed and not matches:
            self.on_data_unsolicited(face, data)
            return
        self.cs.insert(data, now)
        downstream = self._satisfy(matches, face.id, data, now)
        for face_id in pushed:
            downstream.setdefault(face_id, None)
        pushed_to = set(pushed)
        for face_id, token in downstream.items():
            if face_id in pushed_to:
                self.counters.pushes_out += 1
                self._face_by_id[face_id].counters.out_distribute += 1
            self._send_data(face_id, data, token, pulled=face_id not in pushed_to)

    def _satisfy(self, matches: list[PitEntry], in_face: int, data: Data,
                 now: float) -> dict[int, bytes | None]:
        """Erase the satisfied entries, each strategy told first (NFD's beforeSatisfyInterest
        when a Data matches several entries); return each downstream face once, with its PIT
        token."""
        downstream: dict[int, bytes | None] = {}
        for entry in matches:
            for face_id, rec in entry.in_records.items():
                if face_id != in_face and face_id not in downstream and rec.expires > now:
                    downstream[face_id] = rec.pit_token
            self.effective_strategy(entry).before_satisfy_interest(self, entry, data, in_face, now)
            self._finalize(entry, satisfied=True, data=data)
        return downstream

    def _hold(self, entry: PitEntry, data: Data, in_face: int, now: float) -> None:
        """The strategy keeps a satisfied entry (it extended its expiry): as NFD, the entry is
        marked satisfied and the in-face's out-record goes, its nonce to the dead-nonce list
        when MustBeFresh Data goes stale before the list forgets."""
        entry.satisfied = True
        rec = entry.out_records.pop(in_face, None)
        if rec is not None and entry.must_be_fresh and \
                data.freshness < self.limits.dead_nonce_lifetime * 1000:
            self.dnl.add(entry.name, rec.nonce, now)

    def effective_strategy(self, entry: PitEntry) -> Strategy:
        """NFD's findEffectiveStrategy(pitEntry): the strategy chosen for the entry's name, a
        marker stripped as when its Interest was routed."""
        choice = self.strategy_choice
        if choice.single:
            return choice.root
        name = entry.name
        route_name, route_offsets = _routing_name(name, component_offsets(name))
        return choice.find(route_name, route_offsets)

    def on_data_unsolicited(self, face: FaceInfo, data: Data) -> None:
        # NFD's default unsolicited-data policy: drop (and we count it); an internal producer's
        # is admitted to the Content Store (admit-local): a sum made after its requester's PIT
        # entry expired answers the retransmission
        app = face.app
        if app is not None and app.caches:
            self.cs.insert(data, self.clock())
        self.counters.unsolicited += 1
        face.drop("unsolicited_data")

    # ---- Nack pipeline -------------------------------------------------------------------

    def on_incoming_nack(self, face: FaceInfo, nack: Nack) -> None:
        face.counters.in_nacks += 1
        self.counters.in_nacks += 1
        if self.tracer is not None:
            self.tracer.nack(face.id, True, len(nack.interest.wire))
        entry = self.pit.find(nack.interest)
        now = self.clock()
        if entry is None or entry.expires <= now:
            face.drop("nack_no_pit")
            return
        rec = entry.out_records.get(face.id)
        if rec is None or rec.nonce != nack.interest.nonce:
            face.drop("nack_stale")
            return
        rec.nack_reason = nack.reason
        name, offsets = _routing_name(nack.interest.name, component_offsets(nack.interest.name))
        strategy = self.strategy_choice.find(name, offsets)
        strategy.after_receive_nack(self, entry, nack, face.id, now)

    # ---- outgoing ------------------------------------------------------------------------

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

    # ---- timers --------------------------------------------------------------------------

    def tick(self) -> list[Action]:
        """Expire soft state, after the internal apps' timers (the aggregator's slots past
        their deadline, whose Interests it Nacks); the I/O layer calls this a few times a
        second and sends what it returns."""
        out: list[Action] = []
        self._out = out
        now = self.clock()
        for face in self._internal:
            app = face.app
            if app is not None:
                self._from_app(face, app.on_timer(now))
        if self._internal_in:
            self._drain_internal()
        for entry in self.pit.expire(now):
            if entry.satisfied:                 # held by its strategy after a Data
                if entry.must_be_fresh:
                    self._remember_nonces(entry, now)
                self.counters.satisfied += 1
            else:
                self._remember_nonces(entry, now)
                self.counters.unsatisfied += 1
        self.dnl.expire(now)
        self.ppit.expire(now)
        self.rib.expire(now)
        return out


def _strip_first(name: bytes, offsets: list[int]) -> tuple[bytes, list[int]]:
    """The name without its first component (a marker), and its component offsets."""
    cut = offsets[0]
    return name[cut:], [o - cut for o in offsets[1:]]


def _routing_name(name: bytes, offsets: list[int]) -> tuple[bytes, list[int]]:
    """Markers (`*insert*`, `*remove*`, `*distribute*`) are routed by the stripped name, so
    only `/<ps>` and `/<gpu>` need routes. Returns `name` itself when it has no marker."""
    if name.startswith(INSERT_COMPONENT) or name.startswith(REMOVE_COMPONENT) or \
            name.startswith(DISTRIBUTE_COMPONENT):
        return _strip_first(name, offsets)
    return name, offsets


def _downstream(entry: PitEntry, interest: Interest) -> int:
    """The downstream whose Interest `interest` is (by its nonce), for an internal face's app;
    0 when none is left."""
    for face_id, rec in entry.in_records.items():
        if rec.interest.nonce == interest.nonce:
            return face_id
    return next(iter(entry.in_records), 0)


def _duplicate_nonce(entry: PitEntry, nonce: bytes, face_id: int) -> bool:
    """The same nonce from another downstream, or sent upstream already: a loop. The same
    nonce from the same (point-to-point) downstream is a retransmission, not a loop."""
    own = entry.in_records.get(face_id)
    if own is not None and own.nonce == nonce:
        return False
    for f, rec in entry.in_records.items():
        if rec.nonce == nonce and f != face_id:
            return True
    return any(rec.nonce == nonce for rec in entry.out_records.values())
