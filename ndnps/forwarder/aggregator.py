"""The aggregator of in-network aggregation (docs/aggregation.md): an internal producer, sans-I/O.

A forwarder configured as an aggregator for a training (management: `aggregators/add`, local
faces only) routes the training's `*aggregate*` Interests hinted at this node to the
aggregator's face (Forwarder.configure_aggregator: the route `/*aggregate*/<ps>/<train>`, this
node's name a producer region), and the strategy forwards them there as to any producer. The
aggregator answers an Interest `/*aggregate*/<ps>/<train>/<version>/<seg>/<params-digest>`
whose plan (ndnps.ndn.aggregation, in the Interest's ApplicationParameters) is a group `at` this
node, signed under the training's key (one whose plan is another node's, or unreadable, is
Nacked NoRoute: nothing here can serve it):

0. the Interest must be a signed Interest (NDN packet format v0.3) under the key this node was
   configured with, its name's ParametersSha256DigestComponent right (ndnps.ndn.aggregation.
   signed_plan); one that is not — unsigned, forged, another key, a wrong digest — is counted
   (unauthorised) and dropped, no slot claimed: not Nacked, since a Nack ends the PIT entry
   that a forgery copying a genuine name shares with the genuine Interest. A genuine one of a
   version older than the training's last push (a replay: that push freed its slots) is
   Nacked and counted (stale);

1. it takes the segment's slot in its pool (tables/aggregator_pool: hashed by segment; a slot
   held by another segment is unavailable: the Interest is Nacked (Congestion) at once, the
   requester falls back to the members' plain collects, and the collision is counted);
2. it expresses, from its own face, each member's Interest: a worker's collect
   `/<gpu>/<ps>/<train>/<version>/<seg>`, a sub-group's `*aggregate*` (hint: its node; signed
   as the PS signs its own);
3. each Data that comes back is checked (HMAC under the training's key, a summable segment of
   as many contributors as the member stands for: a worker's float32 values, a sub-group's
   exact partial sum — the sub-plans it asks for carry the Exact flag) and added to the slot's
   fixed-point sum (exact and order-free: ndnps.ndn.summable); a forgery or a bad segment is
   rejected and counted and the member stays missing;
4. once every worker of the plan is in, it answers the Interest with one Data, the sum —
   exact (int64) if the plan asks for it (its requester adds it to others), else float32
   rounded once from the exact total — signed under the training's key (its CongestionMark set
   if any contribution had one), and frees the slot; the Content Store keeps it for
   retransmissions. A sum too large for one packet (an exact sum of too long a segment) is
   Nacked instead (counted: oversize): its requester collects those workers itself.

A sub-group's Nack makes this node collect that group's workers itself (counted: fallbacks); a
worker's Nack, a refused value, or the slot's deadline (a member that never answers) drops the
partial sum and Nacks the Interest: the requester falls back. A re-expressed Interest (the
requester's retransmission) re-expresses the members still missing. The next version's
`*distribute*` push frees the training's older slots (the push is the acknowledgement).

One slot pool per forwarder, shared by its trainings (docs/sharing.md): a training's segments hash
within its range of it ([first, first + slots), its configuration), its slots' deadlines are its
own timeout. Trainings configured with the same range share those slots in time — two jobs'
rounds at once compete for them — and disjoint ranges split the pool between them. A new slot
claimed while another training holds a live one in the range is an *overlap*: counted, and the
latest are recorded (when, which two trainings, which versions); so is each training's and the
pool's busy time (seconds during which at least one slot was held).

The forwarder hands the aggregator what it sends to its face (`on_interest`, `on_data`,
`on_nack`: internal_face.InternalApp) and its tick (`on_timer`); the pipelines tell it of pushes
(`on_push`). Each returns the packets the aggregator sends through its face, which the
forwarder receives as from any face: member Interests, sums (Data: the PIT answers the
requesters, the Content Store keeps them) and Nacks of the Interests it was sent (the
strategy passes them on downstream).

Why one module: the triggers and the records they keep — a training's configuration, its plans
decoded once, each pending sum's members and the member Interests awaited — are one state
machine. Every trigger reads and changes several records at once, and the records have no other
user: apart, they would be an interface between two halves of the same rules. What stands apart
already has its own modules: the slot pool (tables/aggregator_pool.py), the plan's and the sum's
wire forms (ndnps.ndn.aggregation, ndnps.ndn.summable), the internal face (internal_face.py).
"""
from __future__ import annotations

import hashlib
import hmac
import os
from collections import deque
from dataclasses import asdict, dataclass, field, replace
import numpy as np

from ndnps.ndn import summable
from ndnps.ndn import aggregation
from ndnps.ndn.aggregation import (AggregatorConfig, Group, decode_plan, encode_plan,
                                   signed_data, signed_plan, verified_content)
from ndnps.ndn.markers import AGGREGATE_COMPONENT
from ndnps.ndn.packet import (NACK_CONGESTION, NACK_NO_ROUTE, Data, Interest, Nack,
                              decode_interest, new_nonce)
from ndnps.ndn.tlv import (GENERIC_COMPONENT, INTEREST, INTEREST_LIFETIME, MAX_PACKET_SIZE,
                           MUST_BE_FRESH, NAME, NONCE, PARAMS_DIGEST, DecodeError,
                           component_offsets, decode_nonneg, encode_tlv, name_to_str,
                           nonneg_element, read_tl, tl)

from .internal_face import InternalApp, Packet
from .tables.aggregator_pool import AggregatorPool, SlotKey

MAX_WAITING = 1 << 16        # member Interests awaited at once, over every training
OVERLAP_LOG = 64             # overlaps recorded: the latest
SUM_FRESHNESS_MS = 1000      # a sum's FreshnessPeriod: the Content Store answers retransmissions
PLAN_CACHE = 64              # plans decoded, per training (a job sends one or a few)


@dataclass
class AggregationCounters:
    interests: int = 0            # aggregate Interests for this node (re-expressions too)
    answered: int = 0             # sums sent: segments aggregated here
    collisions: int = 0           # slot held by another segment: Nacked, requester falls back
    rejected: int = 0             # contributions refused (signature, format, values)
    fallbacks: int = 0            # sub-groups Nacked: their workers collected here instead
    abandoned: int = 0            # sums dropped (a member's Nack, a refused value, deadline)
    member_interests: int = 0     # Interests expressed to members (retransmissions too)
    late: int = 0                 # member Data after their sum was done or dropped
    overlaps: int = 0             # new slots claimed while another training's were live in range
    oversize: int = 0             # sums too large for one packet: Nacked (abandoned too)
    unauthorised: int = 0         # aggregate Interests for this node not signed under the
                                  # training's key (or a wrong digest): dropped, no slot
    stale: int = 0                # genuine ones of a version before the last push: Nacked


@dataclass
class _Plan:
    """A plan as this node reads it, decoded once per training and plan bytes (every segment's
    Interest of a version carries the same plan; its signature covers the name, so it is
    checked per Interest, but the plan is not decoded again)."""
    group: Group
    workers: tuple[str, ...]
    # each worker member's collect name but its version and segment (the name's TLV-VALUE):
    # a member Interest is this, the segment's tail and a fixed suffix
    prefixes: dict[str, bytes]
    rows: int                     # the sum's batch of single workers' rows (FixedPointSum)


@dataclass
class _Pending:
    # the aggregate Interest last forwarded here: its name is the answer's, its nonce the one
    # the PIT's out-record toward this face holds (a Nack must carry it)
    interest: Interest
    plan: _Plan
    tail: bytes                   # version and segment components
    marked: bool = False
    expressed: dict[bytes, tuple[str, ...]] = field(default_factory=dict)  # name -> workers
    faces: set[int] = field(default_factory=set)        # the faces that asked for it
    # a sub-group's Interest name -> (its node, its signed elements: the Exact flag set)
    subplans: dict[bytes, tuple[str, bytes]] = field(default_factory=dict)


@dataclass
class _Training:
    config: AggregatorConfig
    pending: dict[SlotKey, _Pending] = field(default_factory=dict)
    pushed: int = -1              # the newest version whose push freed older slots
    overlaps: int = 0             # its new slots claimed while another's were live in its range
    mac: hmac.HMAC = field(init=False)   # keyed once, copied per packet
    hint: bytes = b""             # this node as a ForwardingHint name's value
    uri: str = ""                 # its name, for the status and the overlap records
    plans: dict[bytes, _Plan] = field(default_factory=dict)    # by the plan's bytes
    # what follows a member Interest's name: MustBeFresh, the Nonce's TL (then 4 octets), and
    # after them the InterestLifetime (the slots' timeout), in ms here
    lifetime: bytes = b""
    lifetime_ms: int = 0

    def __post_init__(self) -> None:
        self.mac = hmac.new(self.config.key, digestmod=hashlib.sha256)
        self.hint = encode_tlv(GENERIC_COMPONENT, self.config.node.encode())
        self.uri = name_to_str(self.config.training)
        self.lifetime_ms = max(1, int(self.config.timeout * 1000))
        self.lifetime = nonneg_element(INTEREST_LIFETIME, self.lifetime_ms)

    def plan(self, wire: bytes | memoryview) -> _Plan:
        """The plan of these bytes (DecodeError when malformed), decoded once."""
        key = bytes(wire)
        got = self.plans.get(key)
        if got is None:
            group = decode_plan(key)
            prefixes = {m: encode_tlv(GENERIC_COMPONENT, m.encode()) + self.config.training
                        for m in group.members if isinstance(m, str)}
            rows = min(len(prefixes), summable.BATCH_ROWS)
            if len(self.plans) >= PLAN_CACHE:
                self.plans.clear()
            got = self.plans[key] = _Plan(group, group.workers(), prefixes,
                                          rows if rows > 1 else 0)
        return got


class Aggregation(InternalApp):
    def __init__(self) -> None:
        self.caches = True                      # sums: retransmissions find them
        self.trainings: dict[bytes, _Training] = {}
        self.pool = AggregatorPool(slots=1)     # grown by configure to the trainings' ranges
        self.counters = AggregationCounters()
        self.overlap_log: deque[dict[str, object]] = deque(maxlen=OVERLAP_LOG)
        self.first_overlap: dict[str, object] | None = None
        self._waiting: dict[bytes, tuple[bytes, SlotKey, tuple[str, ...]]] = {}
        self._now = 0.0                         # the last trigger's time: the status's

    # ---- configuration -------------------------------------------------------------------

    def configure(self, config: AggregatorConfig, now: float) -> None:
        """Aggregate for `config.training` in its range of the pool, which grows to hold it.
        Configured again: its sums and slots are dropped (not the other trainings'), its
        counts go on."""
        self._now = now
        old = self.trainings.get(config.training)
        if old is not None:
            self._forget(old, now)
        self.pool.assign(config.training, config.first, config.slots)
        t = self.trainings[config.training] = _Training(config)
        if old is not None:
            t.overlaps = old.overlaps

    def nodes(self) -> list[bytes]:
        """The names this node aggregates as (a ForwardingHint's name, TLV-VALUE), each once."""
        out: list[bytes] = []
        for t in self.trainings.values():
            if t.hint not in out:
                out.append(t.hint)
        return out

    def remove(self, training: bytes, now: float) -> bool:
        t = self.trainings.pop(training, None)
        if t is None:
            return False
        self._now = now
        self._forget(t, now)
        self.pool.unassign(training, now)
        if not self.trainings:
            self.pool.resize(1)                 # nothing held, no range left: memory back
        return True

    def _forget(self, t: _Training, now: float) -> None:
        """Drop a training's sums (no Nacks: their requesters time out and fall back) and
        free its slots, only its own."""
        for key in list(t.pending):
            self._drop(t, key)
        self.pool.drop(t.config.training, now)

    # ---- triggers --------------------------------------------------------------------------

    def on_interest(self, interest: Interest, in_face: int, now: float) -> list[Packet]:
        """An `*aggregate*` Interest from the downstream `in_face`, forwarded to this face by
        the training's route."""
        found = self._training_of(interest.name)
        if found is None:
            return [Nack(interest, NACK_NO_ROUTE)]     # no training of this name here
        t, tail = found
        signed = signed_plan(interest.wire, interest.name, t.mac, t.config.key_name)
        if signed is None:
            self.counters.unauthorised += 1     # dropped: no slot, no Nack (see above)
            return []
        try:
            plan = t.plan(signed)
            key = _slot_key(t.config.training, tail)
        except DecodeError:
            return [Nack(interest, NACK_NO_ROUTE)]     # not ours to read
        if plan.group.at != t.config.node:
            return [Nack(interest, NACK_NO_ROUTE)]     # hinted here, planned elsewhere
        self._now = now
        if key.version < t.pushed:
            self.counters.stale += 1            # its version's slots were freed by a push
            return [Nack(interest, NACK_CONGESTION)]
        self.counters.interests += 1
        p = t.pending.get(key)
        if p is not None:
            if p.interest.name != interest.name:
                self.counters.collisions += 1   # another plan for the same segment
                return [Nack(interest, NACK_CONGESTION)]
            p.interest = interest               # the PIT's out-record holds its nonce now
            if in_face not in p.faces:
                p.faces.add(in_face)
                return []                       # another requester: the PIT merged it
            # a requester asks again (its retransmission, whatever became of its PIT entry)
            return self._express(t, key, p, list(p.expressed))
        workers = plan.workers
        out: list[Packet] = []
        # a slot past its deadline, not yet swept (whichever training's): ended now
        stale = self.pool.stale(key, now)
        if stale is not None:
            out += self._ended(stale.key)
        if self.pool.claim(key, workers, now, t.config.timeout) is None:
            self.counters.collisions += 1
            out.append(Nack(interest, NACK_CONGESTION))
            return out
        if len(self._waiting) + len(workers) > MAX_WAITING:
            self.pool.release(key, now)
            self.counters.collisions += 1
            out.append(Nack(interest, NACK_CONGESTION))
            return out
        self._note_overlap(t, key, now)         # no sum was pending: a new slot
        p = t.pending[key] = _Pending(interest, plan, tail, faces={in_face})
        names = [self._member(t, key, p, m) for m in plan.group.members]
        out += self._express(t, key, p, names)
        return out

    def on_data(self, data: Data, now: float) -> list[Packet]:
        """A Data for one of our member Interests."""
        got = self._waiting.get(data.name)
        if got is None:
            self.counters.late += 1
            return []
        self._now = now
        training, key, workers = got
        t = self.trainings[training]
        p = t.pending[key]
        content = verified_content(data.wire, t.mac)
        try:
            if content is None:
                raise summable.SummableError("bad signature")
            values, contributors = summable.parse(content)
            if contributors != len(workers):
                raise summable.SummableError("contributors differ from the plan")
            # a worker's own values are float32; a sub-group's sum exact, or it lost a rounding
            if (values.dtype.kind == "i") != (data.name in p.subplans):
                raise summable.SummableError("a float32 partial sum, or exact worker values")
        except summable.SummableError:
            self.counters.rejected += 1     # a forgery or a bad segment: the member stays missing
            return []
        try:
            slot = self.pool.add(key, workers, (values, contributors, p.plan.rows), _combine)
            done = slot is not None and slot.complete
            total = slot.acc.result(p.plan.group.exact) if done else b""   # type: ignore[union-attr]
        except summable.SummableError:
            self.counters.rejected += 1     # values the sum cannot hold: the requester sums
            return self._abandon(key, now)
        del self._waiting[data.name]
        p.expressed.pop(data.name, None)
        if data.congestion_mark:
            p.marked = True
        if not done:
            return []
        answer = signed_data(p.interest.name, total, t.mac, t.config.key_name, SUM_FRESHNESS_MS)
        if len(answer) > MAX_PACKET_SIZE:
            self.counters.oversize += 1     # no packet can carry it: its requester sums
            return self._abandon(key, now)
        self.counters.answered += 1
        self.pool.release(key, now)
        self._drop(t, key)
        # the Data as the forwarder would decode it: the object crosses the face, not bytes
        return [Data(answer, p.interest.name, SUM_FRESHNESS_MS, None, 1 if p.marked else 0)]

    def on_nack(self, nack: Nack, now: float) -> list[Packet]:
        """A member's Interest was Nacked: a sub-group's workers are collected here instead; a
        worker's Nack ends the sum (the requester falls back)."""
        interest = nack.interest
        got = self._waiting.get(interest.name)
        if got is None:
            return []
        self._now = now
        training, key, workers = got
        t = self.trainings[training]
        p = t.pending[key]
        if not interest.name.startswith(AGGREGATE_COMPONENT) or \
                len(self._waiting) + len(workers) > MAX_WAITING:
            return self._abandon(key, now)
        self.counters.fallbacks += 1
        del self._waiting[interest.name]
        p.expressed.pop(interest.name, None)
        return self._express(t, key, p, [self._member(t, key, p, w) for w in workers])

    def on_push(self, rest: bytes, now: float) -> list[Packet]:
        """A `*distribute*` Data went by (`rest`: its name without the marker): a push of a
        training's version frees that training's slots of older versions, their sums left
        unfinished Nacked. Any other version than the last one seen counts (a PS restarted
        from its checkpoint pushes an older one; a forged far-ahead version costs the sums in
        progress once, Nacked: their requesters fall back)."""
        for training, t in self.trainings.items():
            if rest.startswith(training):
                try:
                    typ, voff, vend = read_tl(rest, len(training), len(rest))
                    version = decode_nonneg(rest, voff, vend)
                except DecodeError:
                    return []
                if version == t.pushed:
                    return []
                t.pushed = version
                self._now = now
                self.pool.release_before(training, version, now)
                out: list[Packet] = []
                for key in [k for k in t.pending if k.version < version]:
                    out += self._ended(key)
                return out
        return []

    def on_timer(self, now: float) -> list[Packet]:
        """Slots past their deadline: the partial sums go, the Interests are Nacked."""
        self._now = now
        out: list[Packet] = []
        for slot in self.pool.expire(now):
            out += self._ended(slot.key)
        return out

    def next_timer(self) -> float | None:
        return self.pool.next_timer()

    def status(self) -> dict:
        """The counters, the pool, the overlaps recorded and each training's part. Busy
        periods still open count up to the last trigger's time (a tick behind at most)."""
        pool = self.pool
        return {"counters": asdict(self.counters),
                "pool": {"size": pool.slots, "held": len(pool),
                         "busy_seconds": round(pool.busy.seconds(self._now), 3),
                         **asdict(pool.counters)},
                "overlap_first": self.first_overlap,
                "overlap_log": list(self.overlap_log),
                "trainings": [self._training_status(t) for t in self.trainings.values()]}

    def _training_status(self, t: _Training) -> dict:
        c = t.config
        use = self.pool.use(c.training)
        assert use is not None                  # assigned while configured
        return {"training": t.uri, "node": c.node, "first": c.first, "slots": c.slots,
                "timeout": c.timeout, "held": len(use.held),
                "busy_seconds": round(use.busy.seconds(self._now), 3), "claimed": use.claimed,
                "collisions": use.collisions, "overlaps": t.overlaps}

    # ---- inside ---------------------------------------------------------------------------

    def _training_of(self, name: bytes) -> tuple[_Training, bytes] | None:
        """The configured training an `*aggregate*` name is for, and the name's version and
        segment components (without the digest)."""
        rest = name[len(AGGREGATE_COMPONENT):]
        for training, t in self.trainings.items():
            if rest.startswith(training):
                tail = rest[len(training):]
                try:
                    offsets = component_offsets(tail)
                except DecodeError:
                    return None
                if len(offsets) == 3 and tail[offsets[1]] == PARAMS_DIGEST:
                    return t, tail[:offsets[1]]
                return None
        return None

    def _member(self, t: _Training, key: SlotKey, p: _Pending, member: str | Group) -> bytes:
        """Record a member's Interest name (expressed by _express)."""
        if isinstance(member, Group):
            plan = encode_plan(replace(member, exact=True))     # a sum this node adds again
            name, signed = aggregation.signed_parameters(name_of(t, p), plan, t.mac,
                                                         t.config.key_name)
            p.subplans[name] = (member.at, signed)
            workers = member.workers()
        else:
            prefix = p.plan.prefixes.get(member)
            if prefix is None:              # a sub-group's worker, collected here after a Nack
                prefix = encode_tlv(GENERIC_COMPONENT, member.encode()) + t.config.training
            name = prefix + p.tail
            workers = (member,)
        p.expressed[name] = workers
        self._waiting[name] = (t.config.training, key, workers)
        return name

    def _express(self, t: _Training, key: SlotKey, p: _Pending, names: list[bytes]) -> list[Packet]:
        out: list[Packet] = []
        for name in names:
            workers = p.expressed.get(name)
            if workers is None:
                continue
            sub = p.subplans.get(name)
            if sub is not None:
                wire = aggregation.assemble_interest(name, sub[1], sub[0], t.lifetime_ms,
                                                     new_nonce())
                out.append(decode_interest(wire, 0, len(wire)))
            else:
                out.append(_interest(name, t.lifetime, t.lifetime_ms))
            self.counters.member_interests += 1
        return out

    def _abandon(self, key: SlotKey, now: float) -> list[Packet]:
        self.pool.release(key, now)
        return self._ended(key)

    def _ended(self, key: SlotKey) -> list[Packet]:
        """`key`'s slot is gone (its deadline, a push, a refused member): its unfinished sum
        is dropped and its Interest Nacked, whichever training's it was."""
        t = self.trainings.get(key.training)
        if t is None or (p := t.pending.get(key)) is None:
            return []
        self.counters.abandoned += 1
        self._drop(t, key)
        return [Nack(p.interest, NACK_CONGESTION)]

    def _note_overlap(self, t: _Training, key: SlotKey, now: float) -> None:
        """A new slot of `t`: an overlap if another training holds a live slot in its range
        (their rounds met in the shared slots); counted, and recorded."""
        other = self.pool.overlapping(t.config.training, now)
        if other is None:
            return
        self.counters.overlaps += 1
        t.overlaps += 1
        event: dict[str, object] = {
            "t": now, "training": t.uri, "version": key.version,
            # every held slot is a configured training's (remove drops them)
            "other": self.trainings[other.key.training].uri,
            "other_version": other.key.version}
        if self.first_overlap is None:
            self.first_overlap = event
        self.overlap_log.append(event)

    def _drop(self, t: _Training, key: SlotKey) -> None:
        p = t.pending.pop(key, None)
        if p is not None:
            for name in p.expressed:
                self._waiting.pop(name, None)


def _combine(acc: summable.FixedPointSum | None,
             value: tuple[np.ndarray, int, int]) -> summable.FixedPointSum:
    """Add a member's values (parsed: values, contributors, and the plan's batch of rows)."""
    values, contributors, rows = value
    if acc is None:
        acc = summable.FixedPointSum(values.size, rows)
    acc.add_values(values, contributors)
    return acc


def _slot_key(training: bytes, tail: bytes) -> SlotKey:
    """The slot of `/<ps>/<train>` + tail (a version and a segment component)."""
    typ, voff, vend = read_tl(tail, 0, len(tail))
    version = decode_nonneg(tail, voff, vend)
    typ, soff, send = read_tl(tail, vend, len(tail))
    if send != len(tail):
        raise DecodeError("an aggregate name ends with version, segment, digest")
    return SlotKey(training, version, decode_nonneg(tail, soff, send))


def name_of(t: _Training, p: _Pending) -> bytes:
    """The `*aggregate*` name of a pending sum's segment, without the plan's digest."""
    return AGGREGATE_COMPONENT + t.config.training + p.tail


# a member Interest after its Name: MustBeFresh, then the Nonce's type and length
_FRESH_NONCE = bytes((MUST_BE_FRESH, 0, NONCE, 4))


def _interest(name: bytes, lifetime: bytes, lifetime_ms: int) -> Interest:
    """A collect for `name` (TLV-VALUE), MustBeFresh as the PS's own: a worker's segment
    carries no FreshnessPeriod, so the worker answers, never a cached (maybe refused) copy.
    `lifetime`: the InterestLifetime element, of `lifetime_ms`. The bytes
    ndnps.ndn.encoders.encode_interest writes, put together from their fixed parts, and the
    Interest as decode_interest reads them (no HopLimit), without decoding them."""
    nonce = os.urandom(4)
    body = b"".join((tl(NAME, len(name)), name, _FRESH_NONCE, nonce, lifetime))
    return Interest(tl(INTEREST, len(body)) + body, name, False, True, nonce, lifetime_ms,
                    None, -1)
