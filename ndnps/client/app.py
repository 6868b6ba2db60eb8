"""python-ndn's NDNApp, adapted where ndnps needs it.

1. Pushed Data reach app code.  ``NDNApp._on_data`` (python-ndn 0.5.2, pinned) hands a Data only
   to pending Interests of its name and drops the rest, so a ``/*distribute*/...`` Data pushed
   along a persistent PIT entry (for which the worker expressed no Interest) would be lost, as
   would the registration confirmation ``/*distribute*/<ps>/<train>`` answering
   ``/*insert*/<ps>/<train>`` (another name).  ``App`` overrides ``_on_data``: every Data whose
   first component is ``*distribute*`` is first given to ``on_distribute(name, meta_info,
   content, sig_ptrs, mark)`` (``mark``: its NDNLPv2 CongestionMark, 0 when none), then the
   normal path runs (so a probe's own pending Interest is still satisfied).  No library global
   is patched.

2. ``express`` ends the way it should.  ``NDNApp._wait_for_data`` turns the CancelledError of
   a task cancelled while awaiting ``express`` into ``InterestCanceled`` (an ordinary
   exception), so cancelling a coroutine would look like a failure, and leaves the cancelled
   entry in its PIT; and python-ndn 0.5.2 races: when a Data arrives just as its Interest
   times out, ``_on_data`` has already removed the PIT node (its validation task has not yet
   set the future) and the timeout path's ``del self._pit[node_name]`` raises KeyError out of
   ``express`` (or deletes the node of a newer Interest for the same name).  ``App`` replaces
   ``_wait_for_data``: one timer on the entry's future (no ``asyncio.wait_for``), expiry raises
   InterestTimeout, cancellation of the awaiting task raises CancelledError, a face shutdown
   (python-ndn cancels every pending future) InterestCanceled; expiry and cancellation remove
   the entry, and its node only if the PIT still holds that very node.

3. The forwarder may go away and come back (restarted): while the face is down, ``express``
   behaves as if the Interest were lost (it raises ``FaceDown``, an InterestTimeout, after its
   lifetime, or at once when the forwarder is back and the prefixes are registered again;
   ``no_response`` Interests and ``send_data`` are dropped and counted in
   ``sent_while_down``), so callers retry as they do on a lossy link; ``reconnect()`` opens
   the face again and ``after_reconnect()`` re-registers every prefix registered so far and
   calls ``on_reconnect`` (the worker re-sends its *insert*).  ``apps/launch.py`` reconnects
   with bounded backoff.

4. Byte and packet counters, and back-pressure.  ``CountingFace`` wraps the transport face
   python-ndn would have built (unix/tcp/udp from NDN_CLIENT_TRANSPORT or the client.conf) and
   counts what passes; ``drain()`` waits until the socket's write buffer has drained (pacing).

5. Per-packet CPU (issue 7).  Incoming Data bypass python-ndn's generic TLV model: ``App``
   overrides ``NDNApp._receive`` and hands a Data that ``ndnps.client.wire.parse_data``
   recognises to ``_on_data`` with the same four values ``ndn.encoding.parse_data`` would have
   produced (memoryviews into the packet, a ``MetaInfo``, a ``SignaturePtrs``): a bare Data, or
   one in an LpPacket that carries only a CongestionMark and/or a PIT token (``wire.parse_lp``;
   python-ndn's LpPacket path would drop the mark, at 3-4x the cost: 32 vs 9 µs, 8 KB Data).  The mark goes to
   ``on_distribute`` and into the pending Interest's context as ``"congestion_mark"`` (absent
   from the context of an entry python-ndn's own path settles: read it with
   ``ctx.get("congestion_mark", 0)``); marked packets are counted in ``traffic()``.  Everything
   else — Nacks, other LpPackets, any Data of another shape — takes python-ndn's own path
   unchanged.  ``_on_data`` is NDNApp's with ``InterestTreeNode.satisfy`` inlined:
   the same matching (exact name, or CanBePrefix; implicit digest), and an entry whose
   validator is a ``Security.validator`` is settled at once by ``Security.verify`` (what that
   coroutine does) with python-ndn's result and context or ValidationFailure; any other
   validator runs in its own Task as before.  A forged or unsigned Data fails the check
   either way.  ``express`` without ApplicationParameters or a signer encodes the Interest
   with ``ndnps.ndn.packet.encode_interest`` (the bytes of python-ndn's ``make_interest``, nonce
   drawn by python-ndn's ``gen_nonce``) and hands it to python-ndn's public
   ``express_raw_interest``, which keeps the PIT entry.  Measured in ``bench/micro/apps.py``.

6. Reading the forwarder's stream.  python-ndn's ``StreamFace.run`` reads a packet with a few
   awaits, copies it through a BytesIO and starts a Task for each; ``CountingFace.run`` reads
   the same StreamReader a socket read at a time, frames it with ``ndnps.ndn.tlv.StreamFramer``
   and hands a Data of ours, or an Interest without parameters or signature that
   ``ndnps.client.wire.parse_interest`` reads, to ``App._receive_now`` at once (no Task: the Data as
   in 5, the Interest to its handler as ``NDNApp._on_interest`` would, minus the Task it
   starts per Interest), everything else to python-ndn's ``_receive`` in a Task as before (a
   packet so handled may overtake a signed Interest or a Nack of the same read; no exchange
   relies on their order).  An oversize length shuts the face down, as the forwarder does.
   21 → 12–14 µs per received 8000-byte Data, 47 → 7 µs per collect Interest
   (``bench/micro/apps.py``).  ``express_future`` gives the segment fetcher the PIT entry's
   own future instead of a Task per Interest, and keeps an entry for an exact name in a dict
   keyed by the name's encoded components (``_exact``) rather than python-ndn's trie
   (~9.5 → ~1 µs per Interest, its Data and its removal); a Data looks in both, a Nack and
   a face shutdown (``_on_nack``, ``_clean_up``, extended) end the entries of both.

python-ndn internals relied on (pinned 0.5.2): ``StreamFace.reader`` / ``.running`` /
``.shutdown`` (read by ``CountingFace.run``), ``NDNApp._fib`` (``longest_prefix`` → a node
with ``callback``) and ``_put_raw_packet`` (the handler's ``reply``), ``InterestTreeNode.
append_interest`` (``express_future``), ``NDNApp._receive`` (overridden; the face calls it
with ``(typ, data)``), ``NDNApp._on_data`` (overridden), ``NDNApp._wait_for_data``
(overridden; ``express_raw_interest`` returns it with ``(future, deadline, node_name, node)``),
``NDNApp._pit`` (a ``NameTrie`` of ``InterestTreeNode``: ``prefixes``, ``get``, ``del``),
``InterestTreeNode.pending_list``, ``.timeout(future)``, ``.nack_interest`` and ``.cancel``,
``PendingIntEntry`` (``future``, ``deadline``, ``can_be_prefix``, ``implicit_sha256``,
``validator``, ``satisfy``), and that ``_on_nack(name, reason)`` / ``_clean_up()`` (extended)
settle or cancel the pending futures.  Nothing of python-ndn is
patched; ``tests/unit/test_apps_ndnapp.py`` pins each of these behaviours.
"""
from __future__ import annotations

import asyncio
import logging
from hashlib import sha256
from typing import Callable

from ndn import utils
from ndn.app_support import nfd_mgmt
from ndn.appv2 import DEFAULT_LIFETIME, InterestTreeNode, NDNApp, PendingIntEntry
from ndn.client_conf import default_face, read_client_conf
from ndn.encoding import (Component, DecodeError, InterestParam, Name, SignaturePtrs,
                          parse_tl_num)
from ndn.security import DigestSha256Signer
from ndn.transport.face import Face
from ndn.transport.stream_face import StreamFace
from ndn.transport.nfd_registerer import pass_all
from ndn.types import (InterestCanceled, InterestNack, InterestTimeout, ValidationFailure,
                       ValidResult)
from ndn.utils import gen_nonce

from . import wire
from ndnps.ndn.markers import DISTRIBUTE_COMPONENT
from ndnps.ndn.reliability import ReliabilityCounters, ReliableLink
from ndnps.ndn.rto import RtoEstimator
from ndnps.ndn import packet
from ndnps.ndn.tlv import DATA, INTEREST, LP_PACKET, StreamFramer

from .events import wait_event
from .security import Security

log = logging.getLogger(__name__)
LP_RELIABILITY: int = nfd_mgmt.FaceFlags.LP_RELIABILITY_ENABLED.value
# management commands to our forwarder (App.command): a try's first lifetime and its most
MGMT_LIFETIME, MGMT_MAX_LIFETIME = 0.05, 1.0
MIN_MGMT_RTO = 0.01


class FaceDown(InterestTimeout):
    """An Interest expressed while the face to the forwarder was down: it never left.  A
    timeout to callers that only know those; a segment fetcher re-expresses it without
    backing off (an outage says nothing about the path it will take once the face is back)."""


OnDistribute = Callable[..., None]
READ_SIZE = 1 << 18                 # bytes per read of the forwarder's stream (uvloop's own)


def _settle(entry: PendingIntEntry, sec: Security, data: tuple, mark: int) -> None:
    """PendingIntEntry.satisfy for ``Security.validator``, whose check is synchronous: the
    same result, context (plus the Data's CongestionMark) or ValidationFailure, set now rather
    than from a Task."""
    name, meta_info, content, sig, raw_packet = data
    if entry.future.done():
        return
    try:
        valid = sec.verify(sig)
    except Exception:                 # a check that breaks is a failed check, not a dead face
        valid = False
    if valid:
        entry.future.set_result((name, content, {"meta_info": meta_info, "sig_ptrs": sig,
                                                 "raw_packet": raw_packet,
                                                 "deadline": entry.deadline,
                                                 "congestion_mark": mark}))
    else:
        entry.future.set_exception(ValidationFailure(name, meta_info, content, sig,
                                                     ValidResult.FAIL))

# express() keyword arguments the fixed-shape Interest encoder covers (others: python-ndn)
_PLAIN_INTEREST_ARGS = frozenset(("lifetime", "must_be_fresh", "can_be_prefix", "nonce",
                                  "hop_limit", "no_response"))


class CountingFace(Face):
    """Delegates to `inner`, counting packets and bytes in and out."""

    def __init__(self, inner: Face) -> None:
        self.inner = inner
        super().__init__()
        self.packets_in = self.packets_out = 0
        self.bytes_in = self.bytes_out = 0
        self.marks_in = 0                   # packets received with a CongestionMark (App counts)
        self.lost_sends = 0
        # NDNLPv2 reliability with the forwarder: Acks are read and sent from `start_
        # reliability` on; what we send is wrapped once the forwarder has it on too
        self.reliable: ReliableLink | None = None
        self.wrap_out = False
        self.reliability_counters = ReliabilityCounters()   # over every connection
        # (typ, packet) -> handled?  The App's synchronous receive path, tried first
        self.receive_now: Callable[[int, bytes], bool] | None = None
        self._tasks: set[asyncio.Task] = set()  # python-ndn's per-packet Tasks, referenced
        # packets sent during one turn of the event loop, written together at its end
        self._out: list[bytes] = []

    def start_reliability(self) -> None:
        self.stop_reliability()
        self.reliable = ReliableLink(self._send_raw, asyncio.get_running_loop(),
                                     self.reliability_counters)

    def stop_reliability(self) -> None:
        """The face is gone (the forwarder's state with it): counters kept, state dropped."""
        if self.reliable is not None:
            self.reliable.close()
        self.reliable = None
        self.wrap_out = False

    @property
    def running(self) -> bool:
        return self.inner.running

    @running.setter
    def running(self, value: bool) -> None:
        self.inner.running = value

    async def open(self) -> None:
        await self.inner.open()

    def shutdown(self) -> None:
        self.stop_reliability()
        self.flush()
        self.inner.shutdown()

    def send(self, data: bytes) -> None:
        self.packets_out += 1
        self.bytes_out += len(data)
        if self.wrap_out and self.reliable is not None:
            self.reliable.send(data)
        else:
            self._send_raw(data)

    def _send_raw(self, data: bytes) -> None:
        """Queue for one write at the end of this loop turn, as the forwarder's faces do: a
        burst (a read's answers, a window of Interests) costs one system call here and one
        read at the forwarder instead of one each per packet."""
        out = self._out
        if not out:
            try:
                asyncio.get_running_loop().call_soon(self.flush)
            except RuntimeError:            # no loop (shutting down): write at once
                out.append(data)
                self.flush()
                return
        out.append(data)

    def flush(self) -> None:
        out = self._out
        if not out:
            return
        self._out = []
        inner = self.inner
        try:
            if isinstance(inner, StreamFace):
                if inner.writer is None:    # shut down since: python-ndn would raise
                    raise ConnectionError
                inner.writer.writelines(out)
            else:
                for data in out:
                    inner.send(data)
        except (RuntimeError, ConnectionError, OSError):
            # the connection dropped before the face noticed: the packets are lost, as on
            # a lossy link (their Interests time out), and counted
            self.lost_sends += len(out)

    async def run(self) -> None:
        inner = self.inner
        inner.callback = self._received
        if isinstance(inner, StreamFace) and inner.reader is not None:
            await self._read_stream(inner, inner.reader)
        else:
            await inner.run()               # a datagram face: python-ndn's own loop

    async def _read_stream(self, inner: StreamFace, reader: asyncio.StreamReader) -> None:
        """python-ndn's ``StreamFace.run`` reads each packet with three or more awaits, copies
        it through a BytesIO and starts a Task for it.  This reads what the socket has, frames
        it with ``ndnps.ndn.tlv.StreamFramer`` and hands each packet on at once: to
        ``receive_now`` (the App's synchronous path for a bare Data or plain Interest of
        ours), else to the callback in a Task, as python-ndn does.  Ends, the face shut down,
        at EOF or on an oversize length (the stream's framing is lost)."""
        framer = StreamFramer()
        while inner.running:
            try:
                chunk = await reader.read(READ_SIZE)
            except (ConnectionError, OSError):
                chunk = b""
            if not chunk:
                break
            packets, oversize = framer.feed(chunk)
            self.packets_in += len(packets)
            self.bytes_in += sum(map(len, packets))
            reliable = self.reliable
            if reliable is not None and all(p[0] == LP_PACKET for p in packets):
                self._handle_frames(reliable, packets)
            else:
                for wire_packet in packets:     # (not `packet`: the module's name)
                    self._deliver(wire_packet)
            self.flush()                    # the read's answers and Acks, without a turn's wait
            if oversize:
                log.warning("oversize packet from the forwarder: closing the face")
                break
        inner.shutdown()

    def _handle_frames(self, reliable: ReliableLink, frames: list[bytes]) -> None:
        """NDNLPv2 frames with link reliability on (a whole read when it holds nothing else):
        their Acks, sequence numbers and the losses they reveal handled as one batch, as the
        forwarder's faces do; the packets they carry handed on."""
        for inner in reliable.receive_many(frames):
            self._handle(inner[0], inner)

    def _deliver(self, packet: bytes) -> None:
        typ = packet[0]
        if typ >= 253:                      # a multi-byte TLV-TYPE: none of ours
            typ, _ = parse_tl_num(packet)
        reliable = self.reliable
        if typ == LP_PACKET and reliable is not None:
            self._handle_frames(reliable, [packet])
        else:
            self._handle(typ, packet)

    def _handle(self, typ: int, packet: bytes) -> None:
        receive_now = self.receive_now
        if receive_now is None or not receive_now(typ, packet):
            task = asyncio.get_running_loop().create_task(self.callback(typ, packet))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _received(self, typ: int, data: bytes) -> None:
        """A packet from python-ndn's own reader loop (a datagram face): the stream path's."""
        self.packets_in += 1
        self.bytes_in += len(data)
        self._deliver(bytes(data))

    def isLocalFace(self):
        return self.inner.isLocalFace()

    async def drain(self) -> None:
        self.flush()
        writer = getattr(self.inner, "writer", None)
        if writer is not None and self.inner.running:
            try:
                await writer.drain()
            except (ConnectionError, RuntimeError):
                pass


class App(NDNApp):
    """NDNApp that sees pushed Data.  ``transport``: unix:///path or tcp://host:port; default
    from NDN_CLIENT_TRANSPORT / client.conf, as python-ndn does."""

    def __init__(self, transport: str | None = None,
                 on_distribute: OnDistribute | None = None,
                 lp_reliability: bool = False, link_repair: bool = False) -> None:
        transport = transport or read_client_conf()["transport"]
        self.transport = transport
        self.lp_reliability = lp_reliability     # ask for NDNLPv2 reliability on our face
        self.link_repair = link_repair           # links further on have it (not our face)
        self.counting = CountingFace(default_face(transport))
        super().__init__(face=self.counting)
        self.counting.receive_now = self._receive_now
        self.on_distribute = on_distribute
        self.on_reconnect: Callable[[], None] | None = None
        self.registered: list = []               # prefixes to register again on reconnect
        # management commands' round trips to our forwarder (App.command)
        self.mgmt_rto = RtoEstimator(MGMT_LIFETIME, min_rto=MIN_MGMT_RTO,
                                     max_rto=MGMT_MAX_LIFETIME)
        self._last_command = 0                   # ms: each signed command a new timestamp
        self.reconnects = 0
        self.sent_while_down = 0
        self._back: asyncio.Event | None = None  # set once the forwarder is back
        # express_future's entries for an exact name (no CanBePrefix), keyed by the name's
        # encoded components: a dict lookup instead of python-ndn's trie (setdefault, walk
        # and delete: ~9.5 µs per Interest).  Everything else stays in ``_pit``.
        self._exact: dict[bytes, InterestTreeNode] = {}

    def express(self, name, validator=None, app_param=None, signer=None, **kwargs):
        if not self.face.running:                # the forwarder is gone (for now): lost
            self.sent_while_down += 1
            if kwargs.get("no_response"):
                return None
            lifetime = kwargs.get("lifetime") or 4000
            return self._lost(lifetime / 1000)
        if app_param is None and signer is None and type(name) is list and name \
                and _PLAIN_INTEREST_ARGS.issuperset(kwargs):
            plain = self._express_plain(name, validator, kwargs)
            if plain is not self._NOT_PLAIN:
                return plain
        return super().express(name, validator, app_param, signer, **kwargs)

    _NOT_PLAIN = object()

    def express_future(self, name, validator, **kwargs) -> asyncio.Future:
        """``express`` as a Future, for callers that add a done callback rather than await
        (the segment fetcher): for an Interest without parameters or signature, the PIT
        entry's own future, no coroutine or Task around it.  It ends as ``express`` does —
        the Data's (name, content, context), InterestTimeout at the lifetime (entry removed),
        InterestNack, ValidationFailure — except that a face shutdown, which cancels every
        pending future in python-ndn, shows as the future cancelled.  Cancelling it removes
        the entry.  Any other Interest: a Task around ``express``."""
        if self.face.running and type(name) is list and name and \
                not kwargs.get("no_response") and _PLAIN_INTEREST_ARGS.issuperset(kwargs):
            plain = self._plain_interest(name, kwargs)
            if plain is not None and Component.get_type(name[-1]) != \
                    Component.TYPE_IMPLICIT_SHA256:
                # the encoder took every component as bytes-like, so ``Name.normalize``
                # would return this same list copied
                return self._pending(list(name), plain[1], plain[0], validator)
        return asyncio.ensure_future(self.express(name, validator, **kwargs))

    def express_wire(self, name: list, raw: bytes, lifetime_ms: int, validator,
                     must_be_fresh: bool = False) -> asyncio.Future:
        """An Interest packet made elsewhere (`raw`, named `name` exactly: its components as
        bytes, a ParametersSha256Digest included), as ``express_future``: the PIT entry's own
        future.  For Interests the app's encoders do not write (ApplicationParameters with a
        ForwardingHint: ndnps.ndn.aggregation)."""
        if not self.face.running:
            self.sent_while_down += 1
            return asyncio.ensure_future(self._lost(lifetime_ms / 1000))
        param = InterestParam(must_be_fresh=must_be_fresh, lifetime=lifetime_ms)
        return self._pending(list(name), param, raw, validator)

    def _pending(self, name, param: InterestParam, raw: bytes, validator) -> asyncio.Future:
        """``express_raw_interest`` without the coroutine: the entry, the packet sent, the
        lifetime as one timer on the future."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        if param.can_be_prefix:
            table, key = self._pit, name
        else:
            table, key = self._exact, b"".join(name)
        node = table.setdefault(key, InterestTreeNode())
        lifetime = param.lifetime if param.lifetime is not None else DEFAULT_LIFETIME
        node.append_interest(future, utils.timestamp() + lifetime, param, validator, b"")
        self.face.send(raw)
        handle = loop.call_later(lifetime / 1000, self._expire, future, key, node, table)

        def ended(f: asyncio.Future) -> None:
            handle.cancel()
            if f.cancelled():
                self._forget(f, key, node, table)
        future.add_done_callback(ended)
        return future

    def _express_plain(self, name: list, validator, kwargs: dict):
        """``NDNApp.express`` for an Interest without parameters or signature: the same
        InterestParam (python-ndn's defaults: random nonce, lifetime 4000 ms), the packet
        written by the fixed-shape encoder.  ``_NOT_PLAIN`` when a value is one only
        python-ndn handles (it then raises or encodes as before)."""
        plain = self._plain_interest(name, kwargs)
        if plain is None:
            return self._NOT_PLAIN
        raw, param = plain
        return self.express_raw_interest(name, param, raw, validator,
                                         kwargs.get("no_response", False))

    @staticmethod
    def _plain_interest(name: list, kwargs: dict) -> tuple[bytes, InterestParam] | None:
        """The packet and InterestParam of a plain Interest, or None when a value is one only
        python-ndn handles."""
        can_be_prefix = kwargs.get("can_be_prefix", False)
        must_be_fresh = kwargs.get("must_be_fresh", False)
        lifetime = kwargs.get("lifetime", InterestParam.lifetime)   # 4000, its default
        hop_limit = kwargs.get("hop_limit")
        nonce = kwargs["nonce"] if "nonce" in kwargs else gen_nonce()
        if type(can_be_prefix) is not bool or type(must_be_fresh) is not bool \
                or not (lifetime is None or (type(lifetime) is int and lifetime >= 0)) \
                or not (nonce is None or type(nonce) is int) \
                or not (hop_limit is None or type(hop_limit) is int):
            return None
        try:
            raw = packet.encode_interest(name, nonce, lifetime, can_be_prefix, must_be_fresh,
                                       hop_limit)
        except (TypeError, ValueError):
            return None
        return raw, InterestParam(can_be_prefix=can_be_prefix, must_be_fresh=must_be_fresh,
                                  nonce=nonce, lifetime=lifetime, hop_limit=hop_limit)

    async def _lost(self, seconds: float):
        """An Interest expressed while the forwarder is gone: it times out (FaceDown) after
        its lifetime, or as soon as the forwarder is back and our prefixes are registered
        again, so the caller re-expresses it then rather than a backed-off lifetime later."""
        if self._back is None or self._back.is_set():
            self._back = asyncio.Event()
        await wait_event(self._back, seconds)
        raise FaceDown()

    async def reconnect(self) -> None:
        """Open the face again (raises OSError while the forwarder is not back)."""
        await self.counting.open()
        self.reconnects += 1

    async def command(self, module: str, verb: str, tries: int = 8,
                      **params) -> dict | None:
        """One NFD management command to our forwarder (`faces/update`, `rib/register`...),
        asked again when lost: its parsed ControlResponse, or None if it never came.
        python-ndn's registerer gives each command 1 s and one try: on a lossy face that cost
        a whole second per loss before anything started.  The forwarder answers at once, so
        a try lives MGMT_LIFETIME doubling per loss to MGMT_MAX_LIFETIME, at most the
        ceiling of the round trips measured on this face (ours, as NFD's, wants a new
        timestamp in each signed command)."""
        for attempt in range(tries):
            life = self.mgmt_rto.bounded(min(MGMT_LIFETIME * 2 ** attempt, MGMT_MAX_LIFETIME))
            now = utils.timestamp()
            while now <= self._last_command:
                await asyncio.sleep(0.001)
                now = utils.timestamp()
            self._last_command = now
            sent = asyncio.get_running_loop().time()
            try:
                _, reply, _ = await self.express(
                    nfd_mgmt.make_command_v2(module, verb, self.face, **params), app_param=b"",
                    signer=DigestSha256Signer(for_interest=True), validator=pass_all,
                    lifetime=max(1, int(life * 1000)))
                answer = nfd_mgmt.parse_response(reply)
            except InterestTimeout:
                continue
            except (InterestNack, InterestCanceled, ValidationFailure, DecodeError):
                await asyncio.sleep(life)
                continue
            if attempt == 0:
                self.mgmt_rto.observe(asyncio.get_running_loop().time() - sent)
            if attempt:
                log.debug("%s/%s answered at try %d", module, verb, attempt + 1)
            return answer
        return None

    async def enable_reliability(self, tries: int = 6) -> bool:
        """Ask the forwarder for NDNLPv2 reliability on our face (NFD's faces/update with
        LpReliabilityEnabled); from then on both ends repair each loss on this hop one link
        round trip after it.  Acks are read and sent from the moment we ask (the forwarder
        wraps its answer already); our packets are wrapped once it said yes.  False if it
        refused or never answered (then nothing we send is wrapped)."""
        self.counting.start_reliability()
        answer = await self.command("faces", "update", tries, flags=LP_RELIABILITY,
                                    mask=LP_RELIABILITY)
        if answer is None:
            log.warning("no answer to faces/update (LpReliability) after %d tries", tries)
            return False
        if answer["status_code"] == 200 and (answer["flags"] or 0) & LP_RELIABILITY:
            self.counting.wrap_out = True
            return True
        log.warning("the forwarder refused LpReliability: %s %s", answer["status_code"],
                    answer["status_text"])
        return False

    async def after_reconnect(self) -> None:
        """Ask for link reliability again (a new face), register again every prefix
        registered so far, then tell the app."""
        if self.lp_reliability:
            await self.enable_reliability()
        for name in list(self.registered):
            await self.register(name)
        if self._back is not None:
            self._back.set()
        if self.on_reconnect is not None:
            self.on_reconnect()

    async def _receive(self, typ: int, data) -> None:
        """A bare Data of our shape is decoded by ``ndnps.client.wire`` (same values, ~3x cheaper);
        every other packet by python-ndn."""
        if not self._receive_now(typ, data):
            await super()._receive(typ, data)

    def _receive_now(self, typ: int, data) -> bool:
        """A Data or plain Interest of our shape, bare or in an LpPacket carrying only a
        CongestionMark and/or a PIT token, handled now (no Task, no await); False: anything
        else (python-ndn's path).  Marks are counted here, on the packets handled here."""
        mark = 0
        if typ == LP_PACKET:
            lp = wire.parse_lp(data)
            if lp is None:
                return False
            data, mark, token = lp
            typ = data[0]
            if token and typ == INTEREST:
                return False                # the reply must echo the token: python-ndn's path
        if typ == DATA:
            parsed = wire.parse_data(data)
            if parsed is None:
                return False
            if mark:
                self.counting.marks_in += 1
            name, meta_info, content, sig = parsed
            self._data_arrived(name, meta_info, content, sig, data, mark)
            return True
        if typ == INTEREST:
            interest = wire.parse_interest(data)
            if interest is None or not self._interest_arrived(*interest, data):
                return False
            if mark:
                self.counting.marks_in += 1
            return True
        return False

    def _interest_arrived(self, name, param: InterestParam, raw_packet) -> bool:
        """``NDNApp._on_interest`` for an Interest without parameters or signature, for which
        it validates nothing: the handler runs now, not from a Task of its own, with the same
        arguments (its context's ``sig_ptrs`` empty: nothing is signed).  False when no
        handler is attached: python-ndn's path logs it as before."""
        step = self._fib.longest_prefix(name)
        if not step or step.value.callback is None:
            return False
        lifetime = param.lifetime if param.lifetime is not None else DEFAULT_LIFETIME
        deadline = utils.timestamp() + lifetime
        context = {"int_param": param, "pit_token": None, "sig_ptrs": SignaturePtrs(),
                   "raw_packet": raw_packet, "deadline": deadline}

        def reply(data) -> bool | None:
            if utils.timestamp() > deadline:
                log.warning("deadline passed, unable to reply to %s", Name.to_str(name))
                return False
            self._put_raw_packet(data)
            return None
        try:
            step.value.callback(name, None, reply, context)
        except Exception:               # python-ndn's Task would have logged it and gone on
            log.exception("Interest handler failed: %s", Name.to_str(name))
        return True

    async def _on_data(self, name, meta_info, content, sig, raw_packet):
        self._data_arrived(name, meta_info, content, sig, raw_packet)

    def _data_arrived(self, name, meta_info, content, sig, raw_packet, mark: int = 0) -> None:
        if self.on_distribute is not None and name and bytes(name[0]) == DISTRIBUTE_COMPONENT:
            self.on_distribute(name, meta_info, content, sig, mark)
        # NDNApp._on_data, with InterestTreeNode.satisfy inlined so that entries validated by
        # a training's Security are settled at once instead of through one Task each
        data = (name, meta_info, content, sig, raw_packet)
        exact = self._exact.pop(b"".join(name), None) if self._exact else None
        if exact is not None:               # exact names, no implicit digest: all satisfied
            for entry in exact.pending_list:
                self._satisfy(entry, data, mark)
        if not self._pit:
            return
        clean = []
        for prefix, node in self._pit.prefixes(name):
            is_prefix = prefix != name
            unsatisfied = []
            for entry in node.pending_list:
                if (entry.can_be_prefix or not is_prefix) and (
                        not entry.implicit_sha256
                        or sha256(raw_packet).digest() == entry.implicit_sha256):
                    self._satisfy(entry, data, mark)
                else:
                    unsatisfied.append(entry)
            if unsatisfied:
                node.pending_list = unsatisfied
            else:
                clean.append(prefix)
        for prefix in clean:
            del self._pit[prefix]

    @staticmethod
    def _satisfy(entry: PendingIntEntry, data: tuple, mark: int) -> None:
        if getattr(entry.validator, "__func__", None) is Security.validator:
            _settle(entry, entry.validator.__self__, data, mark)
        else:
            asyncio.create_task(entry.satisfy(data))    # python-ndn's own path (no mark)

    def _on_nack(self, name, nack_reason: int) -> None:
        """NDNApp._on_nack for both tables, skipping entries already ended: one cancelled
        this turn stays in its node until its callback runs, and python-ndn's
        ``nack_interest`` would raise InvalidStateError on it and leave the rest un-nacked."""
        name = Name.normalize(name)
        nodes = [self._exact.pop(b"".join(name), None) if self._exact else None,
                 self._pit.get(name)]
        if nodes[1] is not None:
            del self._pit[name]
        for node in nodes:
            for entry in node.pending_list if node is not None else ():
                if not entry.future.done():
                    entry.future.set_exception(InterestNack(nack_reason))

    def _clean_up(self) -> None:
        for node in self._exact.values():
            node.cancel()
        self._exact.clear()
        super()._clean_up()

    async def _wait_for_data(self, future: asyncio.Future, deadline: int, node_name, node):
        """NDNApp._wait_for_data with the lifetime as one timer on the future itself
        (``asyncio.wait_for`` costs a second future and callbacks per Interest).  Ends in
        InterestTimeout (entry removed), the future's result or exception (Nack, validation
        failure), CancelledError when the awaiting task is cancelled (entry removed), or
        InterestCanceled when the face shut down (python-ndn cancels every pending future)."""
        lifetime = deadline - utils.timestamp()
        if lifetime <= 0:                    # python-ndn's rule: expressed long before awaited
            lifetime = 100
        handle = asyncio.get_running_loop().call_later(
            lifetime / 1000, self._expire, future, node_name, node, self._pit)
        try:
            return await future
        except asyncio.CancelledError:
            self._forget(future, node_name, node, self._pit)
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            raise InterestCanceled() from None
        finally:
            handle.cancel()

    def _expire(self, future: asyncio.Future, key, node, table) -> None:
        if not future.done():
            self._forget(future, key, node, table)
            future.set_exception(InterestTimeout())

    @staticmethod
    def _forget(future: asyncio.Future, key, node, table) -> None:
        """Drop one pending entry, and its node when it was the last — only if the table
        (``_pit`` or ``_exact``) still holds that node (a Data may have removed it and a new
        Interest put another there)."""
        if node.timeout(future) and table.get(key) is node:
            del table[key]

    async def register(self, name, tries: int = 8) -> bool:
        """Register a prefix with our forwarder (rib/register, asked again when lost); it is
        registered again after a reconnect."""
        name = Name.normalize(name)
        if name not in self.registered:
            self.registered.append(name)
        if not self.face.running:
            return False
        answer = await self.command("rib", "register", tries, name=name)
        if answer is None or answer["status_code"] != 200:
            log.error("registration of %s failed: %s", Name.to_str(name),
                      "no answer" if answer is None else
                      f"{answer['status_code']} {answer['status_text']}")
            return False
        return True

    def send_data(self, wire: bytes) -> None:
        """Send a Data nobody asked for (a push); it goes where the forwarder's persistent PIT
        entry says."""
        if not self.face.running:
            self.sent_while_down += 1
            return
        self.face.send(wire)

    async def drain(self) -> None:
        await self.counting.drain()

    @property
    def connected(self) -> bool:
        """Whether the face to the forwarder is up (not lost and waiting to reconnect)."""
        return self.face.running

    def traffic(self) -> dict[str, int]:
        c = self.counting
        return {"bytes_sent": c.bytes_out, "bytes_received": c.bytes_in,
                "packets_sent": c.packets_out, "packets_received": c.packets_in,
                "marks_received": c.marks_in}

    def link_events(self) -> dict[str, int]:
        """Forwarder connection losses survived, packets dropped while it was down, and (with
        link reliability) what the link layer repaired."""
        events = {"reconnects": self.reconnects,
                  "sent_while_down": self.sent_while_down + self.counting.lost_sends}
        if self.lp_reliability:
            events.update({f"lp_{k}": v
                           for k, v in self.counting.reliability_counters.as_dict().items()})
        return events
