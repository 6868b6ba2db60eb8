"""A job node's side of the share controller (docs/sharing.md): before each round, ask whether it
uses the aggregators; after it, say it is over. The rules are ndnps.exchanges.sharing.agreement's
`Asker`; this is its asyncio adapter over Interests named per node (names.share_ask / share_done:
the PIT never merges two nodes' asks), MustBeFresh, the answers freshness zero and signed under the
job's key.

The controller not answering for `share_patience` makes the round go the ordinary way
("unreachable", logged once per outage); until it answers again each round asks for one
Interest lifetime only, so a dead controller costs a round half a second, not its patience.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from ndnps.client.errors import (InterestCanceled, InterestNack, InterestTimeout,
                                 ValidationFailure)
from ndnps.exchanges.sharing.agreement import Asker, Verdict
from ndnps.protocol import names
from ndnps.protocol.codec import CodecError, decode_tensors, encode_tensors
from ndnps.protocol.parts import Identity, Sharing

log = logging.getLogger("share")

LIFETIME = 0.5          # s: an ask's Interest (the controller holds it until it can answer)
NACK_WAIT = 0.1         # s before asking again after a Nack (no route to the controller yet)
DONE_TRIES = 3


def answer_content(verdict: Verdict, retry_after: float) -> bytes:
    """The controller's answer to an ask."""
    return encode_tensors([], kind="share", verdict=verdict.value, retry_after=retry_after)


def ack_content() -> bytes:
    """The controller's acknowledgement of a done."""
    return encode_tensors([], kind="share-done")


def parse_answer(content: bytes | memoryview) -> tuple[Verdict, float]:
    """CodecError, ValueError: not an answer."""
    _, meta = decode_tensors(bytes(content))
    if meta.get("kind") != "share":
        raise CodecError("not a share answer")
    return Verdict(meta["verdict"]), float(meta.get("retry_after", 0.0))


@dataclass
class Decision:
    round: int
    use: bool
    why: str                # "aggregate", "ordinary", "unreachable", or "" (no controller)
    wait: float             # s from the first ask to the decision
    asks: int = 0
    retries: int = 0

    def record(self) -> dict[str, Any]:
        """For a version's record (nothing without a controller)."""
        if not self.why:
            return {}
        return {"share": self.why, "share_wait": self.wait, "share_round": self.round,
                "share_asks": self.asks, "share_retries": self.retries}


class Share:
    """`node`: this app's name in the job `who` (the PS, or a peer)."""

    def __init__(self, who: Identity, sharing: Sharing, app: Any, node: str,
                 validator: Any) -> None:
        self.who, self.app, self.node, self.validator = who, app, node, validator
        self.controller, self.patience = sharing.share_controller, sharing.share_patience
        self.reachable = True
        self.unreachable_rounds = 0
        self._done_tasks: set[asyncio.Task] = set()
        self._early: tuple[int, asyncio.Task] | None = None
        # the quickest answer so far: the controller's round trip (when early asks go out)
        self.rtt: float | None = None

    def ask_early(self, r: int, ready_in: float = 0.0) -> None:
        """Round `r` will start in about `ready_in` s (its gradient being computed, its
        headers collected): ask one controller round trip before then, so that the answer is
        here when the round is, and the aggregators are not held while it is prepared. `ask(r)`
        then waits for this answer."""
        if self.controller:
            self.cancel()
            lead = self.rtt if self.rtt is not None else ready_in
            self._early = (r, asyncio.create_task(self._ask(r, max(0.0, ready_in - lead))))

    def cancel(self) -> None:
        if self._early is not None:
            self._early[1].cancel()
            self._early = None

    async def ask(self, r: int) -> Decision:
        """Round `r`'s decision (never raises: the ordinary way when in doubt); its `wait`:
        the time the round waited for it."""
        if self._early is not None and self._early[0] == r:
            task, self._early = self._early[1], None
            t0 = asyncio.get_running_loop().time()
            d = await task
            d.wait = asyncio.get_running_loop().time() - t0
            return d
        return await self._ask(r)

    async def _ask(self, r: int, delay: float = 0.0) -> Decision:
        if delay > 0:
            await asyncio.sleep(delay)
        if not self.controller:
            return Decision(r, True, "", 0.0)
        loop = asyncio.get_running_loop()
        asker = Asker(r, loop.time(), LIFETIME,
                      self.patience if self.reachable else LIFETIME)
        name = names.share_ask(self.controller, self.who.ps, self.who.train, self.node, r)
        while True:
            now = loop.time()
            asker.tick(now)
            if asker.finished:
                break
            if not asker.send(now):
                wake = asker.next_wake()
                await asyncio.sleep(max(0.0, (wake if wake is not None else now) - now))
                continue
            try:
                data = await self.app.express(
                    name, self.validator, lifetime=int(LIFETIME * 1000), must_be_fresh=True)
                verdict, retry = parse_answer(data.content)
                asker.on_answer(verdict, retry, loop.time())
            except InterestNack:
                asker.on_answer(Verdict.RETRY, NACK_WAIT, loop.time())
            except (InterestTimeout, InterestCanceled, ValidationFailure, CodecError,
                    ValueError, KeyError, TypeError):
                asker.on_timeout(loop.time())
        assert asker.decision is not None
        if asker.why == "unreachable":
            self.unreachable_rounds += 1
            if self.reachable:
                log.warning("share controller %s unreachable (no answer for %.1f s, round "
                            "%d): rounds go the ordinary way until it answers",
                            self.controller, self.patience, r)
            self.reachable = False
        elif not self.reachable:
            log.info("share controller %s answers again (round %d)", self.controller, r)
            self.reachable = True
        wait = asker.wait(loop.time())
        if asker.why != "unreachable" and not asker.retries:
            self.rtt = wait if self.rtt is None else min(self.rtt, wait)
        return Decision(r, asker.decision, asker.why, wait, asker.expressed, asker.retries)

    def done(self, r: int, clean: bool) -> None:
        """Round `r` is over: said in the background (a few tries; the next round's ask says
        it too)."""
        if not self.controller or not self.reachable:
            return
        task = asyncio.create_task(self._done(r, clean))
        self._done_tasks.add(task)
        task.add_done_callback(self._done_tasks.discard)

    async def _done(self, r: int, clean: bool) -> None:
        name = names.share_done(self.controller, self.who.ps, self.who.train, self.node, r,
                                clean)
        for _ in range(DONE_TRIES):
            try:
                await self.app.express(name, self.validator, lifetime=int(LIFETIME * 1000),
                                       must_be_fresh=True)
                return
            except InterestNack:
                await asyncio.sleep(NACK_WAIT)
            except (InterestTimeout, ValidationFailure):
                continue
            except InterestCanceled:
                return
