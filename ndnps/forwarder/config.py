"""Forwarder configuration: a TOML file, overridden by command-line flags.

    [listen]                      # unix = "" / tcp = 0 / udp = 0 turn a listener off
    unix = "/run/nfd/nfd.sock"
    tcp = 6363
    udp = 6363
    host = "0.0.0.0"

    [tables]                      # every field of outgoing.Limits, e.g.
    cs_packets = 65536
    ppit_lifetime = 60.0

    [udp]                         # on-demand faces: those a datagram from a new address opens
    idle_timeout = 600.0          # s without a datagram before one closes (as NFD)
    max_on_demand_faces = 1024    # past it the least recently seen closes (NFD has no cap)
                                  # every UDP face (docs/forwarder.md, "UDP faces on a bottleneck"):
    mtu = 1472                    # longest datagram toward a non-loopback peer (IPv6: 1452);
                                  # longer packets go as NDNLPv2 fragments; loopback: 8800
    send_buffer = 65536           # SO_SNDBUF: small, so the backlog waits in the faces' queues
    queue_limit_bytes = 1048576   # a face's send queue; packets past it are dropped (queue_full)
    queue_target_ms = 5.0         # CongestionMark once the queue's delay stays above target
    queue_interval_ms = 100.0     # for this long (then interval/sqrt(k) after the k-th mark)
    queue_step_ms = 20.0          # past this delay every packet is marked (0: never)
    congestion_marking = true
    reassembly_timeout_ms = 500.0 # a partial packet is dropped this long after its last fragment
    reassembly_limit_bytes = 1048576  # fragments held per face

    [app_links]                   # emulation on faces the listeners accept (apps' links):
    loss = 0.0                    # both directions, since the app emulates nothing
    delay_ms = 0.0                # delay, jitter, rate: on what the forwarder sends
    jitter_ms = 0.0
    rate_mbps = 0.0

    [[faces]]                     # faces toward other forwarders
    name = "root"
    uri = "udp4://127.0.0.1:6364"
    loss = 0.0                    # link emulation on what this face sends
    delay_ms = 0.0
    jitter_ms = 0.0
    rate_mbps = 0.0
    reliability = false           # NDNLPv2 link reliability (the peer's face must have it too)
    mtu = 1472                    # udp faces: this face's datagrams (default: [udp] mtu)

    [[routes]]
    prefix = "/ps"
    face = "root"                 # a [[faces]] name
    cost = 0

    [[strategies]]
    prefix = "/ps"
    strategy = "multicast"        # or "best-route", or NFD's instance name with parameters:
                                  # "/localhost/nfd/strategy/best-route/v=5/retx-suppression-initial~2"

A top-level key (before the first table): network_region = ["/isp/site"], NFD's
tables.network_region: the producer regions this forwarder is in (ForwardingHint stripped).

    [trace]                       # rates per face and packet class, table sizes (TSV)
    rates = "fwd-rates.tsv"       # ndnSIM L3RateTracer shape (ndnps/forwarder/tracer.py)
    tables = "fwd-tables.tsv"     # Time Node Pit PersistentEntries PersistentFaces Cs
    interval = 1.0
    node = "fwd"
    classifier = "ndnps.protocol.names:classify"  # the packet classes' function (module:function);
                                                  # default: the markers alone (marker_classes)
"""
from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from urllib.parse import urlsplit

from ndnps.ndn.fragmentation import ReassemblyOptions
from ndnps.ndn.tlv import MAX_PACKET_SIZE

from .faces.link import LinkParams
from .faces.queue import QueueOptions
from .faces.udp import IDLE_TIMEOUT, MAX_ON_DEMAND_FACES, MIN_MTU, SEND_BUFFER_BYTES
from .outgoing import Limits
from .strategy import strategy_by_name
from .tracer import load_classifier

DEFAULT_UNIX = "/run/nfd/nfd.sock"     # python-ndn's default transport
DEFAULT_PORT = 6363


class ConfigError(ValueError):
    """A bad configuration value; the message names the offending key."""


@dataclass
class FaceConfig:
    name: str
    uri: str
    link: LinkParams = field(default_factory=LinkParams)
    reliability: bool = False      # NDNLPv2 link reliability, as faces/create's flag asks
    mtu: int | None = None         # UDP: None is the channel's (or 8800 toward loopback)


@dataclass
class RouteConfig:
    prefix: str
    face: str
    cost: int = 0


@dataclass
class TraceConfig:
    rates: str = ""
    tables: str = ""
    interval: float = 1.0
    node: str = "fwd"
    classifier: str = ""


@dataclass
class UdpFacesConfig:
    """[udp]: the UDP listener's faces (NFD's face_system.udp) and their link service."""
    idle_timeout: float = IDLE_TIMEOUT
    max_on_demand_faces: int = MAX_ON_DEMAND_FACES
    mtu: int | None = None          # non-loopback faces; None: by address family
    send_buffer: int = SEND_BUFFER_BYTES
    queue: QueueOptions = field(default_factory=QueueOptions)
    reassembly: ReassemblyOptions = field(default_factory=ReassemblyOptions)


@dataclass
class Config:
    unix: str = DEFAULT_UNIX
    tcp: int = DEFAULT_PORT
    udp: int = DEFAULT_PORT
    host: str = "0.0.0.0"
    limits: Limits = field(default_factory=Limits)
    app_link: LinkParams = field(default_factory=LinkParams)
    udp_faces: UdpFacesConfig = field(default_factory=UdpFacesConfig)
    faces: list[FaceConfig] = field(default_factory=list)
    routes: list[RouteConfig] = field(default_factory=list)
    strategies: dict[str, str] = field(default_factory=dict)
    trace: TraceConfig = field(default_factory=TraceConfig)
    network_region: list[str] = field(default_factory=list)


def _expect(value, types, key: str):
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise ConfigError(f"{key}: expected {_tname(types)}, got {value!r}")
    if not isinstance(value, types):
        raise ConfigError(f"{key}: expected {_tname(types)}, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):   # past every bound otherwise
        raise ConfigError(f"{key}: expected a finite number, got {value!r}")
    return value


def _tname(types) -> str:
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join(t.__name__ for t in types)


def _check_keys(table: dict, allowed: set[str], where: str) -> None:
    for key in table:
        if key not in allowed:
            raise ConfigError(f"{where}.{key}: unknown key (known: {', '.join(sorted(allowed))})")


def parse_config(data: dict) -> Config:
    cfg = Config()
    _check_keys(data, {"listen", "tables", "udp", "app_links", "faces", "routes", "strategies",
                       "trace", "network_region"}, "config")
    listen = _expect(data.get("listen", {}), dict, "listen")
    _check_keys(listen, {"unix", "tcp", "udp", "host"}, "listen")
    cfg.unix = _expect(listen.get("unix", cfg.unix), str, "listen.unix")
    for key in ("tcp", "udp"):
        port = _expect(listen.get(key, getattr(cfg, key)), int, f"listen.{key}")
        if not 0 <= port <= 65535:
            raise ConfigError(f"listen.{key}: port {port} out of range")
        setattr(cfg, key, port)
    cfg.host = _expect(listen.get("host", cfg.host), str, "listen.host")

    tables = _expect(data.get("tables", {}), dict, "tables")
    limit_fields = {f.name: f for f in fields(Limits)}
    _check_keys(tables, set(limit_fields), "tables")
    for key, value in tables.items():
        default = getattr(cfg.limits, key)
        value = _expect(value, (int, float) if isinstance(default, float) else int, f"tables.{key}")
        if value < 0:
            raise ConfigError(f"tables.{key}: must be >= 0")
        setattr(cfg.limits, key, type(default)(value))

    cfg.udp_faces = _udp_faces(_expect(data.get("udp", {}), dict, "udp"))

    app_links = _expect(data.get("app_links", {}), dict, "app_links")
    _check_keys(app_links, _LINK_KEYS, "app_links")
    cfg.app_link = _link_params(app_links, "app_links")
    cfg.app_link.ingress_loss = cfg.app_link.loss

    names = set()
    uris: dict[str, int] = {}
    for i, face in enumerate(_expect(data.get("faces", []), list, "faces")):
        where = f"faces[{i}]"
        _expect(face, dict, where)
        _check_keys(face, {"name", "uri", "reliability", "mtu"} | _LINK_KEYS, where)
        uri = _expect(face.get("uri"), str, f"{where}.uri")
        if not uri.startswith(("udp4://", "udp6://", "tcp4://", "tcp6://", "udp://", "tcp://")) \
                or not _host_and_port(uri):
            raise ConfigError(f"{where}.uri: expected udp4://HOST:PORT or tcp4://HOST:PORT, got {uri!r}")
        if uri in uris:
            raise ConfigError(f"{where}.uri: {uri!r} is already faces[{uris[uri]}]")
        uris[uri] = i
        name = _expect(face.get("name", uri), str, f"{where}.name")
        if name in names:
            raise ConfigError(f"{where}.name: duplicate face name {name!r}")
        names.add(name)
        link = _link_params(face, where)
        reliability = _expect(face.get("reliability", False), bool, f"{where}.reliability")
        mtu = None
        if "mtu" in face:
            if not uri.startswith("udp"):
                raise ConfigError(f"{where}.mtu: only UDP faces have an MTU, not {uri!r}")
            mtu = _bounded(face, "mtu", where, 0, int, MIN_MTU, MAX_PACKET_SIZE)
        cfg.faces.append(FaceConfig(name, uri, link, reliability, mtu))

    for i, route in enumerate(_expect(data.get("routes", []), list, "routes")):
        where = f"routes[{i}]"
        _expect(route, dict, where)
        _check_keys(route, {"prefix", "face", "cost"}, where)
        prefix = _expect(route.get("prefix"), str, f"{where}.prefix")
        face = _expect(route.get("face"), str, f"{where}.face")
        if face not in names:
            raise ConfigError(f"{where}.face: no [[faces]] entry named {face!r}")
        cost = _expect(route.get("cost", 0), int, f"{where}.cost")
        cfg.routes.append(RouteConfig(prefix, face, cost))

    for i, choice in enumerate(_expect(data.get("strategies", []), list, "strategies")):
        where = f"strategies[{i}]"
        _expect(choice, dict, where)
        _check_keys(choice, {"prefix", "strategy"}, where)
        prefix = _expect(choice.get("prefix"), str, f"{where}.prefix")
        strategy = _expect(choice.get("strategy"), str, f"{where}.strategy")
        try:
            strategy_by_name(strategy)
        except ValueError as e:
            raise ConfigError(f"{where}.strategy: {e}") from None
        cfg.strategies[prefix] = strategy

    for i, region in enumerate(_expect(data.get("network_region", []), list, "network_region")):
        region = _expect(region, str, f"network_region[{i}]")
        if not region.startswith("/") or region == "/":
            raise ConfigError(f"network_region[{i}]: expected a name such as /isp/site, "
                              f"got {region!r}")
        cfg.network_region.append(region)

    trace = _expect(data.get("trace", {}), dict, "trace")
    _check_keys(trace, {"rates", "tables", "interval", "node", "classifier"}, "trace")
    for key in ("rates", "tables", "node", "classifier"):
        setattr(cfg.trace, key, _expect(trace.get(key, getattr(cfg.trace, key)), str,
                                        f"trace.{key}"))
    cfg.trace.interval = float(_expect(trace.get("interval", 1.0), (int, float), "trace.interval"))
    if cfg.trace.interval <= 0:
        raise ConfigError("trace.interval: must be > 0")
    if cfg.trace.classifier:
        try:
            load_classifier(cfg.trace.classifier)
        except ValueError as e:
            raise ConfigError(f"trace.classifier: {e}") from None
    return cfg


def _udp_faces(udp: dict) -> UdpFacesConfig:
    _check_keys(udp, {"idle_timeout", "max_on_demand_faces", "mtu", "send_buffer",
                      "queue_limit_bytes", "queue_target_ms", "queue_interval_ms",
                      "queue_step_ms", "congestion_marking", "reassembly_timeout_ms", "reassembly_limit_bytes"},
                "udp")
    out = UdpFacesConfig()
    out.idle_timeout = float(_bounded(udp, "idle_timeout", "udp", out.idle_timeout,
                                      (int, float), 0, above=True))
    out.max_on_demand_faces = _bounded(udp, "max_on_demand_faces", "udp",
                                       out.max_on_demand_faces, int, 1)
    if "mtu" in udp:
        out.mtu = _bounded(udp, "mtu", "udp", 0, int, MIN_MTU, MAX_PACKET_SIZE)
    out.send_buffer = _bounded(udp, "send_buffer", "udp", out.send_buffer, int, 4096, 64 << 20)
    q = out.queue
    q.limit_bytes = _bounded(udp, "queue_limit_bytes", "udp", q.limit_bytes, int,
                             MAX_PACKET_SIZE)
    q.target = _bounded(udp, "queue_target_ms", "udp", q.target * 1e3, (int, float), 0,
                        above=True) / 1e3
    q.interval = _bounded(udp, "queue_interval_ms", "udp", q.interval * 1e3, (int, float), 0,
                          above=True) / 1e3
    q.step = _bounded(udp, "queue_step_ms", "udp", q.step * 1e3, (int, float), 0) / 1e3
    if q.step and q.step < q.target:
        raise ConfigError("udp.queue_step_ms: must be 0 or at least queue_target_ms")
    q.marking = _expect(udp.get("congestion_marking", q.marking), bool, "udp.congestion_marking")
    r = out.reassembly
    r.timeout = _bounded(udp, "reassembly_timeout_ms", "udp", r.timeout * 1e3, (int, float), 0,
                         above=True) / 1e3
    r.max_bytes = _bounded(udp, "reassembly_limit_bytes", "udp", r.max_bytes, int,
                           MAX_PACKET_SIZE)
    return out


def _bounded(table: dict, key: str, where: str, default, types, low: float,
             high: float | None = None, above: bool = False):
    """table[key] (or `default`) of `types`, at least `low` (above it, if `above`) and at most
    `high`; ConfigError naming `where.key` otherwise (nan too)."""
    value = _expect(table.get(key, default), types, f"{where}.{key}")
    if not (value > low if above else value >= low) or (high is not None and not value <= high):
        bound = f"> {low}" if above else f">= {low}"
        if high is not None:
            bound += f" and <= {high}"
        raise ConfigError(f"{where}.{key}: must be {bound}, got {value}")
    return value


def _host_and_port(uri: str) -> bool:
    try:
        parts = urlsplit(uri)
        host, port = parts.hostname, parts.port
    except ValueError:                  # a port out of range or not a number
        return False
    return bool(host) and port is not None and port > 0 \
        and all(0 < len(label) < 64 for label in (host or "").split("."))


_LINK_KEYS = {"loss", "delay_ms", "jitter_ms", "rate_mbps", "queue_bytes"}


def _link_params(table: dict, where: str) -> LinkParams:
    link = LinkParams()
    for key in ("loss", "delay_ms", "jitter_ms", "rate_mbps"):
        if key in table:
            setattr(link, key, float(_expect(table[key], (int, float), f"{where}.{key}")))
    if "queue_bytes" in table:
        link.queue_bytes = _expect(table["queue_bytes"], int, f"{where}.queue_bytes")
    try:
        link.validate()
    except ValueError as e:
        raise ConfigError(f"{where}: {e}") from None
    return link


def read_toml(path: str | Path, error: type[ValueError] = ConfigError) -> dict:
    """A TOML file as a dict; an unreadable or malformed file raises `error` naming it."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise error(f"cannot read {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise error(f"{path}: {e}") from None


def load_config(path: str | Path | None) -> Config:
    if path is None:
        return Config()
    return parse_config(read_toml(path))
