"""The share controller (time-division sharing of the aggregators, docs/sharing.md): ``python -m
ndnps.apps.controller --config FILE``. Several jobs share one aggregating forwarder whose slots fit
one job's round at a time; before each round every node of a job (its PS, or each of its peers)
asks here whether that round uses the aggregators, and says when the round is over.

Serves ``/<name>/share`` (names.share_ask / share_done): an ask is held until every node of the job
has asked for the same round, then all are answered alike (ndnps.exchanges.sharing.agreement: the
decision rule s1–s3 of ndnps.exchanges.sharing.decision, or a FIFO lock for "always-wait"); a done
is acknowledged at once. Answers are signed under the job's key, freshness zero: a cache never
answers a later ask. The configuration (TOML)::

    [share]                         # ndnps.protocol.sharing: the scenario's [share] too
    name = "ctl"                    # the prefix served, /ctl/share
    policy = "time-division"        # | "always-wait"
    score = "time-saved"            # | "shortest-round" (time-division's CalcScore)
    agree_timeout = 1.0             # s for every node of a job to ask, then abort and retry
                                    # (`timeout`, its older name, is read too)
    backoff = 0.05                  # s, doubling per abort
    tries = 4                       # aborts of one round before it goes the ordinary way
    slot_timeout = 2.0              # the aggregators' slot timeout: an unclean round's hold
    hold_limit = 30.0               # a holder that never says done is released after this
                                    # (at, slots: the scenario's aggregator; not used here)

    [[jobs]]                        # one per job: its [training] table (ps, train, key, and
    ps = "ps1"                      # workers: a peer job's nodes; a PS job's node is its PS)
    ...

Records: a line per decision and a status line every second (``--metrics``), the whole status
at the end. Runs until SIGINT/SIGTERM.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import Any, Callable

from ndnps.client.events import now_ms
from ndnps.client.security import Security
from ndnps.client.segments import sign_parts
from ndnps.exchanges.sharing.agreement import Answer, Controller, Verdict
from ndnps.lab.metrics import MetricsWriter
from ndnps.protocol import names
from ndnps.protocol.config import ConfigError, ControllerConfig, load_controller

from ..common.launch import (EXIT_OK, EXIT_USAGE, Prepared, app_parser, serve_prepared,
                             setup_logging)
from ..common.share import ack_content, answer_content

log = logging.getLogger("controller")

STATUS_EVERY = 1.0      # s between status records
MAX_HELD = 4096         # asks held at once (one per node: more are strangers' or a flood)


def job_id(ps: str, train: str) -> str:
    return f"{ps}/{train}"


class ShareController:
    """The adapter: Interests in, the Controller's answers out, its timers on the loop."""

    def __init__(self, cfg: ControllerConfig, app: Any, metrics: MetricsWriter) -> None:
        share = self.share = cfg.share
        self.app, self.metrics = app, metrics
        self.jobs = {job_id(j.who.ps, j.who.train): j for j in cfg.jobs}
        self.core = Controller({k: list(j.nodes) for k, j in self.jobs.items()}, share.policy,
                               share.score, share.agree_timeout, share.backoff, share.tries,
                               share.slot_timeout, share.hold_limit)
        self.signers = {k: Security(j.who.key_bytes, names.key(j.who.ps, j.who.train)).signer
                        for k, j in self.jobs.items()}
        # (job, node) -> its ask held: (round, reply, name, deadline in ms)
        self.held: dict[tuple[str, str], tuple[int, Callable[[bytes], Any], list, int]] = {}
        self.recorded: dict[str, int] = {}     # job -> the last round whose decision is recorded
        self.unanswered = 0         # answers whose ask had expired (the node asks again)
        self.unknown = 0            # Interests under our prefix that are no ask or done
        self.wake = asyncio.Event()

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def on_interest(self, name, _param, reply, ctx) -> None:
        if (a := names.parse_share_ask(name)) is not None and a.ctl == self.share.name:
            job = job_id(a.ps, a.train)
            if len(self.held) < MAX_HELD or (job, a.node) in self.held:
                self.held[(job, a.node)] = (a.round, reply, list(name), ctx["deadline"])
            self.emit(self.core.ask(job, a.node, a.round, self.now()))
        elif (d := names.parse_share_done(name)) is not None and d.ctl == self.share.name:
            job = job_id(d.ps, d.train)
            answers = self.core.done(job, d.node, d.round, bool(d.clean), self.now())
            if job in self.signers:
                reply(self._data(job, list(name), ack_content()))
            self.emit(answers)
        else:
            self.unknown += 1           # not a share name of ours: dropped, counted
        self.wake.set()

    def _data(self, job: str, name: list, content: bytes) -> bytes:
        return sign_parts([content], lambda _s: name, self.signers[job], 0)[0]

    def emit(self, answers: list[Answer]) -> None:
        """Answer each held ask the controller decided (one whose Interest expired is asked
        again by its node, and gets the recorded decision then)."""
        for a in answers:
            held = self.held.get((a.job, a.node))
            if a.verdict is not Verdict.RETRY and a.round > self.recorded.get(a.job, -1):
                self.recorded[a.job] = a.round
                self.metrics.write({"event": "decision", "job": a.job, "round": a.round,
                                    "verdict": a.verdict.value})
            if held is None or held[0] != a.round:
                continue
            del self.held[(a.job, a.node)]
            if held[1](self._data(a.job, held[2], answer_content(a.verdict,
                                                                 a.retry_after))) is False:
                self.unanswered += 1

    async def run(self) -> int:
        prefix = names.share_prefix(self.share.name)
        self.app.attach_handler(prefix, self.on_interest)
        if not await self.app.register(prefix):
            log.error("the forwarder refused to register /%s/share", self.share.name)
            return 1
        log.info("share controller /%s/share ready: %s (%s), jobs %s", self.share.name,
                 self.share.policy, self.share.score, ", ".join(self.jobs))
        loop = asyncio.get_running_loop()
        next_status = loop.time() + STATUS_EVERY
        try:
            while True:
                now = loop.time()
                self.emit(self.core.tick(now))
                self._forget_expired()
                if now >= next_status:
                    self.metrics.write({"event": "status", **self.status(now)})
                    next_status = now + STATUS_EVERY
                wake = min(w for w in (self.core.next_wake(), next_status) if w is not None)
                self.wake.clear()
                try:
                    await asyncio.wait_for(self.wake.wait(), max(0.0, wake - loop.time()))
                except asyncio.TimeoutError:
                    pass
        finally:
            self.metrics.write({"event": "end", "code": EXIT_OK, **self.status(loop.time())})

    def _forget_expired(self) -> None:
        """Held asks whose Interest has expired (their nodes ask again)."""
        now = now_ms()
        for key in [k for k, held in self.held.items() if held[3] < now]:
            del self.held[key]

    def status(self, now: float) -> dict:
        return {**self.core.status(now), "held": len(self.held), "unanswered": self.unanswered,
                "unknown": self.unknown}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = app_parser(
        "python -m ndnps.apps.controller",
        "ndnps share controller: jobs sharing one aggregating forwarder ask it, "
        "before each round, whether the round uses the aggregators.",
        "0 stopped by a signal after running, 1 error, 2 bad configuration",
        "a decision per round and a status every second")
    p.add_argument("--config", required=True, metavar="FILE",
                   help="TOML with [share] and one [[jobs]] entry per job")
    return p.parse_args(argv)


def prepare(argv: list[str] | None) -> Prepared | int:
    """Everything before the connection: the controller to run, or the exit code of a bad
    configuration (its message printed)."""
    args = parse_args(argv)
    try:
        cfg = load_controller(args.config)
    except ConfigError as e:
        print(f"controller: bad configuration: {e}", file=sys.stderr)
        return EXIT_USAGE
    setup_logging(args.log_level, cfg.share.name)
    metrics = MetricsWriter(args.metrics, role="controller", name=cfg.share.name)
    return Prepared(args, metrics, lambda app: ShareController(cfg, app, metrics).run())


def main(argv: list[str] | None = None) -> int:
    return serve_prepared(prepare(argv))


if __name__ == "__main__":
    sys.exit(main())
