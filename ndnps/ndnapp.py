"""python-ndn's NDNApp, adapted in one place for what ndnps needs.

1. Pushed Data reach app code.  ``NDNApp._on_data`` (python-ndn 0.5.2, pinned) hands a Data only
   to pending Interests of its name and drops the rest, so a ``/*distribute*/...`` Data pushed
   along a persistent PIT entry (for which the worker expressed no Interest) would be lost, as
   would the registration confirmation ``/*distribute*/<ps>/<train>`` answering
   ``/*insert*/<ps>/<train>`` (another name).  ``App`` overrides ``_on_data``: every Data whose
   first component is ``*distribute*`` is first given to ``on_distribute(name, meta_info,
   content, sig_ptrs)``, then the normal path runs (so a probe's own pending Interest is still
   satisfied).  This is the only python-ndn internal we touch; no library global is patched.

2. ``express`` ends the way it should.  ``NDNApp._wait_for_data`` turns the CancelledError of
   a task cancelled while awaiting ``express`` into ``InterestCanceled`` (an ordinary
   exception), so cancelling a coroutine would look like a failure; ``App`` re-raises
   CancelledError when the current task is being cancelled.  And python-ndn 0.5.2 races: when
   a Data arrives just as its Interest times out, ``_on_data`` has already removed the PIT node
   (its validation task has not yet set the future) and the timeout path's
   ``del self._pit[node_name]`` raises KeyError out of ``express``; ``App`` reports that as
   the timeout it is (the caller retransmits).

3. The forwarder may go away and come back (restarted): while the face is down, ``express``
   behaves as if the Interest were lost (it times out after its lifetime; ``no_response``
   Interests and ``send_data`` are dropped and counted in ``sent_while_down``), so callers
   retry as they do on a lossy link; ``reconnect()`` opens the face again and
   ``after_reconnect()`` re-registers every prefix registered so far and calls
   ``on_reconnect`` (the worker re-sends its *insert*).  ``apps/launch.py`` reconnects with
   bounded backoff.

4. Byte and packet counters, and back-pressure.  ``CountingFace`` wraps the transport face
   python-ndn would have built (unix/tcp/udp from NDN_CLIENT_TRANSPORT or the client.conf) and
   counts what passes; ``drain()`` waits until the socket's write buffer has drained (pacing).
"""
from __future__ import annotations

import asyncio
from typing import Callable

from ndn.appv2 import NDNApp
from ndn.client_conf import default_face, read_client_conf
from ndn.transport.face import Face
from ndn.types import InterestCanceled, InterestTimeout

from . import names

OnDistribute = Callable[..., None]


class CountingFace(Face):
    """Delegates to `inner`, counting packets and bytes in and out."""

    def __init__(self, inner: Face) -> None:
        self.inner = inner
        super().__init__()
        self.packets_in = self.packets_out = 0
        self.bytes_in = self.bytes_out = 0
        self.lost_sends = 0

    @property
    def running(self) -> bool:                    # type: ignore[override]
        return self.inner.running

    @running.setter
    def running(self, value: bool) -> None:
        self.inner.running = value

    async def open(self) -> None:
        await self.inner.open()

    def shutdown(self) -> None:
        self.inner.shutdown()

    def send(self, data: bytes) -> None:
        self.packets_out += 1
        self.bytes_out += len(data)
        try:
            self.inner.send(data)
        except (RuntimeError, ConnectionError, OSError):
            # the connection dropped before the face noticed: the packet is lost, as on a
            # lossy link (its Interest times out), and counted
            self.lost_sends += 1

    async def run(self) -> None:
        self.inner.callback = self._received
        await self.inner.run()

    async def _received(self, typ: int, data: bytes) -> None:
        self.packets_in += 1
        self.bytes_in += len(data)
        await self.callback(typ, data)

    def isLocalFace(self):
        return self.inner.isLocalFace()

    def write_buffer_size(self) -> int:
        writer = getattr(self.inner, "writer", None)
        if writer is None or writer.transport is None:
            return 0
        return writer.transport.get_write_buffer_size()

    async def drain(self) -> None:
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
                 on_distribute: OnDistribute | None = None) -> None:
        transport = transport or read_client_conf()["transport"]
        self.transport = transport
        self.counting = CountingFace(default_face(transport))
        super().__init__(face=self.counting)
        self.on_distribute = on_distribute
        self.on_reconnect: Callable[[], None] | None = None
        self.registered: list = []               # prefixes to register again on reconnect
        self.reconnects = 0
        self.sent_while_down = 0

    def express(self, name, validator=None, app_param=None, signer=None, **kwargs):
        if not self.face.running:                # the forwarder is gone (for now): lost
            self.sent_while_down += 1
            if kwargs.get("no_response"):
                return None
            lifetime = kwargs.get("lifetime") or 4000
            return self._lost(lifetime / 1000)
        return super().express(name, validator, app_param, signer, **kwargs)

    @staticmethod
    async def _lost(seconds: float):
        await asyncio.sleep(seconds)
        raise InterestTimeout()

    async def reconnect(self) -> None:
        """Open the face again (raises OSError while the forwarder is not back)."""
        await self.counting.open()
        self.reconnects += 1

    async def after_reconnect(self) -> None:
        """Register again every prefix registered so far, then tell the app."""
        for name in list(self.registered):
            await self.register(name)
        if self.on_reconnect is not None:
            self.on_reconnect()

    async def _on_data(self, name, meta_info, content, sig, raw_packet):
        if self.on_distribute is not None and names.is_distribute(name):
            self.on_distribute(name, meta_info, content, sig)
        await super()._on_data(name, meta_info, content, sig, raw_packet)

    async def _wait_for_data(self, *args, **kwargs):
        try:
            return await super()._wait_for_data(*args, **kwargs)
        except KeyError:                      # the timeout/arrival race described above
            raise InterestTimeout() from None
        except InterestCanceled:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise asyncio.CancelledError() from None
            raise

    async def register(self, name, tries: int = 8) -> bool:
        """python-ndn sends one command and gives up at its first timeout; on a lossy link
        the command or its answer may be lost, so ask again (bounded, with backoff)."""
        delay = 0.2
        if name not in self.registered:
            self.registered.append(name)
        for attempt in range(tries):
            if self.face.running and await super().register(name):
                return True
            if attempt + 1 < tries:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
        return False

    def send_data(self, wire: bytes) -> None:
        """Send a Data nobody asked for (a push); it goes where the forwarder's persistent PIT
        entry says."""
        if not self.face.running:
            self.sent_while_down += 1
            return
        self.face.send(wire)

    async def drain(self) -> None:
        await self.counting.drain()

    def traffic(self) -> dict[str, int]:
        c = self.counting
        return {"bytes_sent": c.bytes_out, "bytes_received": c.bytes_in,
                "packets_sent": c.packets_out, "packets_received": c.packets_in}

    def link_events(self) -> dict[str, int]:
        """Forwarder connection losses survived, and packets dropped while it was down."""
        return {"reconnects": self.reconnects,
                "sent_while_down": self.sent_while_down + self.counting.lost_sends}
