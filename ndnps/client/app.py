"""The apps' NDN client: one face to the forwarder, the Interests the app expressed, the
handlers of the prefixes it serves, and NFD management — on the project's own NDN base
(``ndnps.ndn``: one TLV codec, the fixed-shape packet encoders, NDNLPv2 reliability, the RTO).

Per-packet module (typed, no dynamic tricks: compilable with mypyc), with face.py, pit.py,
wire.py and security.py; the rest of the client (fetcher, segments, pacer) runs per segment
or per object.

Expressing.  ``express(name, validator, ...)`` sends an Interest and returns the future of
its pending entry (``ndnps.client.pit``), which ends with the Data its validator accepts
(``ndnps.client.wire.Data``: name, Content as a view of the received bytes, MetaInfo, its
CongestionMark), or raises ValidationFailure, InterestNack (`reason`), InterestTimeout after
its lifetime, InterestCanceled when the face closes; cancelling it (or the task awaiting it)
is a cancellation, never an error, and the entry goes.  A validator is synchronous
(``Security.validator``, ``pass_all``): the future is settled in the read that brought the
Data.  ``express_future`` is the same future, for callers that add a callback (the segment
fetcher); ``express_wire`` sends an Interest encoded elsewhere (the `*aggregate*` Interests).
Names are lists of encoded components (``ndnps.protocol.names``) or NDN URIs.

Serving.  ``attach_handler(prefix, handler)``: an Interest goes to the handler of the longest
attached prefix of its name, as ``handler(name, app_parameters, reply, ctx)`` — ``reply(wire)``
sends the answer (with the PIT token the Interest came with, if any; False once its lifetime
is over), ``ctx["deadline"]`` is when that is (``events.now_ms`` clock) and
``ctx["interest"]`` the Interest (``wire.Interest``).  ``register(prefix)`` asks the forwarder
for the route (``rib/register``); ``attach_handler`` alone serves names that reach the app by
another route (the marker names under a PS's own prefix).

Pushed Data.  A Data whose first component is ``*distribute*`` goes first to
``on_distribute(data)`` — a push along a persistent PIT entry, for which no Interest is
pending, or the registration confirmation — then to any pending Interest of its name (a
probe).  Any other Data without a pending Interest is dropped and counted (`unsolicited`).

Management.  ``command(module, verb, **parameters)``: an NFD control command (a v0.3 signed
Interest, ControlParameters and ControlResponse from ``ndnps.ndn.nfd``), asked again when
lost with lifetimes learnt from the forwarder's answers; ``register``; ``enable_reliability``
(``faces/update`` LpReliabilityEnabled: NDNLPv2 link reliability on this face).

The forwarder may go away and come back (restarted): while the face is down, ``express`` behaves as
if the Interest were lost (it raises ``FaceDown``, an InterestTimeout, after its lifetime, or at
once when the forwarder is back and the prefixes are registered again; ``no_response`` Interests
and ``send_data`` are dropped and counted in ``sent_while_down``), so callers retry as they do on a
lossy link; ``reconnect()`` opens the face again and ``after_reconnect()`` asks for link
reliability again, re-registers every prefix registered so far and calls ``on_reconnect`` (the
worker re-sends its *insert*). ``ndnps/apps/common/launch.py`` reconnects with bounded backoff.

Counters: ``traffic()`` (bytes and packets each way, CongestionMarks received, malformed
packets dropped), ``link_events()`` (reconnects, packets lost while down, link
reliability's repairs).  A malformed packet, or a handler that raises, is dropped and
counted or logged; the face goes on.
"""
from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from typing import Any, Callable, Final, Sequence

from ndnps.ndn import encoders, nfd, packet
from ndnps.ndn.markers import DISTRIBUTE_COMPONENT
from ndnps.ndn.rto import RtoEstimator
from ndnps.ndn.tlv import DATA, INTEREST, LP_PACKET, DecodeError, name_to_str

from .errors import (FaceDown, InterestCanceled, InterestNack, InterestTimeout,
                     ValidationFailure)
from .events import now_ms, wait_event
from .face import Face, transport_uri
from .pit import Pending, PendingTable
from .security import DigestSigner, Signer, Validator, pass_all
from .wire import (DEFAULT_LIFETIME, Data, Interest, NameLike, make_data, name_key,
                   normalize, parse_data, parse_interest, parse_lp)

__all__ = ["App", "FaceDown", "Handler", "OnDistribute", "RANDOM_NONCE"]

log = logging.getLogger(__name__)

# management commands to our forwarder (App.command): a try's first lifetime and its most
MGMT_LIFETIME, MGMT_MAX_LIFETIME = 0.05, 1.0
MIN_MGMT_RTO = 0.01
RANDOM_NONCE: Final = -1                  # express's default: a fresh random Nonce
_COMMAND_SIGNER: Final = DigestSigner()   # NFD takes any signature on /localhost commands

OnDistribute = Callable[[Data], None]
Reply = Callable[[bytes], "bool | None"]
Handler = Callable[[list, "memoryview | None", Reply, dict], None]


class App:
    """The client of one app.  ``transport``: unix:///path, tcp://host[:port] or
    udp://host[:port]; default from NDN_CLIENT_TRANSPORT / client.conf, as python-ndn reads
    it.  ``face``: another face to run on (an in-memory network's, in tests)."""

    def __init__(self, transport: str | None = None,
                 on_distribute: OnDistribute | None = None,
                 lp_reliability: bool = False, link_repair: bool = False,
                 face: Face | None = None) -> None:
        self.transport = transport or transport_uri()
        self.face = face if face is not None else Face(self.transport)
        self.face.receive = self.receive
        self.face.on_down = self._face_down
        self.lp_reliability = lp_reliability     # ask for NDNLPv2 reliability on our face
        self.link_repair = link_repair           # links further on have it (not our face)
        self.on_distribute = on_distribute
        self.on_reconnect: Callable[[], None] | None = None
        self.registered: list[list[bytes]] = []  # prefixes to register again on reconnect
        # attached prefixes (TLV-VALUEs), longest first: a prefix's value is a byte prefix of
        # its names' (component boundaries line up), so the first that starts the name wins
        self._handlers: list[tuple[bytes, Handler]] = []
        # management commands' round trips to our forwarder (App.command)
        self.mgmt_rto = RtoEstimator(MGMT_LIFETIME, min_rto=MIN_MGMT_RTO,
                                     max_rto=MGMT_MAX_LIFETIME)
        self._last_command = 0                   # ms: each signed command a later time
        self.reconnects = 0
        self.sent_while_down = 0
        self.marks_in = 0                        # packets received with a CongestionMark
        self.malformed_in = 0                    # packets dropped: not NDN we can read
        self.unsolicited = 0                     # Data nobody waited for (not a push)
        self.unhandled = 0                       # Interests under no attached prefix
        self._back: asyncio.Event | None = None  # set once the forwarder is back
        self._pit: PendingTable | None = None    # made on the first express (needs the loop)

    # ---- expressing -----------------------------------------------------------------------------

    @property
    def pit(self) -> PendingTable:
        pit = self._pit
        if pit is None:
            pit = self._pit = PendingTable(asyncio.get_running_loop(), _timed_out)
        return pit

    def express(self, name: NameLike, validator: Validator | None,
                app_param: bytes | memoryview | None = None, signer: Signer | None = None, *,
                lifetime: int | None = DEFAULT_LIFETIME, must_be_fresh: bool = False,
                can_be_prefix: bool = False, nonce: int | None = RANDOM_NONCE,
                hop_limit: int | None = None, no_response: bool = False,
                forwarding_hint: Sequence[NameLike] = ()) -> "asyncio.Future[Data] | None":
        """Send an Interest; the future of its Data (None with `no_response`: nothing waits
        for an answer).  `lifetime` in ms (None: the packet states none, 4 s pending);
        `nonce` RANDOM_NONCE (default) or a value, None for none; `app_param`: Application
        Parameters (signed by `signer`, with SignatureNonce and SignatureTime, when given).
        ValueError for a missing validator or a value the packet cannot carry."""
        if validator is None and not no_response:
            raise ValueError("express: a validator is required (ndnps.client.security)")
        life = DEFAULT_LIFETIME if lifetime is None else lifetime
        if not self.face.running:                # the forwarder is gone (for now): lost
            self.sent_while_down += 1
            if no_response:
                return None
            return asyncio.ensure_future(self._lost(life / 1000))
        comps = normalize(name)
        if nonce == RANDOM_NONCE:
            nonce = random.getrandbits(32)
        if app_param is None and signer is None and not forwarding_hint:
            wire = encoders.encode_interest(comps, nonce, lifetime, can_be_prefix, must_be_fresh,
                                          hop_limit)
            digest = b""
        else:
            info = None
            if signer is not None:
                info = encoders.encode_interest_signature_info(
                    signer.signature_type, signer.key_name, os.urandom(8), self._signature_time())
            wire, digest = encoders.encode_interest_full(
                comps, b"" if app_param is None and signer is not None else app_param, nonce,
                lifetime, can_be_prefix, must_be_fresh, hop_limit, info,
                signer.sign if signer is not None else None,
                [normalize(h) for h in forwarding_hint])
        if no_response:
            self.face.send(wire)
            return None
        assert validator is not None
        entry = self.pit.add(name_key(comps) + digest, can_be_prefix, validator, life / 1000)
        self.face.send(wire)
        return entry.future

    def express_future(self, name: NameLike, validator: Validator | None,
                       **kwargs: Any) -> "asyncio.Future[Data]":
        """``express`` for callers that add a done callback (the segment fetcher): the
        pending entry's own future; a face that is down gives a Task ending in FaceDown."""
        kwargs.pop("no_response", None)
        future = self.express(name, validator, **kwargs)
        assert future is not None
        return future

    def express_wire(self, name: Sequence[bytes], raw: bytes, lifetime_ms: int,
                     validator: Validator, must_be_fresh: bool = False
                     ) -> "asyncio.Future[Data]":
        """An Interest packet made elsewhere (`raw`, named `name` exactly: its components,
        a ParametersSha256Digest included), as ``express_future``.  For Interests the
        client's encoders do not write (the `*aggregate*` Interests: ndnps.ndn.aggregation)."""
        if not self.face.running:
            self.sent_while_down += 1
            return asyncio.ensure_future(self._lost(lifetime_ms / 1000))
        entry = self.pit.add(name_key(name), False, validator, lifetime_ms / 1000)
        self.face.send(raw)
        return entry.future

    def _signature_time(self) -> int:
        """A signed Interest's SignatureTime: now (ms since the epoch), always later than the
        last one (NFD, as ours, refuses a command whose timestamp is not newer)."""
        stamp = max(int(time.time() * 1000), self._last_command + 1)
        self._last_command = stamp
        return stamp

    async def _lost(self, seconds: float) -> Data:
        """An Interest expressed while the forwarder is gone: it times out (FaceDown) after
        its lifetime, or as soon as the forwarder is back and our prefixes are registered
        again, so the caller re-expresses it then rather than a backed-off lifetime later."""
        if self._back is None or self._back.is_set():
            self._back = asyncio.Event()
        await wait_event(self._back, seconds)
        raise FaceDown()

    # ---- receiving ------------------------------------------------------------------------------

    def receive(self, wire: bytes) -> None:
        """One packet from the face: a Data, an Interest, or an LpPacket (PIT token,
        CongestionMark, Nack); anything malformed is dropped and counted."""
        try:
            typ = wire[0]
            if typ == DATA:
                self._data_arrived(parse_data(wire))
            elif typ == INTEREST:
                self._interest_arrived(parse_interest(wire))
            elif typ == LP_PACKET:
                self._lp_arrived(wire)
            else:
                self.malformed_in += 1
        except DecodeError:
            self.malformed_in += 1

    def _lp_arrived(self, wire: bytes) -> None:
        lp = parse_lp(wire)
        if lp is not None:                       # the forwarder's usual headers only
            start, end, mark, token = lp
            if mark:
                self.marks_in += 1
            inner = wire[start]
            if inner == DATA:
                self._data_arrived(parse_data(wire, start, end, mark))
            elif inner == INTEREST:
                self._interest_arrived(parse_interest(wire, start, end, token, mark))
            else:
                self.malformed_in += 1
            return
        try:
            pkt = packet.decode(wire)            # the base's general reader: Nacks, link fields
        except packet.LpIdle:
            return
        except packet.LpFragmented:              # (a datagram face reassembles before this)
            self.malformed_in += 1
            return
        if pkt.congestion_mark:
            self.marks_in += 1
        if isinstance(pkt, packet.Nack):
            self._nacked(pkt.interest.name, pkt.reason)
        elif isinstance(pkt, packet.Interest):
            self._interest_arrived(parse_interest(pkt.wire, 0, len(pkt.wire), pkt.pit_token,
                                                  pkt.congestion_mark))
        else:
            self._data_arrived(parse_data(pkt.wire, 0, len(pkt.wire), pkt.congestion_mark))

    def _data_arrived(self, data: Data) -> None:
        pushed = data.key.startswith(DISTRIBUTE_COMPONENT)
        if pushed and self.on_distribute is not None:
            data.name                            # (a malformed name: DecodeError, counted)
            try:
                self.on_distribute(data)
            except Exception:                # the app's bug: logged, the face goes on
                log.exception("on_distribute failed: %s", name_to_str(data.key))
        entries = self._pit.match(data) if self._pit is not None else []
        if not entries:
            if not pushed:
                self.unsolicited += 1
            return
        for entry in entries:
            _settle(entry, data)

    def _nacked(self, key: bytes, reason: int) -> None:
        if self._pit is None:
            return
        for entry in self._pit.nacked(key):
            entry.future.set_exception(InterestNack(reason))

    def _interest_arrived(self, interest: Interest) -> None:
        key = interest.key
        for prefix, handler in self._handlers:
            if key.startswith(prefix):
                break
        else:
            self.unhandled += 1
            return
        deadline = now_ms() + interest.lifetime
        token = interest.pit_token
        face = self.face

        def reply(wire: bytes) -> bool | None:
            if now_ms() > deadline:
                log.debug("deadline passed, unable to reply to %s", name_to_str(key))
                return False
            face.send(wire if token is None else packet.lp_wrap(bytes(wire), token))
            return None
        try:
            handler(interest.name, interest.app_parameters, reply,
                    {"deadline": deadline, "interest": interest})
        except Exception:                    # the app's bug: logged, the face goes on
            log.exception("Interest handler failed: %s", name_to_str(key))

    # ---- serving --------------------------------------------------------------------------------

    def attach_handler(self, prefix: NameLike, handler: Handler) -> None:
        """Interests under `prefix` (the longest attached prefix of their name) go to
        `handler(name, app_parameters, reply, ctx)`; attaching again replaces it."""
        key = name_key(normalize(prefix))
        handlers = [(p, h) for p, h in self._handlers if p != key] + [(key, handler)]
        self._handlers = sorted(handlers, key=lambda ph: -len(ph[0]))

    def detach_handler(self, prefix: NameLike) -> None:
        key = name_key(normalize(prefix))
        self._handlers = [(p, h) for p, h in self._handlers if p != key]

    @staticmethod
    def make_data(name: NameLike, content: bytes | memoryview | None, signer: Signer,
                  freshness_period: int | None = None,
                  final_block_id: bytes | None = None) -> bytes:
        """A signed Data packet (``ndnps.client.wire.make_data``)."""
        return make_data(name, content, signer, freshness_period, final_block_id)

    def send_data(self, wire: bytes) -> None:
        """Send a Data nobody asked for (a push); it goes where the forwarder's persistent PIT
        entry says."""
        if not self.face.running:
            self.sent_while_down += 1
            return
        self.face.send(wire)

    async def drain(self) -> None:
        await self.face.drain()

    # ---- management -----------------------------------------------------------------------------

    async def command(self, module: str, verb: str, tries: int = 8,
                      name: NameLike | None = None,
                      **parameters: int) -> nfd.ControlResponse | None:
        """One NFD management command to our forwarder (`faces/update`, `rib/register`...),
        asked again when lost: its ControlResponse, or None if it never came.  The forwarder
        answers at once, so a try lives MGMT_LIFETIME doubling per loss to MGMT_MAX_LIFETIME,
        at most the ceiling of the round trips measured on this face."""
        cp = nfd.control_parameters(
            name_key(normalize(name)) if name is not None else None, parameters)
        comps = nfd.command_name(module, verb, cp, self.face.is_local())
        loop = asyncio.get_running_loop()
        for attempt in range(tries):
            life = self.mgmt_rto.bounded(min(MGMT_LIFETIME * 2 ** attempt, MGMT_MAX_LIFETIME))
            sent = loop.time()
            try:
                pending = self.express(comps, pass_all, b"", _COMMAND_SIGNER,
                                       lifetime=max(1, int(life * 1000)))
                assert pending is not None
                data = await pending
                answer = nfd.parse_control_response(bytes(data.content))
            except InterestTimeout:
                continue
            except (InterestNack, InterestCanceled, ValidationFailure, DecodeError):
                await asyncio.sleep(life)
                continue
            if attempt == 0:
                self.mgmt_rto.observe(loop.time() - sent)
            else:
                log.debug("%s/%s answered at try %d", module, verb, attempt + 1)
            return answer
        return None

    async def register(self, prefix: NameLike, tries: int = 8) -> bool:
        """Register a prefix with our forwarder (rib/register, asked again when lost); it is
        registered again after a reconnect."""
        comps = [bytes(c) for c in normalize(prefix)]
        if comps not in self.registered:
            self.registered.append(comps)
        if not self.face.running:
            return False
        answer = await self.command("rib", "register", tries, name=comps)
        if answer is None or not answer.ok:
            log.error("registration of %s failed: %s", name_to_str(name_key(comps)),
                      "no answer" if answer is None else f"{answer.code} {answer.text}")
            return False
        return True

    async def enable_reliability(self, tries: int = 6) -> bool:
        """Ask the forwarder for NDNLPv2 reliability on our face (NFD's faces/update with
        LpReliabilityEnabled); from then on both ends repair each loss on this hop one link
        round trip after it.  Acks are read and sent from the moment we ask (the forwarder
        wraps its answer already); our packets are wrapped once it said yes.  False if it
        refused or never answered (then nothing we send is wrapped)."""
        self.face.start_reliability()
        answer = await self.command("faces", "update", tries, flags=nfd.FLAG_LP_RELIABILITY,
                                    mask=nfd.FLAG_LP_RELIABILITY)
        if answer is None:
            log.warning("no answer to faces/update (LpReliability) after %d tries", tries)
            return False
        if answer.ok and (answer.params.flags or 0) & nfd.FLAG_LP_RELIABILITY:
            self.face.wrap_out = True
            return True
        log.warning("the forwarder refused LpReliability: %s %s", answer.code, answer.text)
        return False

    # ---- the connection -------------------------------------------------------------------------

    async def reconnect(self) -> None:
        """Open the face again (raises OSError while the forwarder is not back)."""
        await self.face.open()
        self.reconnects += 1

    async def after_reconnect(self) -> None:
        """Ask for link reliability again (a new face), register again every prefix
        registered so far, then tell the app."""
        if self.lp_reliability:
            await self.enable_reliability()
        for prefix in list(self.registered):
            await self.register(prefix)
        if self._back is not None:
            self._back.set()
        if self.on_reconnect is not None:
            self.on_reconnect()

    def _face_down(self) -> None:
        """The connection is lost: no pending Interest can be answered any more."""
        if self._pit is not None:
            for entry in self._pit.clear():
                entry.future.set_exception(InterestCanceled())

    def shutdown(self) -> None:
        """Close the face (what waits is written first); pending Interests end."""
        self.face.close()
        self._face_down()

    @property
    def connected(self) -> bool:
        """Whether the face to the forwarder is up (not lost and waiting to reconnect)."""
        return self.face.running

    def traffic(self) -> dict[str, int]:
        f = self.face
        return {"bytes_sent": f.bytes_out, "bytes_received": f.bytes_in,
                "packets_sent": f.packets_out, "packets_received": f.packets_in,
                "marks_received": self.marks_in,
                "malformed_received": self.malformed_in + f.malformed}

    def link_events(self) -> dict[str, int]:
        """Forwarder connection losses survived, packets dropped while it was down, and (with
        link reliability) what the link layer repaired."""
        events = {"reconnects": self.reconnects,
                  "sent_while_down": self.sent_while_down + self.face.lost_sends}
        if self.lp_reliability:
            events.update({f"lp_{k}": v
                           for k, v in self.face.reliability_counters.as_dict().items()})
        return events


def _settle(entry: Pending, data: Data) -> None:
    """The entry's validator decides: the Data, or ValidationFailure (a validator that
    raises refuses)."""
    try:
        valid = entry.validator(data)
    except Exception:
        valid = False
    if valid:
        entry.future.set_result(data)
    else:
        entry.future.set_exception(ValidationFailure(data))


def _timed_out(entry: Pending) -> None:
    entry.future.set_exception(InterestTimeout())
