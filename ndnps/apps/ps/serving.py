"""What the PS answers and sends on its face: the handlers under /<ps> and its marker names
(protocol steps 3, 4, 9 of docs/design.md, and a worker's leave), and the parameters' push (step 6).

  /<ps>/<train>/<gpu>/<seg>            training content: content.py's
  /<ps>/<train>/<gpu>/params/...       the unicast baseline's copies: common/unicast.py's
  /*insert*/<ps>/<train>               registration -> Data /*distribute*/<ps>/<train>
  /*remove*/<ps>/<train>               a worker leaves
  /*distribute*/<ps>/<train>/<v>/<seg> probes, answered by exchanges.transport.publisher for
                                       its last few versions; the push: the publisher's, paced

``Serving`` owns the publisher, the unicast server, the pacer and the end's signals (`removed`:
a *remove*, or a unicast final fetch; `all_left`), and the linger after the end.  It reads the
parameters and the progress it publishes through ``Params`` (the ParameterServer).
"""
from __future__ import annotations

import asyncio
import functools
from typing import Any, Protocol

from ndnps.client.events import wait_event
from ndnps.client.pacer import Pacer
from ndnps.client.segments import Blob, sign_segments
from ndnps.exchanges.ps.membership import Membership
from ndnps.exchanges.transport.publisher import Publisher
from ndnps.exchanges.transport.push_rate import PushRate, PushReport
from ndnps.protocol import messages, names
from ndnps.protocol.codec import flatten
from ndnps.protocol.config import PsConfig

from ..common.training import PsCounters
from ..common.unicast import ParamsServer
from .content import Content

PUSH_FRESHNESS_MS = 10_000      # probes ask MustBeFresh: a cache answers only recent pushes
CONFIRM_FRESHNESS_MS = 1_000


class Params(Protocol):
    """What the serving reads of the PS: the parameters, and the progress they are at."""
    model: Any
    collected: dict[str, int]       # async: last step collected per worker
    version: int
    done: bool


class Serving:
    def __init__(self, cfg: PsConfig, app: Any, params: Params, membership: Membership,
                 content: Content, signer: Any, counters: PsCounters) -> None:
        self.cfg, self.app, self.params, self.membership = cfg, app, params, membership
        self.content, self.signer, self.counters = content, signer, counters
        push = cfg.push
        self.publisher = Publisher(self.sign_push, push.keep_versions)
        self.unicast = ParamsServer(cfg.who.ps, cfg.who.train, max(push.keep_versions,
                                                                   4 * len(cfg.who.workers) + 4),
                                    functools.partial(app.make_data, signer=signer))
        self.pacer = Pacer(push.push_rate_mbps, push.push_burst, app.drain)
        # the pushes' pace, from the workers' reports (None: fixed at push_rate_mbps)
        self.push_rate: PushRate | None = PushRate(
            push.push_rate_mbps, push.push_rate_floor_mbps, push.push_rate_ceiling_mbps) \
            if push.push_rate == "adaptive" and push.push_mode == "persistent" else None
        self.removed = asyncio.Event()              # a *remove*, or a unicast final fetch
        self.all_left = False                       # a *remove* came after the end

    @staticmethod
    def loop_time() -> float:
        return asyncio.get_running_loop().time()

    def attach(self) -> None:
        """The PS answers under /<ps>; the marker names reach it by the stripped name's route,
        so their handlers are attached without registering them."""
        ps = self.cfg.who.ps
        self.app.attach_handler(names.node(ps), self.on_interest)
        self.app.attach_handler(names.insert_prefix(ps), self.on_register)
        self.app.attach_handler(names.remove_prefix(ps), self.on_remove)
        self.app.attach_handler(names.distribute_prefix(ps), self.on_probe)

    def on_interest(self, name, _param, reply, ctx) -> None:
        """Everything under /<ps>: training content, and the unicast baseline's parameters."""
        cfg = self.cfg
        c = names.parse_content(name)
        if c is not None and (c.ps, c.train) == (cfg.who.ps, cfg.who.train):
            self.content.serve(c, self.counted(reply) if self.push_rate else reply, ctx)
            return
        p = names.parse_params(name)
        if p is not None and (p.ps, p.train) == (cfg.who.ps, cfg.who.train):
            self.serve_params(p, reply, ctx)

    # ---- step 4: registration, and leaving ---------------------------------------------------

    def on_register(self, name, _param, reply, _ctx) -> None:
        t = names.parse_insert(name)
        if t is None or (t.ps, t.train) != (self.cfg.who.ps, self.cfg.who.train):
            return
        self.counters.registrations += 1
        reply(self.app.make_data(names.confirm(t.ps, t.train), b"", signer=self.signer,
                                 freshness_period=CONFIRM_FRESHNESS_MS))

    def on_remove(self, name, _param, reply, _ctx) -> None:
        t = names.parse_remove(name)
        if t is None or (t.ps, t.train) != (self.cfg.who.ps, self.cfg.who.train):
            return
        self.counters.removes += 1
        if self.params.done:
            # forwarders pass a *remove* upstream only once no downstream is left (a prune):
            # one that reaches us after the end says every worker has left
            self.all_left = True
        self.removed.set()
        reply(self.app.make_data(name, b"", signer=self.signer))

    def counted(self, reply):
        """`reply`, telling the push rate what content is served (its starting estimate)."""
        def counted_reply(wire) -> object:
            assert self.push_rate is not None
            self.push_rate.on_served(self.loop_time(), len(wire))
            return reply(wire)
        return counted_reply

    def on_push_report(self, report: object) -> None:
        """A worker's report on a push (a gradient's header; malformed: ignored)."""
        r = PushReport.from_wire(report)
        if r is not None and self.push_rate is not None:
            self.push_rate.on_report(r)

    # ---- steps 6 and 9: push, probes; the unicast baseline ------------------------------------

    def sign_push(self, version: int, blob: Blob) -> list[bytes]:
        cfg = self.cfg
        return sign_segments(blob, lambda s: names.distribute(cfg.who.ps, cfg.who.train,
                                                              version, s),
                             self.signer, PUSH_FRESHNESS_MS)

    def publish(self, version: int, done: bool, aborted: bool = False) -> list[bytes] | None:
        """Parameters `version` as Data: the publisher's signed push segments, or in unicast
        mode kept for each worker's copy.  Returns the push segments (None in unicast mode)."""
        collected = self.params.collected if self.cfg.update.mode == "async" else None
        vector = flatten(self.params.model.params)
        if self.cfg.push.push_mode == "unicast":
            self.unicast.publish(version, messages.params_blob(vector, version, done, collected,
                                                               aborted))
            return None
        # the segments are cut from the vector itself: its one copy is into the packets
        return self.publisher.publish(version, messages.params_pieces(vector, version, done,
                                                                       collected, aborted))

    async def push(self, version: int, done: bool, aborted: bool = False) -> float:
        """Step 6: publish `version` and push it along the persistent PIT entry, paced.
        Returns the seconds spent."""
        t0 = self.loop_time()
        wires = self.publish(version, done, aborted)
        if wires is not None:
            if self.push_rate is not None:
                self.pacer.set_rate(self.push_rate.pushing(version, self.pacer.limited))
            self.counters.segments_pushed += await self.pacer.send_all(wires, self.app.send_data)
        return self.loop_time() - t0

    def on_probe(self, name, _param, reply, _ctx) -> None:
        """Step 9: a worker missed segments of a push.  Versions not produced yet are not
        answered: the forwarder keeps the probe's PIT entry and the push satisfies it."""
        d = names.parse_distribute(name)
        if d is None or (d.ps, d.train) != (self.cfg.who.ps, self.cfg.who.train):
            return
        wire = self.publisher.answer(d.version, d.segment)
        if wire is not None:
            reply(wire)

    def serve_params(self, p: names.Params, reply, ctx) -> None:
        if self.membership.get(p.gpu) is None:
            return
        if self.unicast.serve(p, reply, ctx["deadline"], self.params.version,
                              self.params.done) and self.all_fetched_final():
            self.removed.set()

    def all_fetched_final(self) -> bool:
        return all(self.unicast.fetched_final(w.gpu) for w in self.membership.live)

    # ---- the end ------------------------------------------------------------------------------

    async def linger(self) -> None:
        """Stay for late probes (and unicast fetches) until every worker left, or `linger`.
        The final version is pushed again every second meanwhile, for workers below a
        forwarder restarted since the push (one that still caches it drops the same bytes:
        its workers' probes find it in the cache)."""
        cfg = self.cfg
        deadline = self.loop_time() + cfg.liveness.linger
        while self.loop_time() < deadline:
            if cfg.push.push_mode == "persistent" and self.all_left:
                break
            if cfg.push.push_mode == "unicast" and self.all_fetched_final():
                break
            self.removed.clear()
            if not await wait_event(self.removed, min(1.0, deadline - self.loop_time())):
                if cfg.push.push_mode == "persistent" and self.loop_time() < deadline:
                    self.counters.final_repushes += 1
                    await self.push(self.params.version, True)
