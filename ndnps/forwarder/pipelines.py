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

The Forwarder is one class in three layers, each a module, NFD's pipelines by direction:
outgoing.py (the tables; outgoing Interest, Data and Nack, the strategies' actions; Interest
finalize), incoming.py (incoming Interest, Content Store hit and miss, incoming Data, incoming
Nack, the persistent PIT's rules), and here the packets' way in and out of the core (on_receive,
the internal faces' packets), the faces, in-network aggregation's configuration and the timers.
A layer calls the ones below it only, and each pipeline is one method called once per packet as
before: the split adds no call to the packet's path.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ndnps.ndn.markers import AGGREGATE_COMPONENT
from ndnps.ndn.packet import (Data, Interest, LpFragmented, LpIdle, decode, decode_data,
                              decode_interest)
from ndnps.ndn.tlv import DATA, INTEREST, DecodeError, component_offsets

from .face_table import FaceInfo
from .incoming import Incoming
from .internal_face import MAX_INTERNAL_BURST, InternalApp
from .outgoing import Action
from .tables.rib import CHILD_INHERIT, Route

if TYPE_CHECKING:
    from ndnps.ndn.aggregation import AggregatorConfig


class Forwarder(Incoming):
    """The pipelines and the tables; the strategies' `Actions`: `Forwarder(limits, clock)`."""

    # ---- faces ---------------------------------------------------------------------------------

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

    # ---- in-network aggregation ----------------------------------------------------------------

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

    # ---- entry point ---------------------------------------------------------------------------

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

    # ---- timers --------------------------------------------------------------------------------

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
