"""Forwarder configuration: a TOML file, overridden by command-line flags.

    [listen]                      # unix = "" / tcp = 0 / udp = 0 turn a listener off
    unix = "/run/nfd/nfd.sock"
    tcp = 6363
    udp = 6363
    host = "0.0.0.0"

    [tables]                      # every field of pipelines.Limits, e.g.
    cs_packets = 65536
    ppit_lifetime = 60.0

    [udp]                         # on-demand faces: those a datagram from a new address opens
    idle_timeout = 600.0          # s without a datagram before one closes (as NFD)
    max_on_demand_faces = 1024    # past it the least recently seen closes (NFD has no cap)

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
    rates = "fwd-rates.tsv"       # ndnSIM L3RateTracer shape (forwarder/tracer.py)
    tables = "fwd-tables.tsv"     # Time Node Pit PersistentEntries PersistentFaces Cs
    interval = 1.0
    node = "fwd"
    classifier = "ndnps.protocol.names:classify"  # the packet classes' function (module:function);
                                                  # default: the markers alone (marker_classes)
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from urllib.parse import urlsplit

from .faces.link import LinkParams
from .faces.udp import IDLE_TIMEOUT, MAX_ON_DEMAND_FACES
from .pipelines import Limits
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
    """[udp]: the on-demand faces of the UDP listener (NFD's face_system.udp)."""
    idle_timeout: float = IDLE_TIMEOUT
    max_on_demand_faces: int = MAX_ON_DEMAND_FACES


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

    udp = _expect(data.get("udp", {}), dict, "udp")
    _check_keys(udp, {"idle_timeout", "max_on_demand_faces"}, "udp")
    idle = float(_expect(udp.get("idle_timeout", IDLE_TIMEOUT), (int, float), "udp.idle_timeout"))
    if not idle > 0:                    # nan too
        raise ConfigError(f"udp.idle_timeout: must be > 0 seconds, got {idle}")
    cap = _expect(udp.get("max_on_demand_faces", MAX_ON_DEMAND_FACES), int,
                  "udp.max_on_demand_faces")
    if cap < 1:
        raise ConfigError(f"udp.max_on_demand_faces: must be >= 1, got {cap}")
    cfg.udp_faces = UdpFacesConfig(idle, cap)

    app_links = _expect(data.get("app_links", {}), dict, "app_links")
    _check_keys(app_links, _LINK_KEYS, "app_links")
    cfg.app_link = _link_params(app_links, "app_links")
    cfg.app_link.ingress_loss = cfg.app_link.loss

    names = set()
    uris: dict[str, int] = {}
    for i, face in enumerate(_expect(data.get("faces", []), list, "faces")):
        where = f"faces[{i}]"
        _expect(face, dict, where)
        _check_keys(face, {"name", "uri", "reliability"} | _LINK_KEYS, where)
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
        cfg.faces.append(FaceConfig(name, uri, link, reliability))

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
