"""The forwarder process: listeners, faces and timers around the sans-I/O core."""
from __future__ import annotations

import asyncio
import gc
import logging
import os
import socket
import time
from typing import Callable
from urllib.parse import urlsplit

from ndnps.ndn.clock import run_origin
from ndnps.ndn.tlv import component_offsets, name_from_str

from . import core_build
from .config import Config, FaceConfig
from .face_table import INTERNAL_FACE, FaceInfo
from .faces.base import Face
from .faces.link import LinkParams
from .faces.stream import StreamFace
from .faces.udp import PERMANENT, PERSISTENT, DatagramSocket, UdpChannel
from .mgmt import Management, install
from .pipelines import Forwarder
from .strategy import strategy_by_name
from .tables.rib import CHILD_INHERIT, Route
from .tracer import RateTracer, load_classifier, marker_classes

log = logging.getLogger("forwarder")

TICK_SECONDS = 0.1
# A read's packets go through the core this many at a time, each chunk's output sent before
# the next: the next hop starts on the first packets while we handle the rest (a closed loop
# of 64 Interests otherwise moves in lock step, the forwarder idle while its peers work).
READ_CHUNK = 16
RECONNECT_MIN, RECONNECT_MAX = 0.1, 5.0     # s: a kept config face's reconnection backoff
ORIGIN_STATIC = 255          # NFD's origin for static routes


class ForwarderDaemon:
    """`clock`: the core's and the timers' time (the simulator passes its virtual loop's)."""

    def __init__(self, config: Config, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.clock = clock
        self.fw = Forwarder(config.limits, clock=clock)
        self.fw.network_region = [name_from_str(uri) for uri in config.network_region]
        self.faces: dict[int, Face] = {}
        self.mgmt = Management(self.fw, self.create_face, self.destroy_face,
                               self.set_reliability)
        install(self.fw, self._submit)
        self._servers: list[asyncio.AbstractServer] = []
        self._udp: UdpChannel | None = None
        self._tasks: set[asyncio.Task] = set()
        self._tick_task: asyncio.Task | None = None
        self._face_by_name: dict[str, int] = {}
        # kept config faces: resolved when down (True: reconnect; False: destroyed)
        self._kept: dict[int, asyncio.Future] = {}
        self._trace_files: list = []

    # ---- FaceOwner ------------------------------------------------------------------------

    def face_up(self, face: Face, local: bool, remote_uri: str, local_uri: str,
                persistency: int) -> FaceInfo:
        info = self.fw.add_face(local, remote_uri, local_uri, persistency)
        self.faces[info.id] = face
        log.debug("face %d up: %s (%s)", info.id, remote_uri, "local" if local else "non-local")
        return info

    def receive(self, face: Face, wire: bytes) -> None:
        self.dispatch(self.fw.on_receive(face.info.id, wire))

    def receive_batch(self, face: Face, wires: list[bytes]) -> None:
        """The packets of one read of a stream face: one call into the core and one call per
        out-face per READ_CHUNK packets; all but the last chunk's output is sent at once, the
        last's at the end of the loop turn, with whatever other reads add to it."""
        faces = self.faces
        in_id = face.info.id
        n = len(wires)
        for start in range(0, n, READ_CHUNK):
            last = start + READ_CHUNK >= n
            chunk = wires if start == 0 and last else wires[start:start + READ_CHUNK]
            for face_id, items in self.fw.on_receive_batch(in_id, chunk).items():
                out = faces.get(face_id)
                if out is not None:
                    out.send_many(items)                        # type: ignore[arg-type]
                    if not last:
                        out.flush()

    def face_down(self, face: Face) -> None:
        face_id = face.info.id
        if self.faces.pop(face_id, None) is not None:
            log.debug("face %d down", face_id)
            self.fw.remove_face(face_id)
        down = self._kept.pop(face_id, None)
        if down is not None and not down.done():
            down.set_result(True)           # reconnect

    def dispatch(self, actions: list) -> None:
        faces = self.faces
        for face_id, item in actions:
            face = faces.get(face_id)
            if face is not None:
                face.send(item)

    def _submit(self, interest, in_face: int) -> None:
        """A management Interest the forwarder sent to the internal face: answered by a task."""
        self._spawn(self._manage(interest, in_face))

    async def _manage(self, interest, in_face: int) -> None:
        try:
            reply = await self.mgmt.handle(interest, in_face)
        except Exception:                           # a bug in management must not kill us
            log.exception("management failed")
            return
        if reply is not None:
            self.dispatch(self.fw.on_receive(INTERNAL_FACE, reply))

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- face creation (config and faces/create) -------------------------------------------

    async def create_face(self, uri: str, persistency: int = PERSISTENT,
                          link: LinkParams | None = None,
                          mtu: int | None = None) -> tuple[int, bool]:
        """Open a face toward `uri` (udp4://, tcp4://, ...); returns (face id, newly created).
        `mtu`: a UDP face's longest datagram (None: the channel's rule)."""
        parts = urlsplit(uri)
        scheme = parts.scheme
        if scheme not in ("udp", "udp4", "udp6", "tcp", "tcp4", "tcp6"):
            raise ValueError(f"unsupported face scheme {scheme!r}")
        if not parts.hostname or not parts.port:
            raise ValueError(f"face URI needs host and port: {uri!r}")
        family = socket.AF_INET6 if scheme.endswith("6") else socket.AF_INET
        infos = await asyncio.get_running_loop().getaddrinfo(parts.hostname, parts.port,
                                                             family=family)
        host = str(infos[0][4][0])
        for info in self.fw.faces:
            if info.remote_uri.split("://", 1)[-1] == f"{host}:{parts.port}" and \
                    info.remote_uri.startswith(scheme[:3]):
                return info.id, False
        if scheme.startswith("udp"):
            if self._udp is None:
                raise ValueError("UDP is off on this forwarder (--udp 0)")
            face = self._udp.open_face(host, parts.port, persistency, link, mtu=mtu)
            return face.info.id, True
        loop = asyncio.get_running_loop()
        _, proto = await asyncio.wait_for(loop.create_connection(
            lambda: StreamFace(self, "tcp", persistency, link, local=False), host, parts.port),
            timeout=5)
        return proto.info.id, True

    def configure_face(self, face_cfg: FaceConfig, face_id: int) -> None:
        """A config face is up: named, link reliability as asked, its static routes in."""
        self._face_by_name[face_cfg.name] = face_id
        if face_cfg.reliability:
            self.set_reliability(face_id, True)
        for route in self.config.routes:
            if route.face == face_cfg.name:
                prefix = name_from_str(route.prefix)
                self.fw.rib.add(prefix, len(component_offsets(prefix)),
                                Route(face_id, ORIGIN_STATIC, route.cost, CHILD_INHERIT, None))

    async def _keep_face(self, face_cfg: FaceConfig, tried: asyncio.Future) -> None:
        """A TCP face of the config, kept up as NFD keeps a permanent face: connected at start
        and again whenever it goes down, with backoff (RECONNECT_MIN doubling to
        RECONNECT_MAX, reset once a connection has lasted RECONNECT_MAX), so forwarders may
        start in any order and survive a peer's restart; its routes come back with it (a face
        going down takes them out of the RIB).  `tried` ends with the first try (its
        exception, if the face can never be made: start fails as before)."""
        loop = asyncio.get_running_loop()
        delay = RECONNECT_MIN
        while True:
            try:
                face_id, _ = await self.create_face(face_cfg.uri, PERMANENT, face_cfg.link)
            except (OSError, asyncio.TimeoutError) as e:
                if delay == RECONNECT_MIN:
                    log.warning("face %s (%s) not up: %s; retrying", face_cfg.name, face_cfg.uri,
                                e or type(e).__name__)
                if not tried.done():
                    tried.set_result(False)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RECONNECT_MAX)
                continue
            except Exception as e:
                if not tried.done():
                    tried.set_exception(e)
                raise
            down = self._kept[face_id] = loop.create_future()
            self.configure_face(face_cfg, face_id)
            log.info("face %s (%s) up as %d", face_cfg.name, face_cfg.uri, face_id)
            if not tried.done():
                tried.set_result(True)
            up_at = loop.time()
            if not await down:
                return                      # destroyed by faces/destroy: not kept any more
            if loop.time() - up_at >= RECONNECT_MAX:
                delay = RECONNECT_MIN       # it had been up a while: a fresh failure
            log.warning("face %s (%s) down; reconnecting in %.1f s", face_cfg.name,
                        face_cfg.uri, delay)
            await asyncio.sleep(delay)      # a peer that accepts and hangs up gets no storm
            delay = min(delay * 2, RECONNECT_MAX)

    def set_reliability(self, face_id: int, on: bool) -> bool:
        """faces/update's LpReliabilityEnabled flag: False if there is no such face."""
        face = self.faces.get(face_id)
        if face is None:
            return False
        face.set_reliability(on)
        face.info.lp_reliability = face.reliable.core.counters if face.reliable else None
        return True

    def destroy_face(self, face_id: int) -> bool:
        face = self.faces.get(face_id)
        if face is None:
            return False
        down = self._kept.pop(face_id, None)
        if down is not None and not down.done():
            down.set_result(False)          # destroyed on purpose: not reconnected
        face.close()
        self.face_down(face)
        return True

    # ---- life cycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        cfg = self.config
        if cfg.unix:
            _check_socket_free(cfg.unix)
        if cfg.udp:
            udp = cfg.udp_faces
            self._udp = UdpChannel(self, udp.idle_timeout, udp.max_on_demand_faces,
                                   cfg.app_link, self.fw.faces.counters, mtu=udp.mtu,
                                   queue=udp.queue, reassembly=udp.reassembly)
            DatagramSocket(_udp_socket(cfg.host, cfg.udp, udp.send_buffer),
                           loop).start(self._udp)
        for face_cfg in cfg.faces:
            if face_cfg.uri.startswith("tcp"):
                # kept up by a task of its own; its first try ends before the apps may connect
                tried = loop.create_future()
                self._spawn(self._keep_face(face_cfg, tried))
                await tried
            else:
                face_id, _ = await self.create_face(face_cfg.uri, PERSISTENT, face_cfg.link,
                                                    face_cfg.mtu)
                self.configure_face(face_cfg, face_id)
        self.start_core()
        # listeners for apps last: whoever connects finds the routes and faces in place
        if cfg.unix:
            _remove_stale_socket(cfg.unix)
            os.makedirs(os.path.dirname(cfg.unix) or ".", exist_ok=True)
            self._servers.append(await loop.create_unix_server(
                lambda: StreamFace(self, "unix", link=cfg.app_link), cfg.unix))
            os.chmod(cfg.unix, 0o666)
        if cfg.tcp:
            self._servers.append(await loop.create_server(
                lambda: StreamFace(self, "tcp", link=cfg.app_link), cfg.host, cfg.tcp,
                reuse_address=True))
        # The tables hold many long-lived objects and the hot path allocates few cycles:
        # freeze what exists now and collect young objects far less often than every 700
        # allocations, or collections rescan the PIT/CS/dead-nonce list most of the time.
        gc.freeze()
        gc.set_threshold(50_000, 20, 100)
        log.info("forwarder up: unix=%s tcp=%s udp=%s core=%s", cfg.unix or "off",
                 cfg.tcp or "off", cfg.udp or "off", core_build())

    def start_core(self) -> None:
        """What runs without a socket: the config's strategies, the core's timer, the traces
        (start() calls it once the faces are up; the simulator, whose faces are made for it,
        calls it alone)."""
        cfg = self.config
        for prefix_uri, strategy in cfg.strategies.items():
            prefix = name_from_str(prefix_uri)
            self.fw.strategy_choice.set(prefix, len(component_offsets(prefix)),
                                        strategy_by_name(strategy))
        self._tick_task = asyncio.get_running_loop().create_task(self._tick())
        if cfg.trace.rates or cfg.trace.tables:
            self._spawn(self._trace())

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK_SECONDS)
            self.dispatch(self.fw.tick())
            if self._udp is not None:
                self._udp.tick(self.clock())

    async def _trace(self) -> None:
        """Write the rate and table traces every `trace.interval` seconds."""
        cfg = self.config.trace
        # Time counts from the run's origin (a restarted forwarder's traces go on on the
        # same axis as the apps' metrics), or from our start when run by hand
        self._trace_start = start = run_origin(self.clock)
        tables = None
        if cfg.rates:
            out = open(cfg.rates, "w")
            self._trace_files.append(out)
            classify = load_classifier(cfg.classifier) if cfg.classifier else marker_classes
            self.fw.tracer = RateTracer(cfg.node, classify, out)
        if cfg.tables:
            tables = open(cfg.tables, "w")
            self._trace_files.append(tables)
            tables.write("Time\tNode\tPit\tPersistentEntries\tPersistentFaces\tCs\n")
        while True:
            await asyncio.sleep(cfg.interval)
            now = round(self.clock() - start, 3)
            if self.fw.tracer is not None:
                self.fw.tracer.flush(now)
            if tables is not None:
                ppit = self.fw.ppit.entries()
                tables.write(f"{now}\t{cfg.node}\t{len(self.fw.pit)}\t{len(ppit)}\t"
                             f"{sum(len(e.faces) for e in ppit)}\t{len(self.fw.cs)}\n")
                tables.flush()

    async def stop(self) -> None:
        if self._tick_task is not None:
            self._tick_task.cancel()
        for server in self._servers:
            server.close()
        for face in list(self.faces.values()):
            face.close()
        if self._udp is not None:
            self._udp.close()
        for task in list(self._tasks):
            task.cancel()
        if self.config.unix:
            _remove_stale_socket(self.config.unix)
        if self.fw.tracer is not None:
            self.fw.tracer.flush(round(self.clock() - self._trace_start, 3))
        for f in self._trace_files:
            f.close()


UDP_RECEIVE_BUFFER_BYTES = 16 << 20


def _udp_socket(host: str, port: int, send_buffer: int) -> socket.socket:
    """A bound UDP socket with a large receive buffer — a push or a round of gradients is a
    burst of datagrams, and the default ~200 KiB overflows (silent loss) — and a small send
    buffer, so that a bottleneck pushes back on the forwarder's queues (faces/udp.py)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    for force, plain, size in ((getattr(socket, "SO_RCVBUFFORCE", None), socket.SO_RCVBUF,
                                UDP_RECEIVE_BUFFER_BYTES),
                               (getattr(socket, "SO_SNDBUFFORCE", None), socket.SO_SNDBUF,
                                send_buffer)):
        try:
            sock.setsockopt(socket.SOL_SOCKET, force or plain, size)
        except (OSError, TypeError):      # not root: as much as net.core.*mem_max allows
            sock.setsockopt(socket.SOL_SOCKET, plain, size)
    sock.bind((host, port))
    sock.setblocking(False)
    return sock


def _check_socket_free(path: str) -> None:
    """Refuse to take over the socket of a forwarder that is still running."""
    if not os.path.exists(path):
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError:
        return                                  # stale file: nobody listens
    finally:
        probe.close()
    raise RuntimeError(f"another forwarder is listening on {path}")


def _remove_stale_socket(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
