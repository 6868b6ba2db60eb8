"""The forwarder's incoming pipelines, sans-I/O: incoming Interest (with Interest loop and the
Content Store's hit and miss, and the persistent PIT's `*insert*` / `*remove*`), incoming Data
(with the persistent PIT's `*distribute*` fan-out and unsolicited Data) and incoming Nack — the
middle layer of the Forwarder (pipelines.py), on its outgoing pipelines and tables (outgoing.py).
Each is called once per packet, as when the Forwarder was one class.
"""
from __future__ import annotations

from ndnps.ndn.markers import DISTRIBUTE_COMPONENT, INSERT_COMPONENT, MARKER_BYTE, REMOVE_COMPONENT
from ndnps.ndn.packet import (NACK_DUPLICATE, Data, Interest, Nack, with_nonce,
                              without_forwarding_hint)
from ndnps.ndn.tlv import component_offsets

from .face_table import INTERNAL_FACE, FaceInfo
from .outgoing import LOCALHOST, Outgoing
from .strategy import Strategy
from .tables.fib import FibEntry
from .tables.pit import InRecord, PitEntry, PitFull


class Incoming(Outgoing):
    """The incoming Interest, Data and Nack pipelines."""

    # ---- incoming Interest, Interest loop, Content Store hit and miss --------------------------

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

    # ---- incoming Data -------------------------------------------------------------------------

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

    # ---- incoming Nack -------------------------------------------------------------------------

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
